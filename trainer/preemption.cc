// Note [SIGTERM has two listeners] (preemption.h) is the design.
#include "trainer/preemption.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/collective/flight_dumps.h"

namespace mtb {
namespace {

std::atomic<bool> received{false};
// Nanoseconds since the epoch of the first notice.
std::atomic<int64_t> received_at_ns{0};
// What the handler writes; formatted before the handler is installed.
std::string* notice_line = nullptr;

void OnSigterm(int) {
  const int saved_errno = errno;
  timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  int64_t first = 0;
  // The time first, then the flag: a reader that sees the flag sees the time.
  if (received_at_ns.compare_exchange_strong(
          first, static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec)) {
    (void)!::write(STDERR_FILENO, notice_line->data(), notice_line->size());
  }
  received.store(true);
  collective::RequestFlightRecorderDumps(SIGTERM);
  errno = saved_errno;
}

}  // namespace

void InstallPreemptionHandler(int rank) {
  static std::once_flag installed;
  std::call_once(installed, [rank] {
    struct sigaction current = {};
    if (::sigaction(SIGTERM, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) return;
    notice_line =
        new std::string(absl::StrCat("rank ", rank,
                                     ": SIGTERM (a preemption notice, or the launcher's teardown): "
                                     "finishing this step, then saving a checkpoint "
                                     "of it and exiting 4\n"));
    struct sigaction action = {};
    action.sa_handler = OnSigterm;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGTERM, &action, nullptr);
  });
}

bool PreemptionNoticeReceived() { return received.load(); }

absl::Time PreemptionNoticeTime() {
  if (!received.load()) return absl::InfinitePast();
  return absl::FromUnixNanos(received_at_ns.load());
}

}  // namespace mtb
