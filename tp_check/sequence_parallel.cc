#include "tp_check/sequence_parallel.h"

#include <cmath>

#include "ATen/ATen.h"
#include "common/collective/traffic.h"
#include "common/nn/dropout.h"
#include "common/nn/layers.h"
#include "common/nn/tensor_parallel.h"
#include "common/base/status.h"
#include "common/libtorch/torch_status.h"

namespace mtb::tp_check {
namespace {

// The dropout of the reference and of the shards: the trainer's MLP-output
// site of layer 0 at step 1, samples 0..B-1.
constexpr int64_t kStep = 1;
constexpr int64_t kLayer = 0;

}  // namespace

std::vector<TensorSpec> SequenceParallelTensors() {
  return {{"out", TensorKind::kOutput},
          {"grad_input", TensorKind::kGrad},
          {"grad_ln_weight", TensorKind::kGrad},
          {"grad_ln_bias", TensorKind::kGrad},
          {"grad_fc_weight", TensorKind::kGrad},
          {"grad_fc_bias", TensorKind::kGrad},
          {"grad_proj_weight", TensorKind::kGrad},
          {"grad_proj_bias", TensorKind::kGrad}};
}

absl::Status ValidateSequenceParallel(const CheckOptions& options,
                                      const World& world) {
  RETURN_IF_ERROR(ValidateSizes(options));
  RETURN_IF_ERROR(RequireDivisibleByWorld(
      "seq_len", options.seq_len(), world,
      "sequence_parallel splits every sample's positions across ranks"));
  return RequireDivisibleByWorld(
      "ffn_hidden", options.ffn_hidden(), world,
      "sequence_parallel's MLP splits its F units across ranks");
}

std::vector<ExpectedCollective> SequenceParallelCollectives(
    const CheckOptions& options, int world_size) {
  const int64_t activation_bytes =
      int64_t{options.batch()} * options.seq_len() * options.hidden() * 4;
  const int64_t gather =
      collective::AllGatherTraffic(activation_bytes, world_size).sent;
  const int64_t scatter =
      collective::ReduceScatterTraffic(activation_bytes, world_size).sent;
  // LayerNorm weight and bias, and the row layer's bias: 3D floats.
  const int64_t partial_grads_bytes = 3 * int64_t{options.hidden()} * 4;
  return {
      {kForward, collective::CollectiveOp::kAllGather, 1, gather},
      {kForward, collective::CollectiveOp::kReduceScatter, 1, scatter},
      {kBackward, collective::CollectiveOp::kAllGather, 1, gather},
      {kBackward, collective::CollectiveOp::kReduceScatter, 1, scatter},
      {kBackward, collective::CollectiveOp::kAllReduce, 1,
       collective::AllReduceTraffic(partial_grads_bytes, world_size).sent},
  };
}

absl::StatusOr<CheckResult> RunSequenceParallelCheck(
    const CheckOptions& options, collective::Communicator& comm,
    const CheckHooks& hooks) {
  RETURN_IF_ERROR(
      ValidateSequenceParallel(options, NprocWorld(comm.world_size())));
  return CallGuarded(kSequenceParallel, [&]() -> absl::StatusOr<CheckResult> {
    const int64_t b = options.batch(), t = options.seq_len();
    const int64_t d = options.hidden(), f = options.ffn_hidden();
    SeededTensors seeded =
        SeededFor(options.seed(), CheckKey::kSequenceParallel);
    const at::Tensor x = seeded.Normal({b, t, d}, 1.0);
    const at::Tensor ln_weight = seeded.Normal({d}, 0.1, /*mean=*/1.0);
    const at::Tensor ln_bias = seeded.Normal({d}, 0.1);
    nn::MlpParams whole;
    whole.fc_weight = seeded.Normal({f, d}, 1.0 / std::sqrt(d));
    whole.fc_bias = seeded.Normal({f}, 0.1);
    whole.proj_weight = seeded.Normal({d, f}, 1.0 / std::sqrt(f));
    whole.proj_bias = seeded.Normal({d}, 0.1);
    const at::Tensor upstream = seeded.Normal({b, t, d}, 1.0);
    nn::CounterDropout dropout;
    dropout.p = options.dropout();
    dropout.seed = options.seed();
    dropout.step = kStep;
    for (int64_t sample = 0; sample < b; ++sample) {
      dropout.sample_indices.push_back(sample);
    }

    // Reference: the whole sequence, as the trainer's block computes it.
    const at::Tensor ref_x = Leaf(x), ref_ln_weight = Leaf(ln_weight),
                     ref_ln_bias = Leaf(ln_bias);
    nn::MlpParams ref;
    ref.fc_weight = Leaf(whole.fc_weight);
    ref.fc_bias = Leaf(whole.fc_bias);
    ref.proj_weight = Leaf(whole.proj_weight);
    ref.proj_bias = Leaf(whole.proj_bias);
    const at::Tensor ref_mlp =
        nn::Mlp(ref, nn::LayerNorm(ref_x, ref_ln_weight, ref_ln_bias));
    const at::Tensor ref_out =
        ref_x + dropout.Apply(ref_mlp, kLayer, nn::DropoutSite::kMlpOutput);
    ref_out.backward(upstream);

    // Sharded: positions [r·T/n, (r+1)·T/n) outside the MLP, F/n units in it.
    CheckRecorder recorder(kSequenceParallel, SequenceParallelTensors(),
                           ToleranceOf(options), hooks, comm);
    const at::Tensor my_x = ShardLeaf(x, 1, comm);  // (B, T/n, D)
    const at::Tensor my_ln_weight = Leaf(ln_weight), my_ln_bias = Leaf(ln_bias);
    nn::MlpParams mine;
    mine.fc_weight = ShardLeaf(whole.fc_weight, 0, comm);      // (F/n, D)
    mine.fc_bias = ShardLeaf(whole.fc_bias, 0, comm);          // (F/n)
    mine.proj_weight = ShardLeaf(whole.proj_weight, 1, comm);  // (D, F/n)
    const at::Tensor my_proj_bias = Leaf(whole.proj_bias);     // (D)
    // This shard's slice of every sample's mask (the same keys as Apply).
    const at::Tensor my_keep =
        dropout.enabled()
            ? Shard(nn::DropoutKeepMask({b, t, d}, dropout.sample_indices,
                                        dropout.seed, kStep, kLayer,
                                        nn::DropoutSite::kMlpOutput, dropout.p),
                    1, comm)
            : at::Tensor();  // (B, T/n, D)

    recorder.StartCounting();
    const at::Tensor my_normed = nn::LayerNorm(my_x, my_ln_weight, my_ln_bias);
    const at::Tensor normed =
        nn::GatherFromSequenceParallelRegion(my_normed, 1, &comm);  // (B,T,D)
    const at::Tensor partial = nn::Mlp(mine, normed);  // (B, T, D), no bias
    const at::Tensor my_mlp =
        nn::ReduceScatterToSequenceParallelRegion(partial, 1, &comm) +
        my_proj_bias;  // (B, T/n, D)
    // Perturbed after dropout, which could drop the perturbed element.
    const at::Tensor out = recorder.Perturb(
        "out", my_x + (dropout.enabled()
                           ? nn::ApplyDropoutMask(my_mlp, my_keep, dropout.p)
                           : my_mlp));
    recorder.EndPhase(kForward);
    out.backward(Shard(upstream, 1, comm));
    // Parameters used on this shard only hold this shard's part of their
    // gradient: one coalesced all-reduce (Megatron's layernorm grad sync).
    const at::Tensor partial_grads = at::cat(
        {my_ln_weight.grad(), my_ln_bias.grad(), my_proj_bias.grad()});
    const std::vector<at::Tensor> summed =
        nn::AllReduceSum(partial_grads, &comm).split(d);
    recorder.EndPhase(kBackward);

    auto grad = [&](const char* name, const at::Tensor& leaf) {
      return recorder.Perturb(name, leaf.grad());
    };
    recorder.Compare("out", out, Shard(ref_out, 1, comm));
    recorder.Compare("grad_input", grad("grad_input", my_x),
                     Shard(ref_x.grad(), 1, comm));
    recorder.Compare("grad_ln_weight",
                     recorder.Perturb("grad_ln_weight", summed[0]),
                     ref_ln_weight.grad());
    recorder.Compare("grad_ln_bias",
                     recorder.Perturb("grad_ln_bias", summed[1]),
                     ref_ln_bias.grad());
    recorder.Compare("grad_fc_weight", grad("grad_fc_weight", mine.fc_weight),
                     Shard(ref.fc_weight.grad(), 0, comm));
    recorder.Compare("grad_fc_bias", grad("grad_fc_bias", mine.fc_bias),
                     Shard(ref.fc_bias.grad(), 0, comm));
    recorder.Compare("grad_proj_weight",
                     grad("grad_proj_weight", mine.proj_weight),
                     Shard(ref.proj_weight.grad(), 1, comm));
    recorder.Compare("grad_proj_bias",
                     recorder.Perturb("grad_proj_bias", summed[2]),
                     ref.proj_bias.grad());
    return recorder.Finish(
        SequenceParallelCollectives(options, comm.world_size()));
  });
}

}  // namespace mtb::tp_check
