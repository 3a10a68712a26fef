// Starting one rank process: fork + exec with the launcher's guarantees.
//
// The child gets its own argv and environment, stdin from /dev/null, stdout
// and stderr through pipes whose read ends the caller gets, optionally a
// heartbeat pipe's write end as descriptor 3 (kHeartbeatFd), no other
// descriptor (not the TCPStore's socket, not other ranks' pipes), default
// signal dispositions, and PR_SET_PDEATHSIG(SIGKILL): when the thread that
// called SpawnWithPipes ends, even by SIGKILL, the child is killed. The death
// signal follows the forking *thread*, not the process, so spawn from a thread
// that outlives the children (main).
#ifndef MTB_COMMON_LAUNCH_SPAWN_H_
#define MTB_COMMON_LAUNCH_SPAWN_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb {

// The descriptor a child writes its heartbeat lines to
// (common/collective/heartbeat.h), when it has one.
inline constexpr int kHeartbeatFd = 3;

// One process to start.
struct ChildSpec {
  int rank = 0;                   // labels its output and names its log file
  std::string executable;         // path given to execve, e.g. "/proc/self/exe"
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // its whole environment, "NAME=value"
  // Give it a heartbeat pipe on kHeartbeatFd.
  bool heartbeat = false;
};

struct SpawnedChild {
  pid_t pid = -1;
  int stdout_fd = -1;  // read ends, close-on-exec; the caller closes them
  int stderr_fd = -1;
  int heartbeat_fd = -1;  // with ChildSpec::heartbeat
};

// Starts `spec`. An executable that cannot be run makes the child print
// "launch: cannot execute <path> for rank <N>" and exit 127. Safe to call from
// a process with other threads (only async-signal-safe calls after fork).
absl::StatusOr<SpawnedChild> SpawnWithPipes(const ChildSpec& spec);

// Writes all of `data` to `fd`, retrying after EINTR and short writes, and
// gives up silently on any other error (a reader that went away must not stop
// a launcher). Async-signal-safe.
void WriteFully(int fd, absl::string_view data);

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_SPAWN_H_
