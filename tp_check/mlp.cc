#include "tp_check/mlp.h"

#include <cmath>

#include "ATen/ATen.h"
#include "common/nn/layers.h"
#include "common/nn/tensor_parallel.h"
#include "common/base/status.h"
#include "common/libtorch/torch_status.h"

namespace mtb::tp_check {

std::vector<TensorSpec> MlpTensors() {
  return {{"out", TensorKind::kOutput},
          {"grad_input", TensorKind::kGrad},
          {"grad_fc_weight", TensorKind::kGrad},
          {"grad_fc_bias", TensorKind::kGrad},
          {"grad_proj_weight", TensorKind::kGrad},
          {"grad_proj_bias", TensorKind::kGrad}};
}

absl::Status ValidateMlp(const CheckOptions& options, const World& world) {
  RETURN_IF_ERROR(ValidateSizes(options));
  return RequireDivisibleByWorld(
      "ffn_hidden", options.ffn_hidden(), world,
      "mlp splits the hidden layer's F units across ranks");
}

std::vector<ExpectedCollective> MlpCollectives(const CheckOptions& options,
                                               int world_size) {
  const int64_t activation_bytes =
      int64_t{options.batch()} * options.seq_len() * options.hidden() * 4;
  return AllReduceEachWay(activation_bytes, world_size);
}

absl::StatusOr<CheckResult> RunMlpCheck(const CheckOptions& options,
                                        collective::Communicator& comm,
                                        const CheckHooks& hooks) {
  RETURN_IF_ERROR(ValidateMlp(options, NprocWorld(comm.world_size())));
  return CallGuarded(kMlp, [&]() -> absl::StatusOr<CheckResult> {
    const int64_t b = options.batch(), t = options.seq_len();
    const int64_t d = options.hidden(), f = options.ffn_hidden();
    SeededTensors seeded = SeededFor(options.seed(), CheckKey::kMlp);
    const at::Tensor x = seeded.Normal({b, t, d}, 1.0);
    nn::MlpParams whole;
    whole.fc_weight = seeded.Normal({f, d}, 1.0 / std::sqrt(d));
    whole.fc_bias = seeded.Normal({f}, 0.1);
    whole.proj_weight = seeded.Normal({d, f}, 1.0 / std::sqrt(f));
    whole.proj_bias = seeded.Normal({d}, 0.1);
    const at::Tensor upstream = seeded.Normal({b, t, d}, 1.0);

    // Reference: nn::Mlp on the whole parameters.
    const at::Tensor ref_x = Leaf(x);
    nn::MlpParams ref;
    ref.fc_weight = Leaf(whole.fc_weight);
    ref.fc_bias = Leaf(whole.fc_bias);
    ref.proj_weight = Leaf(whole.proj_weight);
    ref.proj_bias = Leaf(whole.proj_bias);
    const at::Tensor ref_out = nn::Mlp(ref, ref_x);
    ref_out.backward(upstream);

    // Sharded: nn::Mlp on this rank's F/n units, without the output bias,
    // between f and g; the bias is added once after the sum.
    CheckRecorder recorder(kMlp, MlpTensors(), ToleranceOf(options), hooks,
                           comm);
    const at::Tensor my_x = Leaf(x);
    nn::MlpParams mine;
    mine.fc_weight = ShardLeaf(whole.fc_weight, 0, comm);      // (F/n, D)
    mine.fc_bias = ShardLeaf(whole.fc_bias, 0, comm);          // (F/n)
    mine.proj_weight = ShardLeaf(whole.proj_weight, 1, comm);  // (D, F/n)
    const at::Tensor my_proj_bias = Leaf(whole.proj_bias);     // (D)
    recorder.StartCounting();
    at::Tensor partial =
        nn::Mlp(mine, nn::CopyToTensorParallelRegion(my_x, &comm));  // (B,T,D)
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
    recorder.Compare("grad_fc_weight", grad("grad_fc_weight", mine.fc_weight),
                     Shard(ref.fc_weight.grad(), 0, comm));
    recorder.Compare("grad_fc_bias", grad("grad_fc_bias", mine.fc_bias),
                     Shard(ref.fc_bias.grad(), 0, comm));
    recorder.Compare("grad_proj_weight",
                     grad("grad_proj_weight", mine.proj_weight),
                     Shard(ref.proj_weight.grad(), 1, comm));
    recorder.Compare("grad_proj_bias", grad("grad_proj_bias", my_proj_bias),
                     ref.proj_bias.grad());
    return recorder.Finish(MlpCollectives(options, comm.world_size()));
  });
}

}  // namespace mtb::tp_check
