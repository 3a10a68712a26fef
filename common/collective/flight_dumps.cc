// Note [dumping from a signal] (flight_dumps.h) is the design.
#include "common/collective/flight_dumps.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace mtb::collective {
namespace {

constexpr int kDumpSignals[] = {SIGTERM, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
// How long a fatal signal's handler waits for the dump before dying anyway.
constexpr int kFatalDumpWaitMs = 5000;
// A request byte with this bit set only dumps (RequestFlightRecorderDumps):
// the signal it names was handled by someone else.
constexpr unsigned char kDumpOnly = 0x80;

// Written before the handlers are installed, read in them.
std::atomic<int> request_write_fd{-1};
int request_read_fd = -1;
int ack_read_fd = -1;
int ack_write_fd = -1;
std::atomic<bool> dumper_started{false};
pthread_t dumper_thread;
struct sigaction previous[NSIG];

absl::Mutex registry_mutex;
std::vector<std::shared_ptr<FlightRecorder>>& Registry() {
  static auto* registry = new std::vector<std::shared_ptr<FlightRecorder>>();
  return *registry;
}

std::string SignalReason(int signal_number) {
  const char* abbreviation = ::sigabbrev_np(signal_number);
  const std::string name = abbreviation != nullptr
                               ? absl::StrCat("SIG", abbreviation)
                               : absl::StrCat("signal ", signal_number);
  if (signal_number == SIGTERM) {
    return absl::StrCat(name, " (the launcher's teardown, or a kill)");
  }
  return absl::StrCat(name, " (fatal signal)");
}

void OnSignal(int signal_number, siginfo_t*, void*) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  const int fd = request_write_fd.load();
  if (fd >= 0) (void)!::write(fd, &byte, 1);
  if (signal_number != SIGTERM) {
    // Fatal: this thread cannot go on. Wait for the dump (unless this is the
    // dumper itself failing), then let the previous disposition act: the
    // re-raised signal is delivered when this handler returns.
    if (!dumper_started.load() || !::pthread_equal(::pthread_self(), dumper_thread)) {
      pollfd ack = {ack_read_fd, POLLIN, 0};
      if (::poll(&ack, 1, kFatalDumpWaitMs) > 0) {
        unsigned char ignored;
        (void)!::read(ack_read_fd, &ignored, 1);
      }
    }
    ::sigaction(signal_number, &previous[signal_number], nullptr);
    ::raise(signal_number);
  }
  errno = saved_errno;
}

void DumpAll(int signal_number) {
  std::vector<std::shared_ptr<FlightRecorder>> recorders;
  {
    absl::MutexLock lock(&registry_mutex);
    recorders = Registry();
  }
  const std::string reason = SignalReason(signal_number);
  for (const std::shared_ptr<FlightRecorder>& recorder : recorders) {
    const absl::Status dumped = recorder->Dump(reason);
    // std::cerr, not glog: glog's own locks may be what a crash left held.
    if (dumped.ok()) {
      std::cerr << "rank " << recorder->identity().rank
                << ": flight recorder dumped to " << recorder->dump_path()
                << " (" << reason << ")" << std::endl;
    } else {
      std::cerr << "rank " << recorder->identity().rank
                << ": flight recorder dump failed: " << dumped.message()
                << std::endl;
    }
  }
}

void DumperLoop() {
  while (true) {
    unsigned char byte = 0;
    const ssize_t got = ::read(request_read_fd, &byte, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return;
    const int signal_number = byte & ~kDumpOnly;
    DumpAll(signal_number);
    if ((byte & kDumpOnly) != 0) continue;
    if (signal_number == SIGTERM) {
      // The signal takes its previous course now that the dump is written.
      ::sigaction(SIGTERM, &previous[SIGTERM], nullptr);
      ::kill(::getpid(), SIGTERM);
    } else {
      const unsigned char ack = 1;
      (void)!::write(ack_write_fd, &ack, 1);
    }
  }
}

void Install() {
  int request[2];
  int ack[2];
  if (::pipe2(request, O_CLOEXEC) != 0 || ::pipe2(ack, O_CLOEXEC) != 0) {
    std::cerr << "flight recorder: no signal dumps (pipe: " << ::strerror(errno)
              << ")" << std::endl;
    return;
  }
  request_read_fd = request[0];
  ack_read_fd = ack[0];
  ack_write_fd = ack[1];
  request_write_fd.store(request[1]);
  std::thread dumper(DumperLoop);
  dumper_thread = dumper.native_handle();
  dumper_started.store(true);
  dumper.detach();
  for (int signal_number : kDumpSignals) {
    struct sigaction current = {};
    if (::sigaction(signal_number, nullptr, &current) != 0) continue;
    // Started with it ignored (nohup): it stays ignored.
    if (current.sa_handler == SIG_IGN) continue;
    struct sigaction action = {};
    action.sa_sigaction = OnSignal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    ::sigaction(signal_number, &action, &previous[signal_number]);
  }
}

}  // namespace

void RegisterForSignalDumps(std::shared_ptr<FlightRecorder> recorder) {
  static std::once_flag installed;
  std::call_once(installed, Install);
  absl::MutexLock lock(&registry_mutex);
  Registry().push_back(std::move(recorder));
}

void UnregisterFromSignalDumps(const FlightRecorder* recorder) {
  absl::MutexLock lock(&registry_mutex);
  std::vector<std::shared_ptr<FlightRecorder>>& registry = Registry();
  registry.erase(std::remove_if(registry.begin(), registry.end(),
                                [recorder](const auto& registered) {
                                  return registered.get() == recorder;
                                }),
                 registry.end());
}

void RequestFlightRecorderDumps(int signal_number) {
  const int fd = request_write_fd.load();
  if (fd < 0) return;
  const unsigned char byte =
      static_cast<unsigned char>(signal_number & 0x7f) | kDumpOnly;
  (void)!::write(fd, &byte, 1);
}

}  // namespace mtb::collective
