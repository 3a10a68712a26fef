#include "common/launch/heartbeat_watch.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/rank_text.h"
#include "common/collective/heartbeat.h"

namespace mtb {
namespace {

using collective::RankProgress;

// "(step 3, backward)".
std::string Where(const RankProgress& p) {
  return absl::StrCat("(step ", p.step, p.phase.empty() ? "" : ", ", p.phase, ")");
}

std::string LastCompleted(const RankProgress& p) {
  return p.last_completed < 0 ? std::string("none completed yet")
                              : absl::StrCat("last completed #", p.last_completed);
}

// One group of ranks in the same collective: "ranks 0, 2 wait in all_reduce
// #41 (step 3, backward)" (or "are in" when none is blocked in it).
struct InCollective {
  int64_t sequence;
  std::string op;
  std::vector<int> ranks;
  bool waiting = false;
  RankProgress sample;
};

std::string Describe(const InCollective& group) {
  const bool one = group.ranks.size() == 1;
  return absl::StrCat(RanksText(group.ranks),
                      group.waiting ? (one ? " waits in " : " wait in ")
                                    : (one ? " is in " : " are in "),
                      group.op, " #", group.sequence, " ", Where(group.sample));
}

}  // namespace

absl::Duration HeartbeatPolicy::Timeout(absl::Duration slowest_step) const {
  if (fixed > absl::ZeroDuration()) return fixed;
  return std::min(std::max(floor, step_multiple * slowest_step), cap);
}

std::string HeartbeatPolicy::Describe() const {
  if (fixed > absl::ZeroDuration()) return absl::FormatDuration(fixed);
  if (cap <= floor) return absl::FormatDuration(cap);
  return absl::StrCat(absl::FormatDuration(floor), " (or ", step_multiple,
                      "x the slowest step, at most ", absl::FormatDuration(cap), ")");
}

HeartbeatWatch::HeartbeatWatch(std::vector<int> ranks, HeartbeatPolicy policy, bool whole_group)
    : policy_(policy), whole_group_(whole_group) {
  for (int rank : ranks) ranks_[rank];
}

bool HeartbeatWatch::Received(int rank, absl::string_view line, absl::Time now) {
  auto found = ranks_.find(rank);
  if (found == ranks_.end()) return false;
  absl::StatusOr<RankProgress> progress = collective::ParseHeartbeat(line);
  if (!progress.ok()) return false;
  Watched& watched = found->second;
  if (!watched.heard || progress->counter != watched.progress.counter) {
    watched.last_change = now;
    // The rank the group waited for moved: that stall is over.
    if (watched.heard && remembered_.has_value() && remembered_->rank == rank) {
      remembered_.reset();
    }
  }
  watched.heard = true;
  watched.progress = *std::move(progress);
  return true;
}

void HeartbeatWatch::Ended(int rank) {
  if (auto found = ranks_.find(rank); found != ranks_.end()) {
    found->second.ended = true;
  }
}

absl::Duration HeartbeatWatch::CurrentTimeout() const {
  absl::Duration slowest = absl::ZeroDuration();
  bool starting = false;
  for (const auto& [rank, watched] : ranks_) {
    if (!watched.heard) continue;
    slowest = std::max(slowest, absl::Milliseconds(watched.progress.slowest_step_ms));
    starting |= !watched.ended && !watched.progress.done && !watched.progress.steady;
  }
  return starting ? policy_.first_step : policy_.Timeout(slowest);
}

absl::Duration HeartbeatWatch::StepAndSave() const {
  absl::Duration step = absl::ZeroDuration();
  absl::Duration save = absl::ZeroDuration();
  for (const auto& [rank, watched] : ranks_) {
    step = std::max(step, absl::Milliseconds(watched.progress.last_step_ms));
    save = std::max(save, absl::Milliseconds(watched.progress.last_save_ms));
  }
  return step + save;
}

void HeartbeatWatch::Remember(absl::Time now, absl::Duration threshold) {
  // Once a rank has ended (or said it is done) the picture lacks it: the
  // last whole one stays.
  for (const auto& [rank, watched] : ranks_) {
    if (watched.ended || (watched.heard && watched.progress.done)) return;
  }
  std::optional<Stall> stall = Diagnose(now, threshold);
  if (stall.has_value() && stall->rank >= 0) remembered_ = std::move(stall);
}

std::optional<Stall> HeartbeatWatch::Check(absl::Time now) const {
  return Diagnose(now, CurrentTimeout());
}

std::optional<Stall> HeartbeatWatch::Diagnose(absl::Time now, absl::Duration threshold) const {
  if (threshold == absl::InfiniteDuration()) return std::nullopt;
  std::vector<std::pair<int, const Watched*>> live;
  for (const auto& [rank, watched] : ranks_) {
    if (watched.ended || (watched.heard && watched.progress.done)) continue;
    // A rank not heard from yet is still joining the group: the connect
    // timeout's business.
    if (!watched.heard) return std::nullopt;
    live.emplace_back(rank, &watched);
  }
  if (live.empty()) return std::nullopt;
  absl::Duration still = absl::InfiniteDuration();
  bool someone_waits = false;
  for (const auto& [rank, watched] : live) {
    still = std::min(still, now - watched->last_change);
    someone_waits |= watched->progress.waiting;
  }
  if (still < threshold || !someone_waits) return std::nullopt;

  // Who is where: ranks outside any collective, and groups by collective.
  std::vector<int> outside;
  std::vector<InCollective> groups;
  for (const auto& [rank, watched] : live) {
    const RankProgress& p = watched->progress;
    if (p.collective < 0) {
      outside.push_back(rank);
      continue;
    }
    auto group = std::find_if(groups.begin(), groups.end(), [&](const InCollective& g) {
      return g.sequence == p.collective && g.op == p.collective_op;
    });
    if (group == groups.end()) {
      groups.push_back({p.collective, p.collective_op, {}, false, p});
      group = groups.end() - 1;
    }
    group->ranks.push_back(rank);
    group->waiting |= p.waiting;
  }
  const std::string since =
      absl::StrCat("no progress for ", absl::FormatDuration(absl::Trunc(still, absl::Milliseconds(100))), ": ");
  std::vector<std::string> in_parts;
  for (const InCollective& group : groups) in_parts.push_back(Describe(group));
  Stall stall;
  if (!outside.empty()) {
    std::vector<std::string> out_parts;
    for (int rank : outside) {
      const RankProgress& p = ranks_.at(rank).progress;
      out_parts.push_back(absl::StrCat("rank ", rank, " is in no collective ",
                                       Where(p), "; ", LastCompleted(p)));
    }
    stall.rank = outside.front();
    stall.description = absl::StrCat(
        since, absl::StrJoin(out_parts, "; "), " while ",
        absl::StrJoin(in_parts, "; "), ": the group waits for ", RanksText(outside));
    return stall;
  }
  if (groups.size() == 1) {
    stall.description = absl::StrCat(
        since, "every rank", whole_group_ ? "" : " of this node", " ",
        groups[0].waiting ? "waits" : "is", " in ", groups[0].op, " #",
        groups[0].sequence, " ", Where(groups[0].sample),
        whole_group_ ? ": none is missing from it, so the transport itself is stuck"
                     : ": the rank they wait for is on another node, or the "
                       "transport is stuck (see the other nodes' launchers)");
    return stall;
  }
  // Different collectives: the smallest group (then the lowest sequence
  // number) is the odd one out.
  const InCollective* odd = &groups[0];
  for (const InCollective& group : groups) {
    if (group.ranks.size() < odd->ranks.size() ||
        (group.ranks.size() == odd->ranks.size() && group.sequence < odd->sequence)) {
      odd = &group;
    }
  }
  stall.rank = odd->ranks.front();
  const bool same_sequence = std::all_of(groups.begin(), groups.end(), [&](const InCollective& g) {
    return g.sequence == groups[0].sequence;
  });
  stall.description = absl::StrCat(
      since, absl::StrJoin(in_parts, "; "), ": the ranks are in different ",
      same_sequence ? "collectives at the same sequence number (they issued "
                      "different calls)"
                    : "collectives (their calls diverged)",
      "; the odd one out is ", RanksText(odd->ranks));
  return stall;
}

}  // namespace mtb
