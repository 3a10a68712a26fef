// A rank's heartbeat to its launcher: every interval, one line with where the
// rank is (RankProgress, flight_recorder.h) written to a pipe the launcher
// gave it (MTB_HEARTBEAT_FD, docs/launch.md). The launcher's watch
// (common/launch/heartbeat_watch.h) names the rank the group waits for when
// nobody makes progress. Torch-free.
//
//   mtb-heartbeat step=3 phase=forward collective=-1 op=- waiting=0
//   last_completed=40 issued=41 counter=187 steady=1 done=0 step_ms=850
//   slowest_step_ms=910 save_ms=0
//
// (one line; `op` and `phase` are "-" when empty; the three times may be
// absent: 0).
#ifndef MTB_COMMON_COLLECTIVE_HEARTBEAT_H_
#define MTB_COMMON_COLLECTIVE_HEARTBEAT_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/collective/flight_recorder.h"

namespace mtb::collective {

// The line above, without a newline.
std::string FormatHeartbeat(const RankProgress& progress);
// Its inverse; kInvalidArgument naming what is wrong.
absl::StatusOr<RankProgress> ParseHeartbeat(absl::string_view line);

// Writes FormatHeartbeat(recorder->Progress()) to `fd` at once and every
// `interval` from a thread of its own, until destroyed; the destructor marks
// the recorder done and writes a last line saying so. The fd is made
// non-blocking: a launcher that stops reading costs lines, never a stuck rank.
// Owns `fd`.
class HeartbeatSender {
 public:
  HeartbeatSender(std::shared_ptr<FlightRecorder> recorder, int fd,
                  absl::Duration interval);
  ~HeartbeatSender();
  HeartbeatSender(const HeartbeatSender&) = delete;
  HeartbeatSender& operator=(const HeartbeatSender&) = delete;

 private:
  void Send();

  const std::shared_ptr<FlightRecorder> recorder_;
  const int fd_;
  const absl::Duration interval_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_HEARTBEAT_H_
