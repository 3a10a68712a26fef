// What a run says about itself besides its steps: the start-up lines (the
// resolved options, model, run, optimizer, data and strategy), the peak
// FLOP/s behind MFU, the result's strategy section, a checkpoint save's line
// and the failure messages (non-finite stop, allocation failure).
#ifndef MTB_TRAINER_RUN_RUN_REPORT_H_
#define MTB_TRAINER_RUN_RUN_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "trainer/data/data.h"
#include "trainer/model/model.h"
#include "trainer/run/run_component.h"
#include "trainer/run/strategy.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// The resolved configuration as a two-column table, one row per flag.
std::string OptionsTable(const TrainConfig& config);

// Rank 0's start-up lines.
void LogStart(const TrainConfig& config, const RankInfo& rank,
              const Strategy& strategy, const DataSource& data,
              const GptModel& model, int64_t tokens_per_step);

// --peak_flops, or every rank measures a matmul at once (they share the
// host's cores as in training); the job's peak is the sum over ranks.
// Collective.
absl::StatusOr<PeakFlops> JobPeakFlops(const TrainConfig& config,
                                       const RankInfo& rank,
                                       Strategy& strategy);
// The same over `communicator` (the pipelined loop's, which has no
// strategy); `who` prefixes errors.
absl::StatusOr<PeakFlops> JobPeakFlops(const TrainConfig& config,
                                       const RankInfo& rank,
                                       collective::Communicator* communicator,
                                       const std::string& who);

void FillStrategyInfo(const Strategy& strategy, const GptModel& model,
                      StrategyInfo* info);

// Rank 0's line for a finished save.
void LogSave(const CheckpointSave& save, const RankInfo& rank);

// "step S of N: the loss is not finite on rank R (nan) ...; every rank
// stopped before the optimizer update", `note` (may be empty) before the
// last clause.
std::string NonFiniteMessage(int64_t step, int32_t steps,
                             const std::vector<int>& loss_ranks,
                             const std::vector<double>& losses,
                             bool norm_finite, double norm,
                             const std::string& note);

// An allocation failure (kResourceExhausted) gets the rank and what to lower.
template <typename T>
absl::StatusOr<T> WithMemoryAdvice(absl::StatusOr<T> result,
                                   const RankInfo& rank,
                                   absl::string_view context) {
  if (result.ok() ||
      result.status().code() != absl::StatusCode::kResourceExhausted) {
    return result;
  }
  // An exception caught by the step's own guard already names the step.
  const bool named = absl::StartsWith(result.status().message(), context);
  return absl::ResourceExhaustedError(absl::StrCat(
      "rank ", rank.rank, ": ", named ? "" : context, result.status().message(),
      " (lower --batch_size or --seq_len, use --activation_checkpointing or "
      "more ranks)"));
}

}  // namespace mtb

#endif  // MTB_TRAINER_RUN_RUN_REPORT_H_
