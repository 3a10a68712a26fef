#include "common/launch/signal_routing.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

namespace mtb {
namespace {

// Written before the handlers are installed, read by them.
volatile sig_atomic_t signal_pipe_write = -1;

extern "C" void OnSignal(int signal_number) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signal_number);
  if (signal_pipe_write >= 0) {
    ssize_t ignored = ::write(signal_pipe_write, &byte, 1);
    (void)ignored;
  }
  errno = saved_errno;
}

}  // namespace

absl::Status SignalRouting::Install() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::ErrnoToStatus(errno, "launch: signal pipe");
  }
  read_fd_ = fds[0];
  signal_pipe_write = fds[1];
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_NOCLDSTOP;
  for (int signal_number : kForwardedSignals) {
    struct sigaction current = {};
    ::sigaction(signal_number, nullptr, &current);
    if (current.sa_handler == SIG_IGN) continue;
    Replace(signal_number, action);
  }
  Replace(SIGCHLD, action);
  // A reader that went away must not kill the launcher.
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  Replace(SIGPIPE, ignore);
  return absl::OkStatus();
}

SignalRouting::~SignalRouting() {
  for (const auto& [signal_number, previous] : previous_) {
    ::sigaction(signal_number, &previous, nullptr);
  }
  if (signal_pipe_write >= 0) ::close(signal_pipe_write);
  signal_pipe_write = -1;
  if (read_fd_ >= 0) ::close(read_fd_);
}

std::vector<int> SignalRouting::Drain() {
  std::vector<int> received;
  unsigned char buffer[64];
  while (true) {
    const ssize_t got = ::read(read_fd_, buffer, sizeof(buffer));
    if (got > 0) {
      received.insert(received.end(), buffer, buffer + got);
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    return received;
  }
}

void SignalRouting::Replace(int signal_number, const struct sigaction& action) {
  struct sigaction previous = {};
  ::sigaction(signal_number, &action, &previous);
  previous_.emplace_back(signal_number, previous);
}

}  // namespace mtb
