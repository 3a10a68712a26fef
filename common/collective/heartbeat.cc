#include "common/collective/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mtb::collective {
namespace {

constexpr absl::string_view kTag = "mtb-heartbeat";

// Phase and op names are single words; anything else would split the line.
std::string Word(absl::string_view text) {
  if (text.empty()) return "-";
  std::string word(text);
  for (char& c : word) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || c == '=') c = '_';
  }
  return word;
}

}  // namespace

std::string FormatHeartbeat(const RankProgress& p) {
  return absl::StrCat(kTag, " step=", p.step, " phase=", Word(p.phase),
                      " collective=", p.collective, " op=", Word(p.collective_op),
                      " waiting=", p.waiting ? 1 : 0, " last_completed=", p.last_completed,
                      " issued=", p.issued, " counter=", p.counter, " steady=", p.steady ? 1 : 0,
                      " done=", p.done ? 1 : 0, " step_ms=", p.last_step_ms,
                      " slowest_step_ms=", p.slowest_step_ms, " save_ms=", p.last_save_ms);
}

absl::StatusOr<RankProgress> ParseHeartbeat(absl::string_view line) {
  const std::vector<absl::string_view> words =
      absl::StrSplit(absl::StripAsciiWhitespace(line), ' ', absl::SkipEmpty());
  if (words.empty() || words[0] != kTag) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a heartbeat line (no '", kTag, "'): '", line, "'"));
  }
  std::map<std::string, std::string> fields;
  for (size_t i = 1; i < words.size(); ++i) {
    const std::vector<std::string> kv = absl::StrSplit(words[i], absl::MaxSplits('=', 1));
    if (kv.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("heartbeat field '", words[i], "' is not key=value"));
    }
    fields[kv[0]] = kv[1];
  }
  RankProgress p;
  auto text = [&](const char* key, std::string* out) -> absl::Status {
    auto it = fields.find(key);
    if (it == fields.end()) {
      return absl::InvalidArgumentError(absl::StrCat("heartbeat lacks '", key, "'"));
    }
    *out = it->second == "-" ? "" : it->second;
    return absl::OkStatus();
  };
  auto number = [&](const char* key, int64_t* out) -> absl::Status {
    std::string value;
    if (absl::Status found = text(key, &value); !found.ok()) return found;
    if (!absl::SimpleAtoi(value, out)) {
      return absl::InvalidArgumentError(
          absl::StrCat("heartbeat field ", key, "='", value, "' is not a number"));
    }
    return absl::OkStatus();
  };
  int64_t waiting = 0, steady = 0, done = 0;
  for (const absl::Status& status :
       {number("step", &p.step), text("phase", &p.phase),
        number("collective", &p.collective), text("op", &p.collective_op),
        number("waiting", &waiting), number("last_completed", &p.last_completed),
        number("issued", &p.issued), number("counter", &p.counter),
        number("steady", &steady), number("done", &done)}) {
    if (!status.ok()) return status;
  }
  // Optional: a sender that does not time its steps leaves them out.
  for (auto [key, out] : {std::pair<const char*, int64_t*>{"step_ms", &p.last_step_ms},
                          {"slowest_step_ms", &p.slowest_step_ms},
                          {"save_ms", &p.last_save_ms}}) {
    if (fields.count(key) == 0) continue;
    if (absl::Status status = number(key, out); !status.ok()) return status;
  }
  p.waiting = waiting != 0;
  p.steady = steady != 0;
  p.done = done != 0;
  return p;
}

HeartbeatSender::HeartbeatSender(std::shared_ptr<FlightRecorder> recorder,
                                 int fd, absl::Duration interval)
    : recorder_(std::move(recorder)), fd_(fd), interval_(interval) {
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  ::fcntl(fd_, F_SETFD, FD_CLOEXEC);
  thread_ = std::thread([this] {
    do {
      Send();
    } while (!stop_.WaitForNotificationWithTimeout(interval_));
  });
}

HeartbeatSender::~HeartbeatSender() {
  stop_.Notify();
  thread_.join();
  recorder_->MarkDone();
  Send();
  ::close(fd_);
}

void HeartbeatSender::Send() {
  const std::string line =
      absl::StrCat(FormatHeartbeat(recorder_->Progress()), "\n");
  // One write of a short line into a pipe is atomic; a full pipe drops it.
  (void)!::write(fd_, line.data(), line.size());
}

}  // namespace mtb::collective
