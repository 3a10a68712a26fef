#include "common/collective/clock_sync.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "glog/logging.h"

namespace mtb::collective {
namespace {

std::string Key(int rank, int round, const char* what) {
  return absl::StrCat("clock_sync/", rank, "/", round, "/", what);
}

}  // namespace

// Whole microseconds since the epoch: exact as text and in a double.
int64_t SystemClockUs() { return absl::ToInt64Microseconds(absl::Now() - absl::UnixEpoch()); }

ClockOffset BestClockOffset(const std::vector<ClockSample>& samples) {
  CHECK(!samples.empty());
  ClockOffset best;
  best.rtt_us = std::numeric_limits<double>::infinity();
  for (const ClockSample& s : samples) {
    const double rtt = static_cast<double>(s.received_us - s.sent_us);
    if (rtt < best.rtt_us) {
      best.rtt_us = rtt;
      best.offset_us = static_cast<double>(s.server_us) -
                       (static_cast<double>(s.sent_us) + static_cast<double>(s.received_us)) / 2;
    }
  }
  return best;
}

absl::StatusOr<ClockOffset> EstimateClockOffset(const Store& store, int rank,
                                                int world_size, int rounds,
                                                absl::Duration timeout,
                                                const ClockUs& now_us) {
  Store clock = store;
  if (rank == 0) {
    // Round-major, so every rank's k-th ping is answered before anyone's
    // (k+1)-th: no rank waits behind all the rounds of another.
    for (int round = 0; round < rounds; ++round) {
      for (int peer = 1; peer < world_size; ++peer) {
        RETURN_IF_ERROR(clock.Get(Key(peer, round, "ping"), timeout).status());
        RETURN_IF_ERROR(clock.Set(Key(peer, round, "pong"), absl::StrCat(now_us())));
      }
    }
    return ClockOffset{};
  }
  std::vector<ClockSample> samples;
  for (int round = 0; round < rounds; ++round) {
    ClockSample sample;
    sample.sent_us = now_us();
    RETURN_IF_ERROR(clock.Set(Key(rank, round, "ping"), "1"));
    ASSIGN_OR_RETURN(const std::string answer, clock.Get(Key(rank, round, "pong"), timeout));
    sample.received_us = now_us();
    if (!absl::SimpleAtoi(answer, &sample.server_us)) {
      return absl::DataLossError(absl::StrCat("clock sync: bad answer '", answer, "'"));
    }
    samples.push_back(sample);
  }
  if (samples.empty()) return ClockOffset{};
  return BestClockOffset(samples);
}

}  // namespace mtb::collective
