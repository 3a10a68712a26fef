#include "tp_check/attention.h"

#include <cmath>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "common/nn/attention.h"
#include "common/nn/tensor_parallel.h"
#include "common/base/status.h"
#include "common/libtorch/torch_status.h"

namespace mtb::tp_check {

std::vector<TensorSpec> AttentionTensors() {
  return {{"out", TensorKind::kOutput},
          {"grad_input", TensorKind::kGrad},
          {"grad_qkv_weight", TensorKind::kGrad},
          {"grad_qkv_bias", TensorKind::kGrad},
          {"grad_proj_weight", TensorKind::kGrad},
          {"grad_proj_bias", TensorKind::kGrad}};
}

absl::Status ValidateAttention(const CheckOptions& options,
                               const World& world) {
  RETURN_IF_ERROR(ValidateSizes(options));
  if (options.hidden() % options.heads() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--hidden=", options.hidden(), " is not divisible by --heads=",
        options.heads(), " (attention heads have hidden / heads dimensions)"));
  }
  return RequireDivisibleByWorld(
      "heads", options.heads(), world,
      "attention splits whole heads across ranks");
}

std::vector<ExpectedCollective> AttentionCollectives(
    const CheckOptions& options, int world_size) {
  const int64_t activation_bytes =
      int64_t{options.batch()} * options.seq_len() * options.hidden() * 4;
  return AllReduceEachWay(activation_bytes, world_size);
}

absl::StatusOr<CheckResult> RunAttentionCheck(const CheckOptions& options,
                                              collective::Communicator& comm,
                                              const CheckHooks& hooks) {
  RETURN_IF_ERROR(ValidateAttention(options, NprocWorld(comm.world_size())));
  return CallGuarded(kAttention, [&]() -> absl::StatusOr<CheckResult> {
    const int64_t b = options.batch(), t = options.seq_len();
    const int64_t d = options.hidden(), heads = options.heads();
    const int n = comm.world_size();
    SeededTensors seeded = SeededFor(options.seed(), CheckKey::kAttention);
    const at::Tensor x = seeded.Normal({b, t, d}, 1.0);
    nn::AttentionParams whole;
    whole.qkv_weight = seeded.Normal({3 * d, d}, 1.0 / std::sqrt(d));
    whole.qkv_bias = seeded.Normal({3 * d}, 0.1);
    whole.proj_weight = seeded.Normal({d, d}, 1.0 / std::sqrt(d));
    whole.proj_bias = seeded.Normal({d}, 0.1);
    const at::Tensor upstream = seeded.Normal({b, t, d}, 1.0);
    const nn::CounterDropout no_dropout;

    // Reference: all heads.
    const at::Tensor ref_x = Leaf(x);
    nn::AttentionParams ref;
    ref.qkv_weight = Leaf(whole.qkv_weight);
    ref.qkv_bias = Leaf(whole.qkv_bias);
    ref.proj_weight = Leaf(whole.proj_weight);
    ref.proj_bias = Leaf(whole.proj_bias);
    const at::Tensor ref_out =
        nn::CausalSelfAttention(ref, ref_x, heads, no_dropout, /*layer=*/0);
    ref_out.backward(upstream);

    // Sharded: this rank's H/n heads, output projection without its bias.
    CheckRecorder recorder(kAttention, AttentionTensors(), ToleranceOf(options),
                           hooks, comm);
    const at::Tensor my_x = Leaf(x);
    nn::AttentionParams mine;
    mine.qkv_weight = Leaf(ShardQkv(whole.qkv_weight, comm));   // (3D/n, D)
    mine.qkv_bias = Leaf(ShardQkv(whole.qkv_bias, comm));       // (3D/n)
    mine.proj_weight = ShardLeaf(whole.proj_weight, 1, comm);   // (D, D/n)
    const at::Tensor my_proj_bias = Leaf(whole.proj_bias);      // (D)
    recorder.StartCounting();
    at::Tensor partial = nn::CausalSelfAttention(
        mine, nn::CopyToTensorParallelRegion(my_x, &comm), heads / n,
        no_dropout, /*layer=*/0);  // (B, T, D)
    partial = recorder.Perturb("out", partial);
    const at::Tensor out =
        nn::ReduceFromTensorParallelRegion(partial, &comm) + my_proj_bias;
    recorder.EndPhase(kForward);
    out.backward(upstream);
    recorder.EndPhase(kBackward);

    auto grad = [&](const char* name, const at::Tensor& leaf) {
      return recorder.Perturb(name, leaf.grad());
    };
    recorder.Compare("out", out, ref_out);
    recorder.Compare("grad_input", grad("grad_input", my_x), ref_x.grad());
    recorder.Compare("grad_qkv_weight", grad("grad_qkv_weight", mine.qkv_weight),
                     ShardQkv(ref.qkv_weight.grad(), comm));
    recorder.Compare("grad_qkv_bias", grad("grad_qkv_bias", mine.qkv_bias),
                     ShardQkv(ref.qkv_bias.grad(), comm));
    recorder.Compare("grad_proj_weight",
                     grad("grad_proj_weight", mine.proj_weight),
                     Shard(ref.proj_weight.grad(), 1, comm));
    recorder.Compare("grad_proj_bias", grad("grad_proj_bias", my_proj_bias),
                     ref.proj_bias.grad());
    return recorder.Finish(AttentionCollectives(options, n));
  });
}

}  // namespace mtb::tp_check
