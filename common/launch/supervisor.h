// Starts a group of rank processes and watches them until every one has ended.
//
// This is the process half of the launcher (common/launch/launch.h): it knows
// nothing about ranks beyond the number that labels a child's output.
//
// Contract, in the order things happen:
//  - Every child is started by SpawnWithPipes (spawn.h): it dies with the
//    thread that calls Supervise, so call it from main.
//  - Each line a child writes is written to our stdout/stderr (the stream it
//    came on) as "[rank N] <line>", and without the prefix to
//    <log_dir>/rank_N.log when a log folder is given. A last line without a
//    newline is still written, with one.
//  - SIGINT, SIGTERM and SIGHUP sent to this process are forwarded to every
//    child still running.
//  - The first child that exits non-zero or dies by a signal (while nothing
//    was forwarded) is "the failure": every other child still running gets
//    SIGTERM, and SIGKILL once `kill_grace` has passed. The same grace applies
//    after a forwarded signal. When a teardown starts, one line on
//    `stderr_fd` says why and which ranks are being stopped (the summary
//    comes once all have ended).
//  - With a heartbeat policy, each child gets a heartbeat pipe
//    (spawn.h) and its lines feed a HeartbeatWatch (heartbeat_watch.h): a
//    stalled group is torn down as after a failure, the rank it waits for
//    being "the failure", and the summary says what each rank was doing.
//    Every `wait_progress_every` of no progress while a rank waits in a
//    collective, one line says who waits for whom. After a forwarded signal
//    the grace is long enough for a step and a save as the ranks last
//    reported them (twice their sum), never below `kill_grace`.
//  - An `external_stop` that returns a reason (another node's failure)
//    tears the group down the same way; `on_teardown` hears of this node's
//    own failure (or forwarded signal) first, so other nodes can follow.
//  - Supervise returns when every child has been reaped and its output
//    drained; it installs its signal handlers for that time only.
// Not thread-safe: one Supervise at a time per process (signal handlers are
// process-wide).
#ifndef MTB_COMMON_LAUNCH_SUPERVISOR_H_
#define MTB_COMMON_LAUNCH_SUPERVISOR_H_

#include <sys/types.h>
#include <unistd.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/launch/heartbeat_watch.h"
#include "common/launch/spawn.h"

namespace mtb {

struct ChildEnd;

struct SupervisorOptions {
  // How long children may take to end after SIGTERM before they get SIGKILL.
  absl::Duration kill_grace = absl::Seconds(5);
  // When not empty, an existing folder that receives rank_<N>.log per child.
  std::string log_dir;
  // Where prefixed output goes (tests point them at files).
  int stdout_fd = STDOUT_FILENO;
  int stderr_fd = STDERR_FILENO;
  // --heartbeat_timeout's policy; nullopt: no heartbeat pipes, nothing
  // watched.
  std::optional<HeartbeatPolicy> heartbeat;
  // Testing only (--test_only_heartbeat_never_stops): the watch reports and
  // names, but a stall never tears the group down, so a waiting rank's own
  // collective timeout ends a hang (as when the launcher cannot see the
  // rank the group waits for).
  bool heartbeat_tears_down = true;
  // --wait_progress_every: with a heartbeat, how often a group that makes no
  // progress while a rank waits is described; zero: never.
  absl::Duration wait_progress_every = absl::ZeroDuration();
  // The children are the whole group (one node): HeartbeatWatch's
  // whole_group.
  bool children_are_whole_group = true;
  // Asked about every 250 ms while nothing has failed here: a reason to tear
  // this node's group down (another node's failure), or nullopt.
  std::function<std::optional<std::string>()> external_stop;
  // Called once when this node's group starts its teardown on its own: a
  // failed (or stalled) child, or nullptr after a forwarded signal, and the
  // line that says what happened.
  std::function<void(const ChildEnd* failed, const std::string& what)>
      on_teardown;
};

// How one child ended.
struct ChildEnd {
  int rank = 0;
  pid_t pid = 0;
  bool signaled = false;  // died by a signal (else exited)
  int exit_code = 0;      // when !signaled
  int signal = 0;         // when signaled
  bool core_dumped = false;
  bool stopped_by_us = false;   // we had signalled it before it ended
  bool needed_sigkill = false;  // still running when the grace ran out
  // It printed a --fault=kill announcement (kKillAnnouncement) before it
  // ended: a SIGKILL is then its own injected fault.
  bool announced_injected_kill = false;

  bool Failed() const { return signaled || exit_code != 0; }
  // "exited with code 3", "was killed by signal 15 (SIGTERM)"; a SIGKILL
  // we did not send: "was killed by SIGKILL (signal 9) that the launcher did
  // not send (likely the kernel's OOM killer: ...)", or, after the rank
  // announced a --fault=kill, "... sent by its own --fault=kill injection".
  std::string Describe() const;
};

struct SupervisionResult {
  std::vector<ChildEnd> ends;  // one per ChildSpec, in the same order
  int failure = -1;            // index in `ends` of the failure, or -1
  int forwarded_signal = 0;    // first SIGINT/SIGTERM/SIGHUP received, or 0
  // The heartbeat watch's diagnosis when a stall was the failure (`failure`
  // is then the rank it names, or the first rank), else empty.
  std::string stall;
  // external_stop's reason when it ended the group (`failure` is -1), else
  // empty.
  std::string external_stop;
  // Every child exited kExitPreempted (4): each stopped on a preemption
  // notice (SIGTERM, forwarded by us or sent to it directly) after saving
  // its state.
  bool preempted = false;
  // 0 when every child exited 0; 4 (kExitPreempted) when every child was
  // preempted; else 128 + signal after a forwarded signal; the failure's own
  // reserved code (2 usage, 3 deterministic) when no other child failed on
  // its own with a different one; otherwise 1 (a child failed).
  // docs/errors.md has the table.
  int exit_code = 0;
  // One line for the user when exit_code != 0, without a trailing newline:
  // "launch: rank 1 (pid 1234) exited with code 3; terminated ranks 0, 2".
  std::string summary;
};

// Starts `children` and supervises them as described above. Errors (a pipe or
// fork that fails, a log file that cannot be created) are returned only after
// the children already started have been killed and reaped.
absl::StatusOr<SupervisionResult> Supervise(
    const std::vector<ChildSpec>& children, const SupervisorOptions& options);

// "SIGKILL" for 9; "signal 77" when the number has no name.
std::string SignalName(int signal);

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_SUPERVISOR_H_
