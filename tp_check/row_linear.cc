#include "tp_check/row_linear.h"

#include <cmath>

#include "ATen/ATen.h"
#include "common/collective/traffic.h"
#include "common/nn/tensor_parallel.h"
#include "common/base/status.h"
#include "common/libtorch/torch_status.h"

namespace mtb::tp_check {

std::vector<TensorSpec> RowLinearTensors() {
  return {{"out", TensorKind::kOutput},
          {"grad_input", TensorKind::kGrad},
          {"grad_weight", TensorKind::kGrad},
          {"grad_bias", TensorKind::kGrad}};
}

absl::Status ValidateRowLinear(const CheckOptions& options,
                               const World& world) {
  RETURN_IF_ERROR(ValidateSizes(options));
  return RequireDivisibleByWorld(
      "ffn_hidden", options.ffn_hidden(), world,
      "row_linear splits the weight's input columns across ranks");
}

std::vector<ExpectedCollective> RowLinearCollectives(
    const CheckOptions& options, int world_size) {
  const int64_t output_bytes =
      int64_t{options.batch()} * options.seq_len() * options.hidden() * 4;
  return {{kForward, collective::CollectiveOp::kAllReduce, 1,
           collective::AllReduceTraffic(output_bytes, world_size).sent}};
}

absl::StatusOr<CheckResult> RunRowLinearCheck(const CheckOptions& options,
                                              collective::Communicator& comm,
                                              const CheckHooks& hooks) {
  RETURN_IF_ERROR(ValidateRowLinear(options, NprocWorld(comm.world_size())));
  return CallGuarded(kRowLinear, [&]() -> absl::StatusOr<CheckResult> {
    const int64_t b = options.batch(), t = options.seq_len();
    const int64_t d = options.hidden(), f = options.ffn_hidden();
    SeededTensors seeded = SeededFor(options.seed(), CheckKey::kRowLinear);
    const at::Tensor x = seeded.Normal({b, t, f}, 1.0);
    const at::Tensor weight = seeded.Normal({d, f}, 1.0 / std::sqrt(f));
    const at::Tensor bias = seeded.Normal({d}, 0.1);
    const at::Tensor upstream = seeded.Normal({b, t, d}, 1.0);

    // Reference: the whole layer.
    const at::Tensor ref_x = Leaf(x), ref_weight = Leaf(weight),
                     ref_bias = Leaf(bias);
    const at::Tensor ref_out = at::linear(ref_x, ref_weight, ref_bias);
    ref_out.backward(upstream);

    // Sharded: this rank's input columns; the bias stays whole.
    CheckRecorder recorder(kRowLinear, RowLinearTensors(), ToleranceOf(options),
                           hooks, comm);
    const at::Tensor my_x = ShardLeaf(x, -1, comm);            // (B, T, F/n)
    const at::Tensor my_weight = ShardLeaf(weight, 1, comm);   // (D, F/n)
    const at::Tensor my_bias = Leaf(bias);                     // (D)
    recorder.StartCounting();
    at::Tensor partial = at::linear(my_x, my_weight);  // (B, T, D), no bias
    partial = recorder.Perturb("out", partial);
    const at::Tensor out =
        nn::ReduceFromTensorParallelRegion(partial, &comm) + my_bias;
    recorder.EndPhase(kForward);
    out.backward(upstream);
    recorder.EndPhase(kBackward);

    recorder.Compare("out", out, ref_out);
    recorder.Compare("grad_input", recorder.Perturb("grad_input", my_x.grad()),
                     Shard(ref_x.grad(), -1, comm));
    recorder.Compare("grad_weight",
                     recorder.Perturb("grad_weight", my_weight.grad()),
                     Shard(ref_weight.grad(), 1, comm));
    recorder.Compare("grad_bias", recorder.Perturb("grad_bias", my_bias.grad()),
                     ref_bias.grad());
    return recorder.Finish(RowLinearCollectives(options, comm.world_size()));
  });
}

}  // namespace mtb::tp_check
