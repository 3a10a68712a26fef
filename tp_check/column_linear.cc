#include "tp_check/column_linear.h"

#include <cmath>

#include "ATen/ATen.h"
#include "common/collective/traffic.h"
#include "common/nn/tensor_parallel.h"
#include "common/base/status.h"
#include "common/libtorch/torch_status.h"

namespace mtb::tp_check {

std::vector<TensorSpec> ColumnLinearTensors() {
  return {{"out", TensorKind::kOutput},
          {"grad_input", TensorKind::kGrad},
          {"grad_weight", TensorKind::kGrad},
          {"grad_bias", TensorKind::kGrad}};
}

absl::Status ValidateColumnLinear(const CheckOptions& options,
                                  const World& world) {
  RETURN_IF_ERROR(ValidateSizes(options));
  return RequireDivisibleByWorld(
      "ffn_hidden", options.ffn_hidden(), world,
      "column_linear splits the weight's output rows across ranks");
}

std::vector<ExpectedCollective> ColumnLinearCollectives(
    const CheckOptions& options, int world_size) {
  const int64_t tokens = int64_t{options.batch()} * options.seq_len();
  const int64_t output_bytes = tokens * options.ffn_hidden() * 4;
  const int64_t input_bytes = tokens * options.hidden() * 4;
  std::vector<ExpectedCollective> expected;
  if (options.gather_output()) {
    expected.push_back(
        {kForward, collective::CollectiveOp::kAllGather, 1,
         collective::AllGatherTraffic(output_bytes, world_size).sent});
  }
  expected.push_back({kBackward, collective::CollectiveOp::kAllReduce, 1,
                      collective::AllReduceTraffic(input_bytes, world_size).sent});
  return expected;
}

absl::StatusOr<CheckResult> RunColumnLinearCheck(const CheckOptions& options,
                                                 collective::Communicator& comm,
                                                 const CheckHooks& hooks) {
  RETURN_IF_ERROR(ValidateColumnLinear(options, NprocWorld(comm.world_size())));
  return CallGuarded(kColumnLinear, [&]() -> absl::StatusOr<CheckResult> {
    const int64_t b = options.batch(), t = options.seq_len();
    const int64_t d = options.hidden(), f = options.ffn_hidden();
    const bool gather = options.gather_output();
    SeededTensors seeded = SeededFor(options.seed(), CheckKey::kColumnLinear);
    const at::Tensor x = seeded.Normal({b, t, d}, 1.0);
    const at::Tensor weight = seeded.Normal({f, d}, 1.0 / std::sqrt(d));
    const at::Tensor bias = seeded.Normal({f}, 0.1);
    const at::Tensor upstream = seeded.Normal({b, t, f}, 1.0);

    // Reference: the whole layer.
    const at::Tensor ref_x = Leaf(x), ref_weight = Leaf(weight),
                     ref_bias = Leaf(bias);
    const at::Tensor ref_out = at::linear(ref_x, ref_weight, ref_bias);
    ref_out.backward(upstream);

    // Sharded: this rank's output rows.
    CheckRecorder recorder(kColumnLinear, ColumnLinearTensors(),
                           ToleranceOf(options), hooks, comm);
    const at::Tensor my_x = Leaf(x);
    const at::Tensor my_weight = ShardLeaf(weight, 0, comm);  // (F/n, D)
    const at::Tensor my_bias = ShardLeaf(bias, 0, comm);      // (F/n)
    recorder.StartCounting();
    at::Tensor out = at::linear(nn::CopyToTensorParallelRegion(my_x, &comm),
                                my_weight, my_bias);  // (B, T, F/n)
    out = recorder.Perturb("out", out);
    if (gather) out = nn::GatherFromTensorParallelRegion(out, &comm);
    recorder.EndPhase(kForward);
    out.backward(gather ? upstream : Shard(upstream, -1, comm));
    recorder.EndPhase(kBackward);

    recorder.Compare("out", out, gather ? ref_out : Shard(ref_out, -1, comm));
    recorder.Compare("grad_input", recorder.Perturb("grad_input", my_x.grad()),
                     ref_x.grad());
    recorder.Compare("grad_weight",
                     recorder.Perturb("grad_weight", my_weight.grad()),
                     Shard(ref_weight.grad(), 0, comm));
    recorder.Compare("grad_bias", recorder.Perturb("grad_bias", my_bias.grad()),
                     Shard(ref_bias.grad(), 0, comm));
    return recorder.Finish(ColumnLinearCollectives(options, comm.world_size()));
  });
}

}  // namespace mtb::tp_check
