// Note [fork in a threaded process]: the launcher hosts a TCPStore, whose
// threads exist when we fork. Between fork and execve the child calls only
// async-signal-safe functions; everything it needs (argv, envp, the message
// for a failed exec) is built before fork. Signals are blocked across fork so
// that no handler of the launcher runs in the child.
#include "common/launch/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mtb {
namespace {

// Everything the forked child needs, prepared before fork.
struct ExecPlan {
  const char* executable = nullptr;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string exec_failure_message;
  pid_t parent = -1;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int heartbeat_fd = -1;  // write end, or -1
  int max_fd = 0;
  sigset_t signal_mask;  // the mask to exec with
};

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& text : strings) {
    pointers.push_back(const_cast<char*>(text.c_str()));
  }
  pointers.push_back(nullptr);
  return pointers;
}

// Makes sure descriptors 0-2 are open, so that our pipes never land on them
// and the child's dup2 onto 0-2 never meets its own source.
void OpenStandardDescriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      ::open("/dev/null", O_RDWR);  // takes the lowest free number: fd
    }
  }
}

// Runs in the forked child: async-signal-safe calls only.
[[noreturn]] void ExecChild(const ExecPlan& plan) {
  // Caught signals reset at execve anyway, but a launcher handler must not run
  // here once signals are unblocked. Ignored ones stay ignored (nohup, a
  // background job's SIGINT), except SIGPIPE, which the launcher ignores for
  // itself.
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int signal_number = 1; signal_number < NSIG; ++signal_number) {
    if (signal_number == SIGKILL || signal_number == SIGSTOP) continue;
    struct sigaction current = {};
    if (::sigaction(signal_number, nullptr, &current) != 0) continue;
    if (current.sa_handler == SIG_IGN && signal_number != SIGPIPE) continue;
    ::sigaction(signal_number, &default_action, nullptr);
  }
  // Die with the launcher. If it died before prctl took effect we have
  // already been re-parented and no signal will come: leave now.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ::_exit(127);
  if (::getppid() != plan.parent) ::_exit(127);
  ::dup2(plan.stdin_fd, STDIN_FILENO);
  ::dup2(plan.stdout_fd, STDOUT_FILENO);
  ::dup2(plan.stderr_fd, STDERR_FILENO);
  int first_to_close = 3;
  if (plan.heartbeat_fd >= 0) {
    // dup2 onto itself keeps close-on-exec: clear it for that case too.
    if (plan.heartbeat_fd != kHeartbeatFd) ::dup2(plan.heartbeat_fd, kHeartbeatFd);
    ::fcntl(kHeartbeatFd, F_SETFD, 0);
    first_to_close = kHeartbeatFd + 1;
  }
  if (::close_range(first_to_close, ~0U, 0) != 0) {
    for (int fd = first_to_close; fd < plan.max_fd; ++fd) ::close(fd);
  }
  ::sigprocmask(SIG_SETMASK, &plan.signal_mask, nullptr);
  ::execve(plan.executable, plan.argv.data(), plan.envp.data());
  WriteFully(STDERR_FILENO, plan.exec_failure_message);
  ::_exit(127);
}

}  // namespace

void WriteFully(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    data.remove_prefix(static_cast<size_t>(written));
  }
}

absl::StatusOr<SpawnedChild> SpawnWithPipes(const ChildSpec& spec) {
  OpenStandardDescriptors();
  int out[2];
  int err[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    return absl::ErrnoToStatus(errno, "launch: pipe");
  if (::pipe2(err, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(out[0]);
    ::close(out[1]);
    return absl::ErrnoToStatus(error, "launch: pipe");
  }
  int heartbeat[2] = {-1, -1};
  if (spec.heartbeat && ::pipe2(heartbeat, O_CLOEXEC) != 0) {
    const int error = errno;
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    return absl::ErrnoToStatus(error, "launch: pipe");
  }
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) {
    const int error = errno;
    for (int fd : {out[0], out[1], err[0], err[1], heartbeat[0], heartbeat[1]}) {
      if (fd >= 0) ::close(fd);
    }
    return absl::ErrnoToStatus(error, "launch: open /dev/null");
  }
  ExecPlan plan;
  plan.executable = spec.executable.c_str();
  plan.argv = CStrings(spec.argv);
  plan.envp = CStrings(spec.env);
  plan.exec_failure_message =
      absl::StrCat("launch: cannot execute ", spec.executable, " for rank ",
                   spec.rank, "\n");
  plan.parent = ::getpid();
  plan.stdin_fd = devnull;
  plan.stdout_fd = out[1];
  plan.stderr_fd = err[1];
  plan.heartbeat_fd = heartbeat[1];
  struct rlimit limit = {};
  plan.max_fd = 65536;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur != RLIM_INFINITY) {
    plan.max_fd = static_cast<int>(std::min<rlim_t>(limit.rlim_cur, 65536));
  }

  sigset_t all;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &plan.signal_mask);
  const pid_t pid = ::fork();
  if (pid == 0) ExecChild(plan);
  const int fork_error = errno;
  ::pthread_sigmask(SIG_SETMASK, &plan.signal_mask, nullptr);
  ::close(devnull);
  ::close(out[1]);
  ::close(err[1]);
  if (heartbeat[1] >= 0) ::close(heartbeat[1]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    if (heartbeat[0] >= 0) ::close(heartbeat[0]);
    return absl::ErrnoToStatus(
        fork_error, absl::StrCat("launch: fork for rank ", spec.rank));
  }
  SpawnedChild spawned;
  spawned.pid = pid;
  spawned.stdout_fd = out[0];
  spawned.stderr_fd = err[0];
  spawned.heartbeat_fd = heartbeat[0];
  return spawned;
}

}  // namespace mtb
