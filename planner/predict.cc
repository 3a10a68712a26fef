// The model of a step (docs/planner.md). Vocabulary: a rank computes
// micro-batches of b samples of T tokens; m micro-batches make an optimizer
// step; the rank holds Lp = L / pp blocks and a tp-th of each. t_f is one
// micro-batch's forward on this rank, t_b its backward (2 t_f, plus t_f
// recomputed with activation checkpointing). Units are what the strategies
// communicate piece by piece: the root (embeddings, final LayerNorm) and
// each block; buckets are ddp's and zero's pieces, packed from the units in
// the order backward produces their gradients.
#include "planner/predict.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "planner/cluster.h"
#include "planner/cost_model.h"
#include "planner/memory.h"
#include "planner/strategy_traits.h"
#include "trainer/memory/memory_estimate.h"
#include "trainer/strategy/registry.h"

namespace mtb::planner {
namespace {

constexpr int64_t kFirstBucketBytes = int64_t{1} << 20;

struct Unit {
  int64_t bytes = 0;   // its gradient (or parameters) on this rank
  double ready_s = 0;  // when backward has produced its gradient
};

// Buckets as the trainer's bucket engine packs them: the first holds 1 MB,
// the others `cap` bytes, in gradient order; a bucket is ready when its
// last unit is.
std::vector<Unit> PackBuckets(const std::vector<Unit>& units, int64_t cap) {
  std::vector<Unit> buckets;
  Unit open;
  for (const Unit& unit : units) {
    int64_t left = unit.bytes;
    while (left > 0) {
      const int64_t limit = buckets.empty() ? kFirstBucketBytes : cap;
      const int64_t take = std::min(left, limit - open.bytes);
      open.bytes += take;
      open.ready_s = unit.ready_s;
      left -= take;
      if (open.bytes == limit) {
        buckets.push_back(open);
        open = Unit();
      }
    }
  }
  if (open.bytes > 0) buckets.push_back(open);
  return buckets;
}

// Which link a group of `size` ranks with rank stride `stride` uses: ranks
// are numbered tp fastest, then dp, then pp (Megatron-LM's order), nodes
// filled in order.
std::string Scope(int stride, int size, const Cluster& cluster) {
  if (cluster.oversubscribed_ranks_share_devices() && cluster.nodes().value() == 1) {
    return "intra";
  }
  return static_cast<double>(stride) * size <= cluster.devices_per_node().value() ? "intra"
                                                                                  : "inter";
}

std::string Percent(double part, double whole) {
  return absl::StrFormat("%.0f%%", whole > 0 ? 100.0 * part / whole : 0.0);
}

}  // namespace

Layout DefaultLayout() {
  Layout layout;
  layout.set_dp(1);
  layout.set_tp(1);
  layout.set_pp(1);
  layout.set_strategy("ddp");
  layout.set_micro_batch(1);
  layout.set_micro_batches(1);
  layout.set_precision("fp32");
  layout.set_fsdp_reshard_after_forward(true);
  layout.set_pipeline_chunks(1);
  layout.set_gradient_bytes(4);
  layout.set_bucket_cap_mb(25);
  return layout;
}

absl::Status ValidateLayout(const ModelSpec& model, const Layout& layout, const Cluster& cluster) {
  for (const auto& [name, value] :
       std::vector<std::pair<const char*, int>>{{"dp", layout.dp()},
                                                {"tp", layout.tp()},
                                                {"pp", layout.pp()},
                                                {"micro_batch", layout.micro_batch()},
                                                {"micro_batches", layout.micro_batches()},
                                                {"pipeline_chunks", layout.pipeline_chunks()},
                                                {"gradient_bytes", layout.gradient_bytes()}}) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("layout ", name, " is ", value, ": must be >= 1"));
    }
  }
  ASSIGN_OR_RETURN(const StrategyKind kind, ParseStrategy(layout.strategy()));
  const int world = layout.dp() * layout.tp() * layout.pp();
  if (const int most = EntryFor(kind).max_world_size; most > 0 && world > most) {
    return absl::InvalidArgumentError(
        absl::StrCat("--strategy=", layout.strategy(), " runs at most ", most, " rank(s), but dp ",
                     layout.dp(), " x tp ", layout.tp(), " x pp ", layout.pp(), " = ", world));
  }
  if (!cluster.oversubscribed_ranks_share_devices() && world > TotalDevices(cluster)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layout dp ", layout.dp(), " x tp ", layout.tp(), " x pp ", layout.pp(), " = ", world,
        " ranks exceeds the cluster's ", TotalDevices(cluster), " devices (nodes ",
        cluster.nodes().value(), " x devices_per_node ", cluster.devices_per_node().value(), ")"));
  }
  const int stage_chunks = layout.pp() * layout.pipeline_chunks();
  if (model.n_layers() % stage_chunks != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--n_layers=", model.n_layers(), " is not divisible by pp ", layout.pp(),
                     " x pipeline_chunks ", layout.pipeline_chunks(), " = ", stage_chunks,
                     ": every stage holds whole blocks"));
  }
  if (model.n_heads() % layout.tp() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--n_heads=", model.n_heads(), " is not divisible by tp ", layout.tp(),
                     ": tensor parallelism splits attention by heads"));
  }
  if ((4 * model.d_model()) % layout.tp() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("the MLP width 4 x --d_model=", model.d_model(),
                                                   " = ", 4 * model.d_model(),
                                                   " is not divisible by tp ", layout.tp()));
  }
  if (layout.precision() != "fp32" && layout.precision() != "bf16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--precision=", layout.precision(), ": use fp32 or bf16"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Prediction> Predict(const ModelSpec& model, const Layout& layout,
                                   const Cluster& cluster) {
  RETURN_IF_ERROR(ValidateLayout(model, layout, cluster));
  const StrategyKind kind = *ParseStrategy(layout.strategy());
  const int dp = layout.dp(), tp = layout.tp(), pp = layout.pp();
  const int world = dp * tp * pp;
  const int m = layout.micro_batches();
  const int64_t b = layout.micro_batch();
  const int64_t t = model.seq_len(), d = model.d_model();
  const int lp = model.n_layers() / pp;
  // Ranks beyond a node's devices share them (CPU hosts: cores): a rate
  // measured with r ranks on the node already includes max(1, r / devices).
  const int ranks_per_node =
      static_cast<int>(std::ceil(static_cast<double>(world) / cluster.nodes().value()));
  int measured_ranks_per_node = 1;
  ASSIGN_OR_RETURN(const double rate, FlopsRate(cluster, layout.precision(), model.d_model(),
                                                ranks_per_node, &measured_ranks_per_node));
  ASSIGN_OR_RETURN(const double peak, PeakFlopsRate(cluster, layout.precision()));
  const double devices = cluster.devices_per_node().value();
  auto oversubscription = [&](int ranks) {
    return cluster.oversubscribed_ranks_share_devices() ? std::max(1.0, ranks / devices) : 1.0;
  };
  const double slowdown =
      oversubscription(ranks_per_node) / oversubscription(measured_ranks_per_node);
  // The optimizer's bandwidth is measured with one rank on the node; with
  // more it slows down as much as compute does (the rates at one rank and at
  // this many, each per its own oversubscription).
  int solo_ranks = 1;
  ASSIGN_OR_RETURN(const double solo_rate,
                   FlopsRate(cluster, layout.precision(), model.d_model(), 1, &solo_ranks));
  const double optimizer_slowdown = solo_rate * oversubscription(solo_ranks) / (rate / slowdown);

  // Compute: a third of the model FLOPs forward, two thirds backward.
  const double forward_flops =
      model.flops_per_token() / 3.0 * static_cast<double>(b * t) / (tp * pp);
  const double t_f = forward_flops / rate * slowdown;
  const double t_b = (2.0 + (layout.activation_checkpointing() ? 1.0 : 0.0)) * t_f;
  // The head's share (2 V d per token of the forward's) on the last stage.
  const double head_share =
      pp == 1 ? 2.0 * model.vocab_size() * d / (model.flops_per_token() / 3.0) : 0.0;
  const double block_f = t_f * (1 - head_share) / lp;
  const double block_b = t_b * (1 - head_share) / lp;

  StepBreakdown step;
  step.set_forward_s(m * t_f);
  step.set_backward_s(m * t_b);
  step.set_bubble_s(static_cast<double>(pp - 1) / layout.pipeline_chunks() * (t_f + t_b));

  // Tensor parallelism: exposed collectives of b T d activations.
  const int64_t act_bytes_per_element = layout.precision() == "bf16" ? 2 : 4;
  const int64_t activation = ActivationBytes(b, t, d, act_bytes_per_element);
  if (tp > 1) {
    const std::string scope = Scope(1, tp, cluster);
    const int collectives = TensorParallelCollectivesPerBlock(layout.activation_checkpointing());
    double per_block = 0;
    if (layout.sequence_parallel()) {
      ASSIGN_OR_RETURN(LinkCost gather,
                       LinkFor(cluster, Collective::kAllGather, scope, activation, tp));
      ASSIGN_OR_RETURN(LinkCost scatter,
                       LinkFor(cluster, Collective::kReduceScatter, scope, activation, tp));
      per_block =
          collectives * (CollectiveSeconds(Collective::kAllGather, activation, tp, gather) +
                         CollectiveSeconds(Collective::kReduceScatter, activation, tp, scatter));
    } else {
      ASSIGN_OR_RETURN(LinkCost link,
                       LinkFor(cluster, Collective::kAllReduce, scope, activation, tp));
      per_block = collectives * CollectiveSeconds(Collective::kAllReduce, activation, tp, link);
    }
    step.set_tp_comm_s(m * lp * per_block);
  }
  // Pipeline: activations forward and their gradients backward at every
  // stage boundary, (m + p - 1) slots; with tp each rank sends its tp-th
  // (Megatron-LM's scatter/gather across the tensor-parallel group).
  if (pp > 1) {
    const std::string scope = Scope(tp * dp, pp, cluster);
    const int64_t send_bytes = activation / tp;
    ASSIGN_OR_RETURN(LinkCost link, LinkFor(cluster, Collective::kSendRecv, scope, send_bytes, 2));
    step.set_pp_comm_s(2.0 * (m + pp - 1) *
                       CollectiveSeconds(Collective::kSendRecv, send_bytes, 2, link));
  }

  // Data parallelism over dp ranks, strategy by strategy.
  const TrainConfig config = TrainerConfigFor(model, layout);
  const int64_t root_params = GptRootUnitCount(config) / tp;
  const int64_t block_params = GptBlockUnitCount(config) / tp;
  const int64_t rank_params = RankParameters(model, layout);
  const int64_t element = layout.gradient_bytes();
  double dp_comm = 0, dp_exposed = 0;
  double optimizer_params = static_cast<double>(rank_params);
  if (dp > 1) {
    const std::string scope = Scope(tp, dp, cluster);
    // Gradients in the order backward produces them: the blocks from the
    // last, then the root (the tied embedding's gradient completes last).
    std::vector<Unit> units;
    for (int k = 1; k <= lp; ++k) {
      units.push_back({block_params * element, head_share * t_b + k * block_b});
    }
    units.push_back({root_params * element, t_b});
    auto cost = [&](Collective op, int64_t bytes) -> absl::StatusOr<double> {
      ASSIGN_OR_RETURN(LinkCost link, LinkFor(cluster, op, scope, bytes, dp));
      return CollectiveSeconds(op, bytes, dp, link);
    };
    const bool every = config.grad_sync() == "every";
    const int syncs = every ? m : 1;
    if (GathersParametersPerUnit(kind)) {
      optimizer_params = std::ceil(optimizer_params / dp);
      const bool reshard = layout.fsdp_reshard_after_forward();
      std::vector<double> gather_f, compute_f, gather_b, compute_b;
      std::vector<QueuedTransfer> scatters;
      double micro_comm = 0;
      for (int k = 0; k < lp; ++k) {
        ASSIGN_OR_RETURN(double gather, cost(Collective::kAllGather, block_params * element));
        gather_f.push_back(gather);
        compute_f.push_back(block_f);
        if (reshard) {
          gather_b.push_back(gather);
          compute_b.push_back(block_b);
        }
        micro_comm += gather * (reshard ? 2 : 1);
      }
      for (const Unit& unit : units) {
        ASSIGN_OR_RETURN(double scatter, cost(Collective::kReduceScatter, unit.bytes));
        scatters.push_back({unit.ready_s, scatter});
        micro_comm += scatter;
      }
      ASSIGN_OR_RETURN(double root_gather, cost(Collective::kAllGather, root_params * element));
      const double micro_exposed = ExposedGathers(gather_f, compute_f, layout.fsdp_prefetch()) +
                                   ExposedGathers(gather_b, compute_b, layout.fsdp_prefetch()) +
                                   ExposedAfterQueue(scatters, t_b);
      dp_comm = root_gather + m * micro_comm;
      dp_exposed = root_gather + m * micro_exposed;
    } else {
      const bool all_reduce = SyncsGradientsByAllReduce(kind);
      const Collective op = all_reduce ? Collective::kAllReduce : Collective::kReduceScatter;
      const int64_t cap = static_cast<int64_t>(layout.bucket_cap_mb() * (1 << 20));
      std::vector<QueuedTransfer> queue;
      double sync_comm = 0;
      for (const Unit& bucket : PackBuckets(units, std::max<int64_t>(1, cap))) {
        ASSIGN_OR_RETURN(double seconds, cost(op, bucket.bytes));
        // Launched after the backward: everything waits for its end.
        queue.push_back(
            {layout.ddp_launch_after_backward() && all_reduce ? t_b : bucket.ready_s, seconds});
        sync_comm += seconds;
      }
      dp_comm = syncs * sync_comm;
      dp_exposed = syncs * ExposedAfterQueue(queue, t_b);
      if (!all_reduce) {
        optimizer_params = std::ceil(optimizer_params / dp);
        // The updated parameters gathered bucket by bucket after the step.
        for (const Unit& bucket : PackBuckets(units, std::max<int64_t>(1, cap))) {
          ASSIGN_OR_RETURN(double gather, cost(Collective::kAllGather, bucket.bytes));
          dp_comm += gather;
          dp_exposed += gather;
        }
      }
    }
  }
  step.set_dp_comm_s(dp_comm);
  step.set_dp_exposed_s(dp_exposed);
  step.set_optimizer_s(kOptimizerBytesPerParameter * optimizer_params /
                       (cluster.memory_bandwidth_gbps().value() * 1e9) * optimizer_slowdown);
  step.set_exposed_comm_s(step.tp_comm_s() + step.pp_comm_s() + dp_exposed);
  step.set_step_s(step.forward_s() + step.backward_s() + step.bubble_s() + step.optimizer_s() +
                  step.exposed_comm_s());

  Prediction prediction;
  *prediction.mutable_layout() = layout;
  prediction.set_world_size(world);
  prediction.set_global_batch(static_cast<int64_t>(dp) * b * m);
  *prediction.mutable_step() = step;
  const double tokens = static_cast<double>(prediction.global_batch()) * t;
  prediction.set_tokens_per_second(tokens / step.step_s());
  prediction.set_model_flops_per_device(model.flops_per_token() * prediction.tokens_per_second() /
                                        world);
  prediction.set_mfu(prediction.model_flops_per_device() / peak);
  *prediction.mutable_memory() =
      PredictMemory(model, layout, static_cast<int64_t>(cluster.device_memory_bytes().value()));

  // The bottleneck: the largest term of the step.
  const double total = step.step_s();
  std::vector<std::pair<double, std::string>> terms = {
      {step.forward_s() + step.backward_s(), "compute (forward + backward)"},
      {step.bubble_s(), "pipeline bubble"},
      {step.tp_comm_s(), "tensor-parallel activation collectives"},
      {step.pp_comm_s(), "pipeline point-to-point transfers"},
      {dp_exposed, absl::StrCat("data-parallel ",
                                GathersParametersPerUnit(kind)    ? "gathers and reduce-scatters"
                                : SyncsGradientsByAllReduce(kind) ? "all-reduce"
                                                                  : "reduce-scatter and gather",
                                " not hidden")},
      {step.optimizer_s(), "optimizer step (memory bandwidth)"},
  };
  std::sort(terms.begin(), terms.end(),
            [](const auto& x, const auto& y) { return x.first > y.first; });
  std::string bottleneck =
      absl::StrCat(terms[0].second, ": ", Percent(terms[0].first, total), " of the step");
  if (!prediction.memory().fits()) {
    bottleneck = absl::StrCat("does not fit: ", bottleneck);
  }
  prediction.set_bottleneck(bottleneck);
  prediction.set_trainer_command(TrainerCommand(model, layout));
  return prediction;
}

std::string TrainerCommand(const ModelSpec& model, const Layout& layout) {
  if (layout.tp() != 1 || layout.pp() != 1) return "";
  std::vector<std::string> args = {
      "bazel run //trainer --",
      absl::StrCat("--nproc=", layout.dp()),
      absl::StrCat("--strategy=", layout.strategy()),
      absl::StrCat("--vocab_size=", model.vocab_size()),
      absl::StrCat("--d_model=", model.d_model()),
      absl::StrCat("--n_layers=", model.n_layers()),
      absl::StrCat("--n_heads=", model.n_heads()),
      absl::StrCat("--seq_len=", model.seq_len()),
      absl::StrCat("--batch_size=", layout.micro_batch()),
      absl::StrCat("--grad_accum=", layout.micro_batches()),
      absl::StrCat("--precision=", layout.precision()),
  };
  if (layout.activation_checkpointing()) {
    args.push_back("--activation_checkpointing");
  }
  if (GathersParametersPerUnit(layout.strategy())) {
    if (layout.fsdp_prefetch()) args.push_back("--fsdp_prefetch");
    if (!layout.fsdp_reshard_after_forward()) {
      args.push_back("--reshard_after_forward=false");
    }
  }
  if (layout.ddp_launch_after_backward()) args.push_back("--ddp_overlap=false");
  return absl::StrJoin(args, " ");
}

}  // namespace mtb::planner
