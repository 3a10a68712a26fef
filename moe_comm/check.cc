#include "moe_comm/check.h"

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/collective/traffic.h"
#include "common/libtorch/torch_status.h"
#include "moe_comm/model.h"

namespace mtb::moe_comm {

using equivalence::CheckRecorder;
using equivalence::ExpectedCollective;
using equivalence::kBackward;
using equivalence::kForward;
using equivalence::Leaf;
using equivalence::TensorKind;

std::vector<equivalence::TensorSpec> MoeCheckTensors() {
  return {{"out", TensorKind::kOutput},
          {"aux_loss", TensorKind::kOutput},
          {"z_loss", TensorKind::kOutput},
          {"grad_input", TensorKind::kGrad},
          {"grad_router_weight", TensorKind::kGrad},
          {"grad_fc_weight", TensorKind::kGrad},
          {"grad_fc_bias", TensorKind::kGrad},
          {"grad_proj_weight", TensorKind::kGrad},
          {"grad_proj_bias", TensorKind::kGrad}};
}

namespace {

// The closed form, from the reference's routing (`kept` (n * N, k),
// `experts` the same shape) for this rank.
std::vector<ExpectedCollective> ExpectedCollectives(
    const MoeConfig& config, const at::Tensor& experts, const at::Tensor& kept,
    int rank, int n) {
  const int64_t e = config.num_experts(), d = config.hidden();
  const int64_t per_rank = e / n;
  const at::Tensor owner = at::floor_divide(experts, per_rank);  // (nN, k)
  const at::Tensor source =
      at::floor_divide(at::arange(experts.size(0), at::kLong),
                       config.tokens_per_rank())
          .unsqueeze(1)
          .expand_as(owner);
  const int64_t sent_to_others =
      (kept & (source == rank) & (owner != rank)).sum().item<int64_t>();
  const int64_t received_from_others =
      (kept & (source != rank) & (owner == rank)).sum().item<int64_t>();
  const int64_t exchange_bytes = (sent_to_others + received_from_others) * d * 4;
  using collective::CollectiveOp;
  return {
      {kForward, CollectiveOp::kAllReduce, 1,
       collective::AllReduceTraffic((2 * e + 3) * 4, n).sent},
      {kForward, CollectiveOp::kAllToAll, 1,
       collective::AllToAllTraffic(e * 8, n).sent},
      {kForward, CollectiveOp::kAllToAllV, 2, exchange_bytes},
      {kBackward, CollectiveOp::kAllToAllV, 2, exchange_bytes},
      {kBackward, CollectiveOp::kAllReduce, 1,
       collective::AllReduceTraffic(e * d * 4, n).sent},
  };
}

}  // namespace

absl::StatusOr<ConfigCheck> RunMoeCheck(const MoeConfig& config,
                                        const MoeCommOptions& options,
                                        collective::Communicator& comm,
                                        const MoeCheckHooks& hooks,
                                        const PhaseHook& before_phase) {
  const int n = comm.world_size(), rank = comm.rank();
  return CallGuarded("moe check", [&]() -> absl::StatusOr<ConfigCheck> {
    const MoeInstance instance = SeededInstance(config, options.seed(), n);
    const double aux_w = options.aux_loss_weight(), z_w = options.z_loss_weight();

    // Reference: the whole layer on the whole batch, on every rank.
    nn::MoeParams ref = instance.whole;
    ref.router_weight = Leaf(instance.whole.router_weight);
    ref.fc_weight = Leaf(instance.whole.fc_weight);
    ref.fc_bias = Leaf(instance.whole.fc_bias);
    ref.proj_weight = Leaf(instance.whole.proj_weight);
    ref.proj_bias = Leaf(instance.whole.proj_bias);
    const at::Tensor ref_x = Leaf(instance.x);
    const nn::MoeOutput expected =
        nn::ReferenceMoe(ref, ref_x, config.top_k(), config.capacity_factor(), n);
    ((expected.out * instance.upstream).sum() + aux_w * expected.aux_loss +
     z_w * expected.z_loss)
        .backward();

    // Expert-parallel: this rank's tokens and experts.
    const nn::MoeParams block = ExpertBlock(instance.whole, rank, n);
    nn::MoeParams mine = block;
    mine.router_weight = Leaf(block.router_weight);
    mine.fc_weight = Leaf(block.fc_weight);
    mine.fc_bias = Leaf(block.fc_bias);
    mine.proj_weight = Leaf(block.proj_weight);
    mine.proj_bias = Leaf(block.proj_bias);
    const at::Tensor my_x = Leaf(RankRows(instance.x, rank, n));
    LayerOptions layer;
    layer.num_experts = config.num_experts();
    layer.top_k = config.top_k();
    layer.capacity_factor = config.capacity_factor();
    layer.packing = hooks.packing;
    layer.before_phase = before_phase;

    CheckRecorder recorder(
        "moe_layer", MoeCheckTensors(),
        equivalence::Tolerance{options.rtol(), options.atol()}, hooks.perturb,
        comm);
    recorder.StartCounting();
    ASSIGN_OR_RETURN(LayerOutput output,
                     ExpertParallelMoe(mine, my_x, layer, comm));
    const at::Tensor out = recorder.Perturb("out", output.out);
    recorder.EndPhase(kForward);
    ((out * RankRows(instance.upstream, rank, n)).sum() +
     aux_w * output.aux_loss + z_w * output.z_loss)
        .backward();
    at::Tensor router_grad = mine.router_weight.grad();
    RETURN_IF_ERROR(comm.AllReduce(router_grad, collective::ReduceOp::kSum));
    recorder.EndPhase(kBackward);

    auto grad = [&](const char* name, const at::Tensor& leaf) {
      return recorder.Perturb(name, leaf.grad());
    };
    auto my_block = [&](const at::Tensor& t) {
      const int64_t per_rank = t.size(0) / n;
      return t.slice(0, rank * per_rank, (rank + 1) * per_rank);
    };
    recorder.Compare("out", out, RankRows(expected.out, rank, n));
    recorder.Compare("aux_loss", recorder.Perturb("aux_loss", output.aux_loss),
                     expected.aux_loss);
    recorder.Compare("z_loss", recorder.Perturb("z_loss", output.z_loss),
                     expected.z_loss);
    recorder.Compare("grad_input", grad("grad_input", my_x),
                     RankRows(ref_x.grad(), rank, n));
    recorder.Compare("grad_router_weight",
                     grad("grad_router_weight", mine.router_weight),
                     ref.router_weight.grad());
    recorder.Compare("grad_fc_weight", grad("grad_fc_weight", mine.fc_weight),
                     my_block(ref.fc_weight.grad()));
    recorder.Compare("grad_fc_bias", grad("grad_fc_bias", mine.fc_bias),
                     my_block(ref.fc_bias.grad()));
    recorder.Compare("grad_proj_weight",
                     grad("grad_proj_weight", mine.proj_weight),
                     my_block(ref.proj_weight.grad()));
    recorder.Compare("grad_proj_bias", grad("grad_proj_bias", mine.proj_bias),
                     my_block(ref.proj_bias.grad()));
    ConfigCheck result;
    *result.mutable_config() = config;
    ASSIGN_OR_RETURN(
        *result.mutable_check(),
        recorder.Finish(ExpectedCollectives(config, expected.routing.experts,
                                            expected.kept, rank, n)));
    result.set_assignments(output.trace.global_assignments);
    result.set_dropped(output.trace.global_dropped);
    return result;
  });
}

}  // namespace mtb::moe_comm
