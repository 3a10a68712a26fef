// Schedules, their deadlock check and their slot timeline (schedule.h has the
// vocabulary). A *message* is one activation or gradient crossing between
// neighbouring stages; each stage's actions expand to its messages in order,
// and the check steps every stage through them until all finish or none can
// move.
#include "trainer/pipeline/schedule.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace mtb::pipeline {
namespace {

enum class Carries { kActivation, kGradient };

struct Message {
  Carries carries = Carries::kActivation;
  int micro_batch = 0;
  int from = 0;
  int to = 0;
  bool operator<(const Message& other) const {
    return std::tie(carries, micro_batch, from, to) <
           std::tie(other.carries, other.micro_batch, other.from, other.to);
  }
  bool operator==(const Message& other) const {
    return !(*this < other) && !(other < *this);
  }
};

std::string MessageName(const Message& message) {
  return absl::StrCat(message.carries == Carries::kActivation ? "activation"
                                                              : "gradient",
                      " of micro-batch ", message.micro_batch, " from stage ",
                      message.from, " to stage ", message.to);
}

struct MessageOp {
  bool send = false;
  Message message;
};

// Stage `stage`'s messages in schedule order.
std::vector<MessageOp> MessagesOf(const Schedule& schedule, int stage) {
  const int last = schedule.stages - 1;
  std::vector<MessageOp> ops;
  for (const Action& action : schedule.actions[stage]) {
    const int j = action.micro_batch;
    if (action.phase == Phase::kForward) {
      if (stage > 0) {
        ops.push_back({false, {Carries::kActivation, j, stage - 1, stage}});
      }
      if (stage < last) {
        ops.push_back({true, {Carries::kActivation, j, stage, stage + 1}});
      }
    } else {
      if (stage < last) {
        ops.push_back({false, {Carries::kGradient, j, stage + 1, stage}});
      }
      if (stage > 0) {
        ops.push_back({true, {Carries::kGradient, j, stage, stage - 1}});
      }
    }
  }
  return ops;
}

absl::Status ValidateActions(const Schedule& schedule) {
  if (schedule.stages < 1 || schedule.micro_batches < 1 ||
      static_cast<int>(schedule.actions.size()) != schedule.stages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a schedule needs >= 1 stage and micro-batch and one action list per "
        "stage; got ", schedule.stages, " stages, ", schedule.micro_batches,
        " micro-batches, ", schedule.actions.size(), " lists"));
  }
  for (int s = 0; s < schedule.stages; ++s) {
    std::vector<int> forwards(schedule.micro_batches, 0);
    std::vector<int> backwards(schedule.micro_batches, 0);
    for (const Action& action : schedule.actions[s]) {
      const int j = action.micro_batch;
      if (j < 0 || j >= schedule.micro_batches) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", s, ": ", ActionName(action), " is outside micro-batches 0..",
            schedule.micro_batches - 1));
      }
      if (action.phase == Phase::kForward) {
        ++forwards[j];
      } else {
        if (forwards[j] == 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "stage ", s, ": ", ActionName(action), " comes before F", j));
        }
        ++backwards[j];
      }
    }
    for (int j = 0; j < schedule.micro_batches; ++j) {
      if (forwards[j] != 1 || backwards[j] != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", s, " runs F", j, " ", forwards[j], " time(s) and B", j,
            " ", backwards[j], " time(s); each must run once"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ScheduleKind> ParseScheduleKind(absl::string_view name) {
  if (name == "gpipe") return ScheduleKind::kGpipe;
  if (name == "1f1b") return ScheduleKind::kOneForwardOneBackward;
  return absl::InvalidArgumentError(
      absl::StrCat("--pp_schedule=", name, " is not one of gpipe, 1f1b"));
}

absl::string_view ScheduleKindName(ScheduleKind kind) {
  return kind == ScheduleKind::kGpipe ? "gpipe" : "1f1b";
}

std::string ActionName(const Action& action) {
  return absl::StrCat(action.phase == Phase::kForward ? "F" : "B",
                      action.micro_batch);
}

Schedule MakeSchedule(ScheduleKind kind, int stages, int micro_batches) {
  CHECK_GE(stages, 1);
  CHECK_GE(micro_batches, 1);
  Schedule schedule;
  schedule.stages = stages;
  schedule.micro_batches = micro_batches;
  schedule.actions.resize(stages);
  for (int s = 0; s < stages; ++s) {
    std::vector<Action>& actions = schedule.actions[s];
    if (kind == ScheduleKind::kGpipe) {
      for (int j = 0; j < micro_batches; ++j) {
        actions.push_back({Phase::kForward, j});
      }
      for (int j = 0; j < micro_batches; ++j) {
        actions.push_back({Phase::kBackward, j});
      }
      continue;
    }
    const int warmup = std::min(stages - 1 - s, micro_batches);
    int next_forward = 0;
    int next_backward = 0;
    for (; next_forward < warmup; ++next_forward) {
      actions.push_back({Phase::kForward, next_forward});
    }
    while (next_forward < micro_batches) {
      actions.push_back({Phase::kForward, next_forward++});
      actions.push_back({Phase::kBackward, next_backward++});
    }
    while (next_backward < micro_batches) {
      actions.push_back({Phase::kBackward, next_backward++});
    }
  }
  return schedule;
}

absl::Status CheckDeadlockFree(const Schedule& schedule,
                               SendSemantics semantics) {
  if (absl::Status valid = ValidateActions(schedule); !valid.ok()) return valid;
  const int p = schedule.stages;
  std::vector<std::vector<MessageOp>> ops(p);
  for (int s = 0; s < p; ++s) ops[s] = MessagesOf(schedule, s);
  std::vector<size_t> next(p, 0);
  std::map<Message, int> posted;  // buffered sends not yet received
  auto done = [&] {
    for (int s = 0; s < p; ++s) {
      if (next[s] < ops[s].size()) return false;
    }
    return true;
  };
  while (!done()) {
    bool moved = false;
    for (int s = 0; s < p; ++s) {
      if (next[s] >= ops[s].size()) continue;
      const MessageOp& op = ops[s][next[s]];
      if (semantics == SendSemantics::kBuffered) {
        if (op.send) {
          ++posted[op.message];
          ++next[s];
          moved = true;
        } else if (auto it = posted.find(op.message);
                   it != posted.end() && it->second > 0) {
          --it->second;
          ++next[s];
          moved = true;
        }
        continue;
      }
      // Rendezvous: a send and its receive complete together.
      if (!op.send) continue;
      const int peer = op.message.to;
      if (next[peer] < ops[peer].size()) {
        const MessageOp& peer_op = ops[peer][next[peer]];
        if (!peer_op.send && peer_op.message == op.message) {
          ++next[s];
          ++next[peer];
          moved = true;
        }
      }
    }
    if (moved) continue;
    std::vector<std::string> blocked;
    for (int s = 0; s < p; ++s) {
      if (next[s] >= ops[s].size()) continue;
      const MessageOp& op = ops[s][next[s]];
      blocked.push_back(absl::StrCat("stage ", s, " waits to ",
                                     op.send ? "send the " : "receive the ",
                                     MessageName(op.message)));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "the schedule deadlocks with ",
        semantics == SendSemantics::kBuffered ? "buffered" : "rendezvous",
        " sends: ", absl::StrJoin(blocked, "; ")));
  }
  return absl::OkStatus();
}

SlotTimeline RunSlotTimeline(const Schedule& schedule, int64_t forward_slots,
                             int64_t backward_slots) {
  const absl::Status deadlock_free =
      CheckDeadlockFree(schedule, SendSemantics::kBuffered);
  CHECK(deadlock_free.ok()) << deadlock_free;
  const int p = schedule.stages;
  const int m = schedule.micro_batches;
  // finish[phase][stage][micro-batch], -1 until scheduled.
  std::vector<std::vector<std::vector<int64_t>>> finish(
      2, std::vector<std::vector<int64_t>>(p, std::vector<int64_t>(m, -1)));
  std::vector<size_t> next(p, 0);
  std::vector<int64_t> free_at(p, 0);
  SlotTimeline timeline;
  timeline.busy.assign(p, 0);
  timeline.peak_in_flight.assign(p, 0);
  std::vector<int> in_flight(p, 0);
  bool moved = true;
  while (moved) {
    moved = false;
    for (int s = 0; s < p; ++s) {
      while (next[s] < schedule.actions[s].size()) {
        const Action& action = schedule.actions[s][next[s]];
        const int j = action.micro_batch;
        int64_t ready = free_at[s];
        if (action.phase == Phase::kForward) {
          if (s > 0) {
            if (finish[0][s - 1][j] < 0) break;
            ready = std::max(ready, finish[0][s - 1][j]);
          }
        } else if (s < p - 1) {
          if (finish[1][s + 1][j] < 0) break;
          ready = std::max(ready, finish[1][s + 1][j]);
        }
        const bool forward = action.phase == Phase::kForward;
        const int64_t length = forward ? forward_slots : backward_slots;
        finish[forward ? 0 : 1][s][j] = ready + length;
        free_at[s] = ready + length;
        timeline.busy[s] += length;
        in_flight[s] += forward ? 1 : -1;
        timeline.peak_in_flight[s] =
            std::max(timeline.peak_in_flight[s], in_flight[s]);
        ++next[s];
        moved = true;
      }
    }
  }
  for (int s = 0; s < p; ++s) {
    CHECK_EQ(next[s], schedule.actions[s].size());
    timeline.makespan = std::max(timeline.makespan, free_at[s]);
  }
  for (int s = 0; s < p; ++s) {
    timeline.idle.push_back(timeline.makespan - timeline.busy[s]);
  }
  return timeline;
}

}  // namespace mtb::pipeline
