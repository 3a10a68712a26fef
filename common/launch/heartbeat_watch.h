// The launcher's side of the heartbeat (--heartbeat_timeout, docs/launch.md):
// it reads each local rank's heartbeat lines (common/collective/heartbeat.h)
// and decides when the group is stuck, and whom it waits for.
//
// The group is *stalled* when, once every rank has reported, no running rank
// has made progress (its counter stood still) for the timeout while at least
// one of them is blocked in a collective; while a rank is still in its first
// step (not steady) the first-step allowance applies instead. A
// group whose ranks all compute (none waits) is never stalled: slow is not
// hung. The diagnosis then names the rank the others wait for: one that is
// in no collective while they wait in one (whatever it is doing: the hang
// is outside a collective), else one whose collective differs from the
// others' (sequence number or op). Torch-free; times are passed in.
#ifndef MTB_COMMON_LAUNCH_HEARTBEAT_WATCH_H_
#define MTB_COMMON_LAUNCH_HEARTBEAT_WATCH_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/collective/flight_recorder.h"

namespace mtb {

// How long "no progress" may last (HeartbeatPolicy::Timeout).
struct HeartbeatPolicy {
  // A fixed --heartbeat_timeout; zero: automatic, the larger of `floor` and
  // `step_multiple` x the slowest steady step any rank reported, at most
  // `cap` (below --collective_timeout, so the launcher names the rank before
  // the waiting ranks' timeout ends the run with a message that cannot).
  absl::Duration fixed = absl::ZeroDuration();
  absl::Duration floor = absl::Seconds(60);
  int step_multiple = 10;
  absl::Duration cap = absl::InfiniteDuration();
  // While any rank is in its first step; infinite: start-up is not watched.
  absl::Duration first_step = absl::InfiniteDuration();

  static HeartbeatPolicy Fixed(absl::Duration timeout) {
    HeartbeatPolicy policy;
    policy.fixed = timeout;
    return policy;
  }
  // The steady timeout given the slowest step reported so far.
  absl::Duration Timeout(absl::Duration slowest_step) const;
  // "60s (or 10x the slowest step, at most 4m)", "2s".
  std::string Describe() const;
};

struct Stall {
  // The rank the group waits for; -1 when none stands out (every rank waits
  // in the same collective: the transport is stuck).
  int rank = -1;
  // "no progress for 3s: rank 1 is in no collective (step 3, forward; last
  // completed #40) while ranks 0, 2 wait in all_reduce #41 (step 3,
  // backward): the group waits for rank 1"
  std::string description;
};

// Not thread-safe (the supervisor's loop owns it).
class HeartbeatWatch {
 public:
  // `ranks`: the global ranks this launcher started; `whole_group`: they are
  // all the group's (one node), so every rank waiting in one collective means
  // the transport is stuck rather than a rank elsewhere.
  HeartbeatWatch(std::vector<int> ranks, HeartbeatPolicy policy, bool whole_group = true);
  // A fixed timeout; start-up is not watched.
  HeartbeatWatch(std::vector<int> ranks, absl::Duration timeout, bool whole_group = true)
      : HeartbeatWatch(std::move(ranks), HeartbeatPolicy::Fixed(timeout), whole_group) {}

  // One line from `rank`'s heartbeat pipe, received at `now`. A line that is
  // not a heartbeat is ignored (false).
  bool Received(int rank, absl::string_view line, absl::Time now);
  // `rank`'s process has ended: it is no longer watched.
  void Ended(int rank);

  // The stall described above, or nullopt.
  std::optional<Stall> Check(absl::Time now) const;
  // The same diagnosis once the group has made no progress for `threshold`
  // (the launcher's --wait_progress_every reports, and what it knew when a
  // waiting rank's own timeout ended it); it ignores the timeout.
  std::optional<Stall> Diagnose(absl::Time now, absl::Duration threshold) const;
  // The timeout that applies now: the first-step allowance while a rank is
  // in its first step, else the policy's steady timeout.
  absl::Duration CurrentTimeout() const;
  // What a save needs, from the ranks' reports: the longest last step plus
  // the longest last save (zero until reported).
  absl::Duration StepAndSave() const;

  // Diagnose(now, threshold), kept: the latest stall that names a rank is
  // remembered until that rank makes progress. A waiting rank that fails on
  // its own (its collective timeout) first reports the failure, and its
  // counter moves, so a diagnosis made when it ends no longer sees the
  // stall; the remembered one still names the rank the group waited for.
  // Nothing is remembered once a rank has ended or is done: the last
  // diagnosis of the whole group stays.
  void Remember(absl::Time now, absl::Duration threshold);
  const std::optional<Stall>& remembered() const { return remembered_; }

 private:
  struct Watched {
    bool heard = false;
    bool ended = false;
    collective::RankProgress progress;
    absl::Time last_change;  // when the counter last moved
  };
  const HeartbeatPolicy policy_;
  const bool whole_group_;
  std::map<int, Watched> ranks_;
  std::optional<Stall> remembered_;
};

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_HEARTBEAT_WATCH_H_
