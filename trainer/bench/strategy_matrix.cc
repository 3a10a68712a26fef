#include "trainer/bench/strategy_matrix.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/stats.h"
#include "common/report/report.h"
#include "glog/logging.h"
#include "trainer/strategy/registry.h"

namespace mtb {
namespace {

double MedianOf(std::vector<double> values) {
  CHECK(!values.empty());
  return Median(values);
}

bool IsPeer(const std::string& strategy) {
  return strategy.rfind("pytorch_", 0) == 0;
}

}  // namespace

const std::vector<StrategyMatrixModel>& StrategyMatrixModels() {
  static const std::vector<StrategyMatrixModel> kModels = {
      {"tiny", 512, 128, 2, 4, 64, 30, 6},
      {"small", 4096, 256, 4, 4, 128, 12, 4},
  };
  return kModels;
}

const std::vector<MatrixVariant>& MatrixVariants() {
  static const std::vector<MatrixVariant>* const kVariants = [] {
    // PyTorch's counterpart of a strategy, where the peers have one.
    const std::map<StrategyKind, std::string> kPeers = {
        {StrategyKind::kDdp, "pytorch_ddp"},
        {StrategyKind::kZero1, "pytorch_zero1"}};
    auto* variants = new std::vector<MatrixVariant>;
    std::vector<MatrixVariant> exact, tp, tp_sp;
    for (const StrategyEntry& entry : AllStrategyEntries()) {
      if (entry.max_world_size == 1) continue;  // the one-rank reference
      const std::string strategy = absl::StrCat("--strategy=", entry.name);
      const auto peer = kPeers.find(entry.kind);
      variants->push_back({entry.name,
                           {strategy},
                           peer == kPeers.end() ? "" : peer->second,
                           false});
      // --reduction=exact (trainer/exact/exact.h), chunks of kMatrixExactChunk,
      // against the same strategy in float mode of the same rounds.
      exact.push_back({absl::StrCat(entry.name, kExactSuffix),
                       {strategy, "--reduction=exact",
                        absl::StrCat("--exact_chunk=", kMatrixExactChunk)},
                       entry.name,
                       true});
      // Tensor parallelism over kMatrixTp ranks (docs/tp.md), the strategy
      // over the dp group, against the strategy alone on the same ranks.
      const std::string tp_flag = absl::StrCat("--tp=", kMatrixTp);
      tp.push_back({absl::StrCat(kTpPrefix, entry.name),
                    {strategy, tp_flag},
                    entry.name,
                    true,
                    kMatrixTp});
      tp_sp.push_back({absl::StrCat(kTpSpPrefix, entry.name),
                       {strategy, tp_flag, "--sequence_parallel"},
                       entry.name,
                       true,
                       kMatrixTp});
    }
    // fsdp's switches.
    const std::string fsdp =
        absl::StrCat("--strategy=", StrategyName(StrategyKind::kFsdp));
    variants->push_back(
        {"fsdp_no_reshard", {fsdp, "--reshard_after_forward=false"}, "", false});
    variants->push_back({"fsdp_prefetch", {fsdp, "--fsdp_prefetch"}, "", false});
    for (const std::vector<MatrixVariant>* more : {&tp, &tp_sp, &exact}) {
      variants->insert(variants->end(), more->begin(), more->end());
    }
    return variants;
  }();
  return *kVariants;
}

const MatrixVariant* FindMatrixVariant(const std::string& name) {
  for (const MatrixVariant& variant : MatrixVariants()) {
    if (variant.name == name) return &variant;
  }
  return nullptr;
}

bool MatrixVariantRunsAt(const MatrixVariant& variant, int world_size) {
  return world_size % variant.tp == 0;
}

std::vector<std::string> MatrixStrategiesAt(
    const std::vector<std::string>& strategies, int world_size) {
  std::vector<std::string> at;
  for (const std::string& name : strategies) {
    const MatrixVariant* variant = FindMatrixVariant(name);
    CHECK(variant != nullptr) << name;
    if (MatrixVariantRunsAt(*variant, world_size)) at.push_back(name);
  }
  return at;
}

std::vector<std::string> MatrixStrategies() {
  std::vector<std::string> names;
  for (const MatrixVariant& variant : MatrixVariants()) {
    names.push_back(variant.name);
  }
  return names;
}

namespace {

// What both sides take with the same names: the model, the schedule's length
// and the batch per data-parallel replica.
std::vector<std::string> ModelFlags(const StrategyMatrixModel& model,
                                    const std::string& precision,
                                    int batch_size) {
  return {absl::StrCat("--vocab_size=", model.vocab_size),
          absl::StrCat("--d_model=", model.d_model),
          absl::StrCat("--n_layers=", model.n_layers),
          absl::StrCat("--n_heads=", model.n_heads),
          absl::StrCat("--seq_len=", model.seq_len),
          absl::StrCat("--steps=", model.steps),
          absl::StrCat("--timing_warmup_steps=", model.timing_warmup_steps),
          absl::StrCat("--batch_size=", batch_size),
          absl::StrCat("--precision=", precision)};
}

}  // namespace

const std::vector<std::string>& MatrixGemms() {
  static const std::vector<std::string> kGemms = {"onednn", "blas"};
  return kGemms;
}

absl::StatusOr<std::vector<std::string>> ParseMatrixGemms(
    const std::string& text) {
  std::vector<std::string> gemms;
  for (absl::string_view gemm : absl::StrSplit(text, ',')) {
    const std::vector<std::string>& known = MatrixGemms();
    if (std::find(known.begin(), known.end(), gemm) == known.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gemms: '", gemm, "' is not one of ",
                       absl::StrJoin(known, ", ")));
    }
    if (std::find(gemms.begin(), gemms.end(), gemm) != gemms.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gemms: '", gemm, "' is listed twice"));
    }
    gemms.emplace_back(gemm);
  }
  return gemms;
}

std::vector<std::string> MatrixTrainerFlags(const StrategyMatrixModel& model,
                                            const std::string& precision,
                                            int world_size,
                                            const std::string& strategy,
                                            const std::string& gemm) {
  const MatrixVariant* variant = FindMatrixVariant(strategy);
  CHECK(variant != nullptr) << strategy;
  // A tp group is one data-parallel replica: kStrategyMatrixBatch per rank
  // of it keeps the global batch of the other rows on the same ranks.
  std::vector<std::string> flags =
      ModelFlags(model, precision, kStrategyMatrixBatch * variant->tp);
  flags.push_back(absl::StrCat("--gemm=", gemm));
  for (std::string flag :
       {absl::StrCat("--nproc=", world_size), std::string("--data=synthetic"),
        std::string("--intra_op_threads=1"), std::string("--peak_flops=1e11"),
        std::string("--log_every=100000"), std::string("--nomarkdown")}) {
    flags.push_back(std::move(flag));
  }
  flags.insert(flags.end(), variant->flags.begin(), variant->flags.end());
  return flags;
}

std::vector<std::string> MatrixPeerArgs(const StrategyMatrixModel& model,
                                        const std::string& precision,
                                        int world_size,
                                        const std::string& peer) {
  std::vector<std::string> args =
      ModelFlags(model, precision, kStrategyMatrixBatch);
  args.push_back(absl::StrCat("--world_size=", world_size));
  args.push_back(peer == "pytorch_zero1" ? "--strategy=zero1"
                                         : "--strategy=ddp");
  return args;
}

MatrixRun MatrixRunFromResult(const TrainResult& result) {
  MatrixRun run;
  run.tokens_per_second = result.summary().tokens_per_second().mean();
  run.step_ms = result.summary().step_ms().mean();
  run.comm_wait_ms = result.summary().comm_wait_ms();
  for (const RankMemory& memory : result.memory()) {
    run.peak_memory_bytes =
        std::max(run.peak_memory_bytes, memory.peak_bytes());
  }
  run.memory_estimate_bytes = result.memory_estimate().total();
  run.parameters = result.model().parameter_count();
  run.gather_in_flight_ms = result.summary().param_gather_in_flight_ms();
  run.gather_hidden_ms = result.summary().param_gather_hidden_ms();
  int steps = 0;
  for (const StepRecord& step : result.runs(0).steps()) {
    if (!step.timed()) continue;
    run.bytes_per_step += static_cast<double>(step.grad_bytes_sent() +
                                              step.param_gather_bytes_sent());
    run.expected_bytes_per_step += static_cast<double>(
        step.expected_grad_bytes() + step.expected_param_gather_bytes());
    run.tp_bytes_per_step += static_cast<double>(step.tp_bytes_sent());
    run.expected_tp_bytes_per_step +=
        static_cast<double>(step.expected_tp_bytes());
    run.cpu_ms += step.cpu_ms();
    ++steps;
  }
  if (steps > 0) {
    run.bytes_per_step /= steps;
    run.expected_bytes_per_step /= steps;
    run.tp_bytes_per_step /= steps;
    run.expected_tp_bytes_per_step /= steps;
    run.cpu_ms /= steps;
  }
  return run;
}

MatrixRun MatrixRunFromPeer(const PeerRun& peer) {
  MatrixRun run;
  run.tokens_per_second = peer.tokens_per_second();
  run.step_ms = peer.mean_step_ms();
  run.cpu_ms = peer.cpu_ms_per_step();
  run.parameters = peer.parameters();
  return run;
}

StrategyMatrixRow MatrixRow(const std::string& model,
                            const std::string& precision, int world_size,
                            const std::string& strategy,
                            const std::vector<MatrixRun>& runs,
                            const std::string& peer,
                            const std::vector<double>& peer_tokens_per_second) {
  CHECK(!runs.empty());
  StrategyMatrixRow row;
  row.set_model(model);
  row.set_precision(precision);
  row.set_world_size(world_size);
  row.set_strategy(strategy);
  row.set_rounds(static_cast<int32_t>(runs.size()));
  row.set_parameters(runs[0].parameters);
  std::vector<double> tokens, step_ms, wait, peak, in_flight, hidden, cpu_ms;
  for (const MatrixRun& run : runs) {
    cpu_ms.push_back(run.cpu_ms);
    tokens.push_back(run.tokens_per_second);
    step_ms.push_back(run.step_ms);
    wait.push_back(run.comm_wait_ms);
    peak.push_back(static_cast<double>(run.peak_memory_bytes));
    in_flight.push_back(run.gather_in_flight_ms);
    hidden.push_back(run.gather_hidden_ms);
  }
  row.set_param_gather_in_flight_ms(MedianOf(in_flight));
  row.set_param_gather_hidden_ms(MedianOf(hidden));
  row.set_tokens_per_second(MedianOf(tokens));
  row.set_tokens_per_second_min(
      *std::min_element(tokens.begin(), tokens.end()));
  row.set_tokens_per_second_max(
      *std::max_element(tokens.begin(), tokens.end()));
  row.set_step_ms(MedianOf(step_ms));
  row.set_cpu_ms_per_step(MedianOf(cpu_ms));
  row.set_comm_wait_ms(MedianOf(wait));
  row.set_peak_memory_bytes(static_cast<int64_t>(MedianOf(peak)));
  row.set_memory_estimate_bytes(runs[0].memory_estimate_bytes);
  row.set_bytes_per_step(runs[0].bytes_per_step);
  row.set_expected_bytes_per_step(runs[0].expected_bytes_per_step);
  row.set_tp_bytes_per_step(runs[0].tp_bytes_per_step);
  row.set_expected_tp_bytes_per_step(runs[0].expected_tp_bytes_per_step);
  if (!peer.empty() && peer_tokens_per_second.size() == runs.size()) {
    std::vector<double> ratios;
    for (size_t i = 0; i < runs.size(); ++i) {
      ratios.push_back(runs[i].tokens_per_second / peer_tokens_per_second[i]);
    }
    row.set_peer(peer);
    row.set_peer_ratio(MedianOf(ratios));
    row.set_peer_ratio_min(*std::min_element(ratios.begin(), ratios.end()));
    row.set_peer_ratio_max(*std::max_element(ratios.begin(), ratios.end()));
  }
  return row;
}

std::vector<StrategyMatrixRow> MatrixCellRows(
    const std::string& model, const std::string& precision, int world_size,
    const std::vector<std::string>& strategies,
    const std::vector<std::string>& gemms,
    const std::vector<std::string>& peers, const MatrixCellRuns& runs) {
  std::vector<StrategyMatrixRow> rows;
  for (const std::string& strategy : strategies) {
    const MatrixVariant* variant = FindMatrixVariant(strategy);
    CHECK(variant != nullptr) << strategy;
    for (const std::string& gemm : gemms) {
      const auto ours = runs.ours.find({strategy, gemm});
      CHECK(ours != runs.ours.end()) << strategy << " " << gemm;
      std::vector<double> peer_tokens;
      if (variant->peer_is_ours) {
        const auto peer = runs.ours.find({variant->peer, gemm});
        if (peer != runs.ours.end()) {
          for (const MatrixRun& run : peer->second) {
            peer_tokens.push_back(run.tokens_per_second);
          }
        }
      } else if (!variant->peer.empty()) {
        const auto peer = runs.peers.find(variant->peer);
        if (peer != runs.peers.end()) {
          for (const MatrixRun& run : peer->second) {
            peer_tokens.push_back(run.tokens_per_second);
          }
        }
      }
      StrategyMatrixRow row =
          MatrixRow(model, precision, world_size, strategy, ours->second,
                    peer_tokens.empty() ? "" : variant->peer, peer_tokens);
      row.set_gemm(gemm);
      row.set_tp(variant->tp);
      rows.push_back(std::move(row));
    }
  }
  for (const std::string& peer : peers) {
    const auto theirs = runs.peers.find(peer);
    CHECK(theirs != runs.peers.end()) << peer;
    rows.push_back(
        MatrixRow(model, precision, world_size, peer, theirs->second, "", {}));
  }
  return rows;
}

std::string RenderStrategyMatrixMarkdown(const StrategyMatrixResult& result) {
  std::string out = "# Strategy matrix\n\n";
  std::vector<std::pair<std::string, std::string>> cells;
  for (const StrategyMatrixRow& row : result.rows()) {
    const std::pair<std::string, std::string> cell{row.model(),
                                                   row.precision()};
    if (std::find(cells.begin(), cells.end(), cell) == cells.end()) {
      cells.push_back(cell);
    }
  }
  auto mib = [](double bytes) {
    return FormatSignificant(bytes / (1 << 20), 3);
  };
  for (const auto& [model, precision] : cells) {
    MarkdownTable table;
    table.headers = {"strategy",
                     "gemm",
                     "ranks",
                     "tokens/s (range)",
                     "CPU ms/step",
                     "ms/step",
                     "comm wait ms",
                     "gather ms hidden / in flight",
                     "peak MiB/rank (formula)",
                     "MiB sent/step (closed form)",
                     "tp MiB sent/step (closed form)",
                     "vs PyTorch peer"};
    table.align = {Align::kLeft};
    table.align.push_back(Align::kLeft);
    for (int i = 2; i < 12; ++i) table.align.push_back(Align::kRight);
    int64_t parameters = 0;
    for (const StrategyMatrixRow& row : result.rows()) {
      if (row.model() != model || row.precision() != precision) continue;
      parameters = row.parameters();
      const bool peer = IsPeer(row.strategy());
      table.rows.push_back(
          {row.strategy(), row.gemm().empty() ? "-" : row.gemm(),
           absl::StrCat(row.world_size()),
           absl::StrCat(FormatSignificant(row.tokens_per_second(), 4), " (",
                        FormatSignificant(row.tokens_per_second_min(), 3), "–",
                        FormatSignificant(row.tokens_per_second_max(), 3), ")"),
           row.cpu_ms_per_step() > 0
               ? FormatSignificant(row.cpu_ms_per_step(), 3)
               : std::string("-"),
           FormatSignificant(row.step_ms(), 3),
           peer ? "-" : FormatSignificant(row.comm_wait_ms(), 3),
           row.param_gather_in_flight_ms() > 0
               ? absl::StrCat(
                     FormatSignificant(row.param_gather_hidden_ms(), 3), " / ",
                     FormatSignificant(row.param_gather_in_flight_ms(), 3))
               : std::string("-"),
           peer ? "-"
                : absl::StrCat(
                      mib(static_cast<double>(row.peak_memory_bytes())), " (",
                      mib(static_cast<double>(row.memory_estimate_bytes())),
                      ")"),
           peer ? "-"
                : absl::StrCat(mib(row.bytes_per_step()), " (",
                               mib(row.expected_bytes_per_step()), ")"),
           row.tp() > 1
               ? absl::StrCat(mib(row.tp_bytes_per_step()), " (",
                              mib(row.expected_tp_bytes_per_step()), ")")
               : std::string("-"),
           row.peer().empty()
               ? "-"
               : absl::StrFormat("%.2fx %s (%.2f–%.2f)", row.peer_ratio(),
                                 row.peer(), row.peer_ratio_min(),
                                 row.peer_ratio_max())});
    }
    absl::StrAppend(&out, "## ", model, " (", parameters, " parameters), ",
                    precision, "\n\n", table.Render(), "\n");
  }
  absl::StrAppend(&out, result.notes(), "\n");
  return out;
}

std::string RenderPeakMemorySvg(const StrategyMatrixResult& result,
                                const std::string& model,
                                const std::string& precision) {
  // One series per strategy: the rows of the first GEMM backend (the table
  // has every backend's peak).
  std::string gemm;
  for (const StrategyMatrixRow& row : result.rows()) {
    if (row.model() == model && row.precision() == precision &&
        !IsPeer(row.strategy())) {
      gemm = row.gemm();
      break;
    }
  }
  LinePlot plot;
  plot.title = absl::StrCat("Peak memory per rank, ", model, " ", precision,
                            gemm.empty() ? "" : absl::StrCat(", gemm ", gemm));
  plot.x_label = "ranks";
  plot.y_label = "peak MiB per rank (counted)";
  plot.integer_x = true;
  std::map<std::string, PlotSeries> series;
  std::vector<std::string> order;
  for (const StrategyMatrixRow& row : result.rows()) {
    if (row.model() != model || row.precision() != precision ||
        IsPeer(row.strategy()) || row.gemm() != gemm) {
      continue;
    }
    if (series.find(row.strategy()) == series.end()) {
      order.push_back(row.strategy());
      series[row.strategy()].name = row.strategy();
    }
    series[row.strategy()].points.push_back(
        {static_cast<double>(row.world_size()),
         static_cast<double>(row.peak_memory_bytes()) / (1 << 20)});
  }
  for (const std::string& name : order) plot.series.push_back(series[name]);
  return RenderSvg(plot);
}

}  // namespace mtb
