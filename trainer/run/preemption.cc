// Note [SIGTERM has two listeners] (preemption.h) is the design.
#include "trainer/run/preemption.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/collective/flight_dumps.h"

namespace mtb {
namespace {

std::atomic<bool> received{false};
// Nanoseconds since the epoch of the first notice.
std::atomic<int64_t> received_at_ns{0};
// What the handler writes; formatted before the handler is installed.
std::string* notice_line = nullptr;
// "rank 1: SIGTERM (...): " for a declined notice; the handler adds the rest.
std::string* decline_prefix = nullptr;
struct sigaction previous_action;

// Note [a save that cannot fit] (preemption.h): what the handler reads.
std::atomic<int64_t> kill_grace_ms{5000};
std::atomic<bool> launcher_sizes{false};
std::atomic<int64_t> step_start_ns{0};  // 0: no step yet
std::atomic<int64_t> last_step_ms{0};   // 0: not timed yet
std::atomic<int64_t> last_save_ms{0};

// The main thread's own bookkeeping (NotePreemptionPhase).
int64_t noted_step = -1;
int64_t first_step = -1;
bool in_save = false;
absl::Time step_start;
absl::Time save_start;
absl::Duration save_in_step;

// Async-signal-safe text: appends to a fixed buffer.
struct Text {
  char data[512];
  size_t size = 0;
  void Add(const char* text) {
    while (*text != '\0' && size < sizeof(data)) data[size++] = *text++;
  }
  void Add(int64_t value) {
    char digits[24];
    int n = 0;
    if (value < 0) {
      Add("-");
      value = -value;
    }
    do {
      digits[n++] = static_cast<char>('0' + value % 10);
      value /= 10;
    } while (value > 0);
    while (n > 0 && size < sizeof(data)) data[size++] = digits[--n];
  }
  // 2000 -> "2s", 3450 -> "3.5s" (rounded to a tenth).
  void AddSeconds(int64_t ms) {
    const int64_t tenths = (ms + 50) / 100;
    Add(tenths / 10);
    if (tenths % 10 != 0) {
      Add(".");
      Add(tenths % 10);
    }
    Add("s");
  }
};

int64_t NowNs() {
  timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// Whether finishing this step and saving fit in the grace; when not, says
// so on stderr.
bool SaveFits(int64_t now_ns) {
  const int64_t start = step_start_ns.load();
  const int64_t so_far_ms = start > 0 ? (now_ns - start) / 1000000 : 0;
  const int64_t step_ms = std::max(last_step_ms.load(), so_far_ms);
  const int64_t save_ms = last_save_ms.load();
  const int64_t need_ms = 2 * (step_ms + save_ms);
  int64_t grace_ms = kill_grace_ms.load();
  if (launcher_sizes.load()) {
    const int64_t granted_ms = 2 * (last_step_ms.load() + save_ms);
    grace_ms = std::max(grace_ms, (granted_ms + 999) / 1000 * 1000);
  }
  if (need_ms <= grace_ms) return true;
  Text line;
  line.Add(decline_prefix->c_str());
  line.Add("a save cannot fit in ");
  line.AddSeconds(grace_ms);
  line.Add(" (twice this step, ");
  line.AddSeconds(step_ms);
  line.Add(", and the last save, ");
  line.AddSeconds(save_ms);
  line.Add(", is ");
  line.AddSeconds(need_ms);
  line.Add(", more than the grace before SIGKILL: --kill_grace");
  if (launcher_sizes.load()) line.Add(" or twice the last step and save");
  line.Add("): not saving; ending now\n");
  (void)!::write(STDERR_FILENO, line.data, line.size);
  return false;
}

void OnSigterm(int) {
  const int saved_errno = errno;
  const int64_t now_ns = NowNs();
  if (!received.load() && !SaveFits(now_ns)) {
    // No promise: the signal takes the course it had before this handler
    // (the flight recorder's dump, then death by SIGTERM) once this handler
    // returns.
    ::sigaction(SIGTERM, &previous_action, nullptr);
    ::raise(SIGTERM);
    errno = saved_errno;
    return;
  }
  int64_t first = 0;
  // The time first, then the flag: a reader that sees the flag sees the time.
  if (received_at_ns.compare_exchange_strong(first, now_ns)) {
    (void)!::write(STDERR_FILENO, notice_line->data(), notice_line->size());
  }
  received.store(true);
  collective::RequestFlightRecorderDumps(SIGTERM);
  errno = saved_errno;
}

}  // namespace

void SetPreemptionGrace(absl::Duration kill_grace, bool launcher_sizes_grace) {
  kill_grace_ms.store(absl::ToInt64Milliseconds(kill_grace));
  launcher_sizes.store(launcher_sizes_grace);
}

void NotePreemptionPhase(int64_t step, absl::string_view phase, absl::Time now) {
  if (in_save) save_in_step += now - save_start;
  in_save = absl::StartsWith(phase, "checkpoint");
  save_start = now;
  if (step == noted_step) return;
  if (noted_step >= 0) {
    if (save_in_step > absl::ZeroDuration()) {
      last_save_ms.store(absl::ToInt64Milliseconds(save_in_step));
    }
    // The first step carries start-up: it does not say how long one takes.
    if (noted_step != first_step) {
      last_step_ms.store(absl::ToInt64Milliseconds(now - step_start));
    }
  } else {
    first_step = step;
  }
  save_in_step = absl::ZeroDuration();
  noted_step = step;
  step_start = now;
  step_start_ns.store(absl::ToUnixNanos(now));
}

void InstallPreemptionHandler(int rank) {
  static std::once_flag installed;
  std::call_once(installed, [rank] {
    struct sigaction current = {};
    if (::sigaction(SIGTERM, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) return;
    const std::string prefix = absl::StrCat(
        "rank ", rank, ": SIGTERM (a preemption notice, or the launcher's teardown): ");
    notice_line = new std::string(
        absl::StrCat(prefix, "finishing this step, then saving a checkpoint of it and exiting 4\n"));
    decline_prefix = new std::string(prefix);
    struct sigaction action = {};
    action.sa_handler = OnSigterm;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGTERM, &action, &previous_action);
  });
}

bool PreemptionNoticeReceived() { return received.load(); }

absl::Time PreemptionNoticeTime() {
  if (!received.load()) return absl::InfinitePast();
  return absl::FromUnixNanos(received_at_ns.load());
}

}  // namespace mtb
