#include "common/launch/timeouts.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(absl::Duration, connect_timeout, mtb::TimeoutOptions().connect_timeout,
          "how long a rank waits to reach the store and for every peer to "
          "join the group");
ABSL_FLAG(absl::Duration, first_step_timeout,
          mtb::TimeoutOptions().first_step_timeout,
          "per-collective timeout until the first step (or sweep point, or "
          "check) completes; generous: start-up costs land there");
ABSL_FLAG(absl::Duration, collective_timeout,
          mtb::TimeoutOptions().collective_timeout,
          "per-collective timeout after the first step: a hung peer fails "
          "the run after this long");
ABSL_FLAG(absl::Duration, wait_progress_every, mtb::TimeoutOptions().wait_progress_every,
          "while waiting for peers to join, print who has joined and who is "
          "missing this often; the launcher likewise says who waits for whom "
          "while a rank waits in a collective and the group makes no progress");

namespace mtb {

TimeoutOptions TimeoutOptionsFromFlags() {
  TimeoutOptions options;
  options.connect_timeout = absl::GetFlag(FLAGS_connect_timeout);
  options.first_step_timeout = absl::GetFlag(FLAGS_first_step_timeout);
  options.collective_timeout = absl::GetFlag(FLAGS_collective_timeout);
  options.wait_progress_every = absl::GetFlag(FLAGS_wait_progress_every);
  return options;
}

absl::Status ValidateTimeoutOptions(const TimeoutOptions& options) {
  const struct {
    const char* flag;
    absl::Duration value;
  } positive[] = {
      {"--connect_timeout", options.connect_timeout},
      {"--first_step_timeout", options.first_step_timeout},
      {"--collective_timeout", options.collective_timeout},
      {"--wait_progress_every", options.wait_progress_every},
  };
  for (const auto& [flag, value] : positive) {
    if (value <= absl::ZeroDuration() || value == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, "=", absl::FormatDuration(value),
                       " must be a positive, finite duration"));
    }
  }
  if (options.connect_timeout < absl::Seconds(2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--connect_timeout=", absl::FormatDuration(options.connect_timeout),
        " must be at least 2s (c10d retries the store about once a second)"));
  }
  if (options.first_step_timeout < options.collective_timeout) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--first_step_timeout=",
        absl::FormatDuration(options.first_step_timeout),
        " must be >= --collective_timeout=",
        absl::FormatDuration(options.collective_timeout),
        ": the first step is the steady state plus start-up"));
  }
  return absl::OkStatus();
}

absl::Status ValidateHeartbeatTimeout(absl::Duration heartbeat_timeout,
                                      const TimeoutOptions& options) {
  if (heartbeat_timeout <= absl::ZeroDuration() ||
      heartbeat_timeout < options.collective_timeout) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--heartbeat_timeout=", absl::FormatDuration(heartbeat_timeout),
      " must be < --collective_timeout=",
      absl::FormatDuration(options.collective_timeout),
      ": in a hang the waiting ranks' collective timeout would end the run "
      "before the launcher could name the rank they wait for (0 turns the "
      "heartbeat off)"));
}

}  // namespace mtb
