// The launcher's signal handling: SIGINT, SIGTERM, SIGHUP and SIGCHLD become
// bytes in a self-pipe that the supervisor's poll loop reads, so nothing but
// write(2) runs in handler context, whichever thread the kernel picks.
#ifndef MTB_COMMON_LAUNCH_SIGNAL_ROUTING_H_
#define MTB_COMMON_LAUNCH_SIGNAL_ROUTING_H_

#include <signal.h>

#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace mtb {

// The signals a launcher forwards to its ranks.
inline constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Installs the handlers (and ignores SIGPIPE) while it lives; the destructor
// restores what was there. A forwarded signal this process was started with
// ignored (nohup, a background job's SIGINT) stays ignored. One instance per
// process at a time.
class SignalRouting {
 public:
  SignalRouting() = default;
  SignalRouting(const SignalRouting&) = delete;
  SignalRouting& operator=(const SignalRouting&) = delete;
  ~SignalRouting();

  absl::Status Install();

  // Readable when a signal has arrived: poll it.
  int read_fd() const { return read_fd_; }

  // The signals received since the last call, in order of arrival.
  std::vector<int> Drain();

 private:
  void Replace(int signal_number, const struct sigaction& action);

  int read_fd_ = -1;
  std::vector<std::pair<int, struct sigaction>> previous_;
};

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_SIGNAL_ROUTING_H_
