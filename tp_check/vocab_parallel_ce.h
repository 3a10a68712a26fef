// vocab_parallel_ce: the ends of the GPT (trainer/model/model.h) with the
// vocabulary split across ranks: the tied token embedding / LM head (V, D) is
// split by rows, rank r holding tokens [r·V/n, (r+1)·V/n).
//
//   reference: x = wte[tokens] + wpe[0:T]; h = LayerNorm(x);
//              logits = h wteᵀ (B, T, V); loss = mean cross-entropy
//   sharded:   x = VocabParallelEmbedding (one all-reduce) + wpe[0:T];
//              h = LayerNorm(x); logits_r = f(h) wte_rᵀ (B·T, V/n);
//              loss = mean VocabParallelCrossEntropy (all-reduces of the row
//              max, the target logit and the sum of exponentials)
//
// No rank ever holds more than V/n logits columns: every vocabulary-wide
// tensor the sharded code creates (the logits shard, and the cross-entropy's
// own, forward and backward) is observed, and the widest is reported and must
// be V/n.
#ifndef MTB_TP_CHECK_VOCAB_PARALLEL_CE_H_
#define MTB_TP_CHECK_VOCAB_PARALLEL_CE_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "tp_check/check_util.h"
#include "tp_check/options.h"
#include "tp_check/tp_check.pb.h"

namespace mtb::tp_check {

inline constexpr char kVocabParallelCe[] = "vocab_parallel_ce";

// logits, loss, grad_wte, grad_wpe, grad_ln_f_weight, grad_ln_f_bias.
std::vector<TensorSpec> VocabParallelCeTensors();

// V divisible by n.
absl::Status ValidateVocabParallelCe(const CheckOptions& options,
                                     const World& world);

// Forward: four all-reduces, one of the (B, T, D) embedding output and three
// of B·T values (max, target logit, sum of exponentials). Backward: one
// all-reduce of the (B, T, D) gradient entering the LM head (f).
std::vector<ExpectedCollective> VocabParallelCeCollectives(
    const CheckOptions& options, int world_size);

// Collective: every rank of `comm` calls it.
absl::StatusOr<CheckResult> RunVocabParallelCeCheck(
    const CheckOptions& options, collective::Communicator& comm,
    const CheckHooks& hooks);

}  // namespace mtb::tp_check

#endif  // MTB_TP_CHECK_VOCAB_PARALLEL_CE_H_
