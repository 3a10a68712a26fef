#include "tp_check/vocab_parallel_ce.h"

#include <algorithm>
#include <cmath>

#include "ATen/ATen.h"
#include "common/collective/traffic.h"
#include "common/nn/layers.h"
#include "common/nn/tensor_parallel.h"
#include "common/base/status.h"
#include "common/libtorch/torch_status.h"

namespace mtb::tp_check {

std::vector<TensorSpec> VocabParallelCeTensors() {
  return {{"logits", TensorKind::kOutput},
          {"loss", TensorKind::kOutput},
          {"grad_wte", TensorKind::kGrad},
          {"grad_wpe", TensorKind::kGrad},
          {"grad_ln_f_weight", TensorKind::kGrad},
          {"grad_ln_f_bias", TensorKind::kGrad}};
}

absl::Status ValidateVocabParallelCe(const CheckOptions& options,
                                     const World& world) {
  RETURN_IF_ERROR(ValidateSizes(options));
  return RequireDivisibleByWorld(
      "vocab", options.vocab(), world,
      "vocab_parallel_ce splits the embedding's vocabulary rows across ranks");
}

std::vector<ExpectedCollective> VocabParallelCeCollectives(
    const CheckOptions& options, int world_size) {
  const int64_t tokens = int64_t{options.batch()} * options.seq_len();
  const int64_t activation =
      collective::AllReduceTraffic(tokens * options.hidden() * 4, world_size).sent;
  const int64_t per_token = collective::AllReduceTraffic(tokens * 4, world_size).sent;
  return {{kForward, collective::CollectiveOp::kAllReduce, 4,
           activation + 3 * per_token},
          {kBackward, collective::CollectiveOp::kAllReduce, 1, activation}};
}

absl::StatusOr<CheckResult> RunVocabParallelCeCheck(
    const CheckOptions& options, collective::Communicator& comm,
    const CheckHooks& hooks) {
  RETURN_IF_ERROR(
      ValidateVocabParallelCe(options, NprocWorld(comm.world_size())));
  return CallGuarded(kVocabParallelCe, [&]() -> absl::StatusOr<CheckResult> {
    const int64_t b = options.batch(), t = options.seq_len();
    const int64_t d = options.hidden(), v = options.vocab();
    const int n = comm.world_size();
    SeededTensors seeded =
        SeededFor(options.seed(), CheckKey::kVocabParallelCe);
    const at::Tensor tokens = seeded.Tokens({b, t}, v);
    const at::Tensor targets = seeded.Tokens({b, t}, v);
    const at::Tensor wte = seeded.Normal({v, d}, 1.0 / std::sqrt(d));
    const at::Tensor wpe = seeded.Normal({t, d}, 1.0 / std::sqrt(d));
    const at::Tensor ln_weight = seeded.Normal({d}, 0.1, /*mean=*/1.0);
    const at::Tensor ln_bias = seeded.Normal({d}, 0.1);

    // Reference: the whole vocabulary, as the trainer's GPT computes it.
    const at::Tensor ref_wte = Leaf(wte), ref_wpe = Leaf(wpe),
                     ref_ln_weight = Leaf(ln_weight),
                     ref_ln_bias = Leaf(ln_bias);
    const at::Tensor ref_hidden = nn::LayerNorm(
        nn::TokenAndPositionEmbedding(tokens, ref_wte, ref_wpe), ref_ln_weight,
        ref_ln_bias);
    const at::Tensor ref_logits = at::linear(ref_hidden, ref_wte);  // (B,T,V)
    const at::Tensor ref_loss = nn::CrossEntropy(ref_logits, targets);
    ref_loss.backward();

    // Sharded: V/n rows of the tied table; never more than V/n columns.
    CheckRecorder recorder(kVocabParallelCe, VocabParallelCeTensors(),
                           ToleranceOf(options), hooks, comm);
    const at::Tensor my_wte = ShardLeaf(wte, 0, comm);  // (V/n, D)
    const at::Tensor my_wpe = Leaf(wpe), my_ln_weight = Leaf(ln_weight),
                     my_ln_bias = Leaf(ln_bias);
    int64_t widest = 0;
    const nn::VocabTensorObserver observe = [&widest](const at::Tensor& t) {
      widest = std::max(widest, t.size(-1));
    };
    recorder.StartCounting();
    const at::Tensor embedded =
        nn::VocabParallelEmbedding(tokens, my_wte, &comm) + my_wpe;
    const at::Tensor hidden = nn::LayerNorm(embedded, my_ln_weight, my_ln_bias);
    at::Tensor logits = at::linear(
        nn::CopyToTensorParallelRegion(hidden, &comm), my_wte);  // (B,T,V/n)
    observe(logits);
    logits = recorder.Perturb("logits", logits);
    at::Tensor loss =
        nn::VocabParallelCrossEntropy(logits.reshape({b * t, v / n}),
                                      targets.reshape({b * t}), &comm, observe)
            .mean();
    loss = recorder.Perturb("loss", loss);
    recorder.EndPhase(kForward);
    loss.backward();
    recorder.EndPhase(kBackward);
    recorder.SetLogitsColumns(widest, v / n);

    auto grad = [&](const char* name, const at::Tensor& leaf) {
      return recorder.Perturb(name, leaf.grad());
    };
    recorder.Compare("logits", logits, Shard(ref_logits, -1, comm));
    recorder.Compare("loss", loss, ref_loss);
    recorder.Compare("grad_wte", grad("grad_wte", my_wte),
                     Shard(ref_wte.grad(), 0, comm));
    recorder.Compare("grad_wpe", grad("grad_wpe", my_wpe), ref_wpe.grad());
    recorder.Compare("grad_ln_f_weight", grad("grad_ln_f_weight", my_ln_weight),
                     ref_ln_weight.grad());
    recorder.Compare("grad_ln_f_bias", grad("grad_ln_f_bias", my_ln_bias),
                     ref_ln_bias.grad());
    return recorder.Finish(VocabParallelCeCollectives(options, n));
  });
}

}  // namespace mtb::tp_check
