// Pipeline schedules as data (docs/pipeline.md). Torch-free.
//
// Vocabulary. The model is cut into p *stages* (stage s runs on pipeline rank
// s); a step's batch into m *micro-batches*. An *action* is one stage's
// forward (F) or backward (B) of one micro-batch. A *schedule* is, per stage,
// the ordered list of its 2m actions. Each action implies its messages: F(j)
// on stage s receives micro-batch j's activation from s-1 (s > 0) and sends
// its output to s+1 (s < p-1); B(j) receives the output's gradient from s+1
// (s < p-1) and sends the input's gradient to s-1 (s > 0).
//
//   GPipe: every forward, then every backward (micro-batches in order).
//   1F1B (PipeDream-Flush, Megatron's non-interleaved schedule): stage s runs
//   min(p-1-s, m) warm-up forwards, then alternates one forward and one
//   backward, then the remaining backwards.
//
// A *slot timeline* runs a schedule on an idealised machine: every forward
// takes `forward_slots` and every backward `backward_slots` time slots, an
// action starts as soon as its stage is free and its input exists. Over the
// makespan each stage is busy m (forward_slots + backward_slots) slots and
// idle for the rest: (p-1)(forward_slots + backward_slots) slots under both
// schedules, the bubble fraction (p-1)/(m+p-1).
#ifndef MTB_TRAINER_PIPELINE_SCHEDULE_H_
#define MTB_TRAINER_PIPELINE_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb::pipeline {

enum class ScheduleKind { kGpipe, kOneForwardOneBackward };
// "gpipe", "1f1b" (the --pp_schedule values).
absl::StatusOr<ScheduleKind> ParseScheduleKind(absl::string_view name);
absl::string_view ScheduleKindName(ScheduleKind kind);

enum class Phase { kForward, kBackward };

struct Action {
  Phase phase = Phase::kForward;
  int micro_batch = 0;
  bool operator==(const Action& other) const {
    return phase == other.phase && micro_batch == other.micro_batch;
  }
};

// "F3", "B0".
std::string ActionName(const Action& action);

struct Schedule {
  int stages = 0;
  int micro_batches = 0;
  std::vector<std::vector<Action>> actions;  // [stage] -> in order
};

// stages >= 1, micro_batches >= 1 (CHECKed: validated flags come here).
Schedule MakeSchedule(ScheduleKind kind, int stages, int micro_batches);

// How a stage's send behaves while it waits for its peer.
enum class SendSemantics {
  // A send is posted and the stage moves on (asynchronous send, waited for
  // at the end of the step): only a receive blocks. What the pipeline step
  // does.
  kBuffered,
  // A send blocks until the peer has reached the matching receive (a
  // synchronous send with no buffer in between).
  kRendezvous,
};

// Runs every stage's messages in schedule order under `semantics` and
// returns OK when every stage finishes. kInvalidArgument when an action is
// missing, repeated or out of range (every stage must run F(j) and B(j) once
// for every j, F(j) before B(j)); kFailedPrecondition naming each blocked
// stage and the message it waits for when the order deadlocks.
absl::Status CheckDeadlockFree(const Schedule& schedule,
                               SendSemantics semantics);

// The slot timeline (see the file comment) of a schedule that
// CheckDeadlockFree accepts under kBuffered.
struct SlotTimeline {
  int64_t makespan = 0;                 // slots from the first start to the last end
  std::vector<int64_t> busy;            // [stage]
  std::vector<int64_t> idle;            // [stage]: makespan - busy
  // [stage]: the most micro-batches whose forward has run and whose backward
  // has not (activations held): m under GPipe, min(p - s, m) under 1F1B.
  std::vector<int> peak_in_flight;
};
SlotTimeline RunSlotTimeline(const Schedule& schedule, int64_t forward_slots,
                             int64_t backward_slots);

}  // namespace mtb::pipeline

#endif  // MTB_TRAINER_PIPELINE_SCHEDULE_H_
