// strategy_matrix: every strategy (ddp, zero1, zero2, fsdp, fsdp without
// reshard, and each of the four under --tp=2 on the world sizes 2 divides:
// tp 2 x dp 1 at 2 ranks, tp 2 x dp 2 at 4) x GEMM backend (onednn, blas) x
// world sizes x the benchmark models, with PyTorch 1.13's DDP and
// ZeroRedundancyOptimizer as peers (its FSDP cannot be imported under
// Debian's Python 3.11). For each (model, precision, world size) every
// strategy and peer runs once per round, in alternation, --rounds times; then
// the medians. Correctness first: every run of ours must exit 0, send the
// bytes its closed forms say (over the dp group and, under tp, the tp
// group), and end at the same loss as ddp (1e-5 relative: the strategies
// and tp differ only in summation order), or the matrix stops, exit 1. Writes JSON (--out), Markdown and one SVG per (model,
// precision) of peak memory per rank against the world size.
//
//   bazel run --config=bench //trainer/bench:strategy_matrix -- --rounds=3
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/flags.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/libtorch/torch_info.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "common/results/run_context.h"
#include "trainer/bench/strategy_matrix.h"

ABSL_FLAG(std::string, cells, "tiny:fp32,small:fp32,small:bf16",
          "model:precision pairs (models: tiny, small)");
ABSL_FLAG(std::string, worlds, "1,2,4", "world sizes");
ABSL_FLAG(std::string, strategies,
          "ddp,zero1,zero2,fsdp,fsdp_no_reshard,tp2_ddp,tp2_zero1,tp2_zero2,"
          "tp2_fsdp",
          "ours to run (tp2_<strategy>: --tp=2 on the world sizes 2 divides, "
          "compared with the strategy alone on the same ranks when it runs "
          "too; also: fsdp_prefetch; tp2_sp_ddp, tp2_sp_zero1, tp2_sp_zero2, "
          "tp2_sp_fsdp: --tp=2 --sequence_parallel; ddp_exact, zero1_exact, "
          "zero2_exact, fsdp_exact: --reduction=exact, compared with the same "
          "strategy in float mode when it runs too)");
ABSL_FLAG(std::string, gemms, "onednn,blas",
          "GEMM backends of ours (--gemm, docs/gemm.md): a row per backend");
ABSL_FLAG(bool, peers, true,
          "also run PyTorch's DDP and ZeroRedundancyOptimizer (ddp_peer.py)");
ABSL_FLAG(int32_t, rounds, 3, "alternating rounds per cell (>= 1)");
ABSL_FLAG(std::string, out, "",
          "result JSON (default results/strategy_matrix_<UTC>.json); the .md "
          "and _<model>_<precision>_memory.svg go beside it");

namespace mtb {
namespace {

constexpr char kProgram[] = "strategy_matrix";
constexpr double kLossRtol = 1e-5;

// Runs `command` (output to `log`); the exit code, -1 on a signal.
int Run(const std::string& command, const std::string& log) {
  const int status =
      std::system(absl::StrCat(command, " > ", log, " 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Tail(const std::string& path) {
  const std::string text = ReadFileToString(path).value_or("");
  return text.size() > 3000 ? text.substr(text.size() - 3000) : text;
}

absl::StatusOr<TrainResult> RunOurs(const StrategyMatrixModel& model,
                                    const std::string& precision, int world,
                                    const std::string& strategy,
                                    const std::string& gemm,
                                    const std::string& dir) {
  const std::string out =
      absl::StrCat(dir, "/", model.name, "_", precision, "_", world, "_",
                   strategy, "_", gemm, ".json");
  std::vector<std::string> flags =
      MatrixTrainerFlags(model, precision, world, strategy, gemm);
  flags.push_back("--out=" + out);
  const std::string log = out + ".log";
  const int code = Run("trainer/trainer " + absl::StrJoin(flags, " "), log);
  if (code != 0) {
    return absl::InternalError(absl::StrCat(strategy, " (gemm ", gemm,
                                            ") at ", world, " ranks exited ",
                                            code, ":\n", Tail(log)));
  }
  TrainResult result;
  RETURN_IF_ERROR(ReadJsonFile(out, &result));
  return result;
}

absl::StatusOr<PeerRun> RunPeer(const StrategyMatrixModel& model,
                                const std::string& precision, int world,
                                const std::string& peer,
                                const std::string& dir) {
  const std::string out =
      absl::StrCat(dir, "/", model.name, "_", precision, "_", world, "_", peer);
  const std::string command = absl::StrCat(
      "OMP_NUM_THREADS=1 /usr/bin/python3 trainer/bench/ddp_peer.py ",
      absl::StrJoin(MatrixPeerArgs(model, precision, world, peer), " "), " 2> ",
      out, ".err");
  const int code = Run(command, out + ".json");
  if (code != 0) {
    return absl::InternalError(absl::StrCat(peer, " at ", world,
                                            " ranks exited ", code, ":\n",
                                            Tail(out + ".err")));
  }
  const std::string text = ReadFileToString(out + ".json").value_or("");
  const std::vector<std::string> lines =
      absl::StrSplit(text, '\n', absl::SkipEmpty());
  PeerRun run;
  if (lines.empty()) return absl::DataLossError(peer + " printed nothing");
  RETURN_IF_ERROR(FromJsonIgnoringUnknownFields(lines.back(), &run));
  return run;
}

// Correctness before any number is believed.
absl::Status Check(const std::map<std::string, TrainResult>& results,
                   const std::string& cell) {
  const double reference =
      results.begin()->second.runs(0).final_loss();  // any: all must agree
  for (const auto& [strategy, result] : results) {
    const double loss = result.runs(0).final_loss();
    if (!(std::abs(loss - reference) <= kLossRtol * std::abs(reference))) {
      return absl::InternalError(absl::StrCat(
          cell, ": ", strategy, " ends at loss ", loss, ", ",
          results.begin()->first, " at ", reference,
          " (the strategies must agree to ", kLossRtol, " relative)"));
    }
    for (const StepRecord& step : result.runs(0).steps()) {
      // ddp's closed form floors the whole gradient once, the layer each
      // bucket: less than one byte per bucket apart.
      const double slack = result.strategy().buckets_size();
      if (std::abs(static_cast<double>(step.grad_bytes_sent() -
                                       step.expected_grad_bytes())) > slack ||
          step.param_gather_bytes_sent() !=
              step.expected_param_gather_bytes() ||
          step.tp_bytes_sent() != step.expected_tp_bytes()) {
        return absl::InternalError(absl::StrCat(
            cell, ": ", strategy, " step ", step.step(), " sent ",
            step.grad_bytes_sent(), " + ", step.param_gather_bytes_sent(),
            " + ", step.tp_bytes_sent(), " (tp) bytes, the closed forms say ",
            step.expected_grad_bytes(), " + ",
            step.expected_param_gather_bytes(), " + ",
            step.expected_tp_bytes()));
      }
    }
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  const int rounds = absl::GetFlag(FLAGS_rounds);
  if (rounds < 1) {
    std::cerr << kProgram << ": --rounds=" << rounds << " must be >= 1\n";
    return kExitUsage;
  }
  std::vector<std::pair<StrategyMatrixModel, std::string>> cells;
  for (absl::string_view cell :
       absl::StrSplit(absl::GetFlag(FLAGS_cells), ',')) {
    const std::vector<std::string> parts = absl::StrSplit(cell, ':');
    const StrategyMatrixModel* found = nullptr;
    for (const StrategyMatrixModel& model : StrategyMatrixModels()) {
      if (parts.size() == 2 && model.name == parts[0]) found = &model;
    }
    if (found == nullptr || (parts[1] != "fp32" && parts[1] != "bf16")) {
      std::cerr << kProgram << ": --cells: '" << cell
                << "' is not model:precision (tiny|small : fp32|bf16)\n";
      return kExitUsage;
    }
    cells.push_back({*found, parts[1]});
  }
  std::vector<int> worlds;
  for (absl::string_view w : absl::StrSplit(absl::GetFlag(FLAGS_worlds), ',')) {
    int world = 0;
    if (!absl::SimpleAtoi(w, &world) || world < 1) {
      std::cerr << kProgram << ": --worlds: '" << w
                << "' is not a world size\n";
      return kExitUsage;
    }
    worlds.push_back(world);
  }
  const std::vector<std::string> strategies =
      absl::StrSplit(absl::GetFlag(FLAGS_strategies), ',');
  for (const std::string& s : strategies) {
    if (FindMatrixVariant(s) == nullptr) {
      std::cerr << kProgram << ": --strategies: '" << s << "' is not one of "
                << absl::StrJoin(MatrixStrategies(), ", ") << "\n";
      return kExitUsage;
    }
  }
  const absl::StatusOr<std::vector<std::string>> gemms =
      ParseMatrixGemms(absl::GetFlag(FLAGS_gemms));
  if (!gemms.ok()) {
    std::cerr << kProgram << ": " << gemms.status().message() << "\n";
    return kExitUsage;
  }
  std::vector<std::string> peers;
  if (absl::GetFlag(FLAGS_peers)) peers = {"pytorch_ddp", "pytorch_zero1"};
  const std::string out = absl::GetFlag(FLAGS_out).empty()
                              ? DefaultResultPath(kProgram, "json")
                              : ResolveUserPath(absl::GetFlag(FLAGS_out));
  if (absl::Status writable = CheckOutputWritable("out", out); !writable.ok()) {
    return ReportAndExitCode(kProgram, writable);
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp",
                                       "/strategy_matrix_", ::getpid());
  if (absl::Status made = CreateDirectories(dir); !made.ok()) {
    return ReportAndExitCode(kProgram, made);
  }

  StrategyMatrixResult result;
  result.set_schema_version(1);
  *result.mutable_run_context() = NewRunContext(kProgram, argc, argv);
  FillTorchInfo(result.mutable_run_context());
  // The largest world the matrix ran (each row names its own).
  result.mutable_run_context()->set_world_size(
      *std::max_element(worlds.begin(), worlds.end()));
  result.mutable_run_context()->set_backend("gloo");
  int total = 0;
  for (int world : worlds) {
    total += static_cast<int>(cells.size()) * rounds *
             static_cast<int>(MatrixStrategiesAt(strategies, world).size() *
                                  gemms->size() +
                              peers.size());
  }
  int done = 0;
  const absl::Time start = absl::Now();
  for (const auto& [model, precision] : cells) {
    for (int world : worlds) {
      const std::string cell =
          absl::StrCat(model.name, " ", precision, " ", world, " rank(s)");
      // The tp variants run where their tp divides the world.
      const std::vector<std::string> strategies_here =
          MatrixStrategiesAt(strategies, world);
      MatrixCellRuns runs;
      for (int round = 0; round < rounds; ++round) {
        for (const std::string& gemm : *gemms) {
          // The strategies agree within a backend; the backends sum in
          // different orders.
          std::map<std::string, TrainResult> results;
          for (const std::string& strategy : strategies_here) {
            absl::StatusOr<TrainResult> run =
                RunOurs(model, precision, world, strategy, gemm, dir);
            if (!run.ok()) return ReportAndExitCode(kProgram, run.status());
            runs.ours[{strategy, gemm}].push_back(MatrixRunFromResult(*run));
            results[strategy] = *std::move(run);
            ++done;
          }
          if (absl::Status ok =
                  Check(results, absl::StrCat(cell, ", gemm ", gemm));
              !ok.ok()) {
            return ReportAndExitCode(kProgram, ok);
          }
        }
        for (const std::string& peer : peers) {
          absl::StatusOr<PeerRun> run =
              RunPeer(model, precision, world, peer, dir);
          if (!run.ok()) return ReportAndExitCode(kProgram, run.status());
          runs.peers[peer].push_back(MatrixRunFromPeer(*run));
          ++done;
        }
        const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
        std::cout << absl::StrFormat(
                         "%s, round %d/%d: %s | %d/%d runs, %.0f s, ETA %.0f s",
                         cell, round + 1, rounds,
                         absl::StrJoin(
                             runs.ours, " ",
                             [&](std::string* o, const auto& entry) {
                               absl::StrAppend(
                                   o, entry.first.first, "/",
                                   entry.first.second, " ",
                                   static_cast<int>(
                                       entry.second.back().tokens_per_second));
                             }),
                         done, total, elapsed, elapsed / done * (total - done))
                  << std::endl;
      }
      for (StrategyMatrixRow& row :
           MatrixCellRows(model.name, precision, world, strategies_here,
                          *gemms, peers, runs)) {
        *result.add_rows() = std::move(row);
      }
    }
  }
  result.set_notes(absl::StrCat(
      rounds,
      " alternating rounds per cell (every strategy and peer once per "
      "round); medians, tokens/s range over rounds; batch ",
      kStrategyMatrixBatch,
      " per rank, synthetic data, one intra-op thread per "
      "rank, dropout 0; ours once per GEMM backend (",
      absl::StrJoin(*gemms, ", "),
      "; docs/gemm.md) in each round; CPU ms/step: rank 0's process CPU "
      "time per step, all threads, on both sides; AdamW with clipping at 1.0; build ",
      result.run_context().build_mode(), ", LibTorch ",
      result.run_context().libtorch_version(), ", BLAS ",
      result.run_context().blas_library(),
      ". Peak memory: the largest rank's counted CPU tensor bytes (counting "
      "allocator) next to trainer/memory/memory_estimate.h; bytes: rank 0's "
      "gradient and parameter-gather bytes per step, counted, next to the "
      "closed forms. Peers: PyTorch 1.13's DistributedDataParallel "
      "(pytorch_ddp) and DDP + ZeroRedundancyOptimizer (pytorch_zero1); "
      "<strategy>_exact rows: --reduction=exact --exact_chunk=",
      kMatrixExactChunk,
      ", against the same strategy in float mode of the same rounds; "
      "tp2_<strategy> rows: --tp=2 (tp2_sp_: with --sequence_parallel; "
      "docs/tp.md) over world / 2 data-parallel replicas of batch ",
      kStrategyMatrixBatch * kMatrixTp,
      " (the same global batch as the other rows), against the same "
      "strategy without tp on the same ranks of the same rounds; tp bytes: "
      "rank 0's on its tp group per step, counted, next to "
      "trainer/tp/bytes.h. PyTorch's FSDP cannot be a peer (`import torch.distributed.fsdp` fails under "
      "Debian's Python 3.11). This machine is shared and noisy: read the "
      "ranges."));
  FinishRunContext(result.mutable_run_context());
  if (absl::Status written = WriteJsonFile(result, out); !written.ok()) {
    return ReportAndExitCode(kProgram, written);
  }
  const std::string markdown = RenderStrategyMatrixMarkdown(result);
  std::cout << markdown;
  std::vector<std::pair<std::string, std::string>> companions = {
      {ReplaceExtension(out, "md"), markdown}};
  // r.json -> r_<model>_<precision>_memory.svg
  const std::string stem = ReplaceExtension(out, "md").substr(
      0, ReplaceExtension(out, "md").size() - 3);
  for (const auto& [model, precision] : cells) {
    companions.push_back(
        {absl::StrCat(stem, "_", model.name, "_", precision, "_memory.svg"),
         RenderPeakMemorySvg(result, model.name, precision)});
  }
  std::cout << "result: " << out << "\n";
  for (const auto& [path, content] : companions) {
    absl::StatusOr<std::string> kept = WriteCompanionFile(path, out, content);
    if (!kept.ok()) return ReportAndExitCode(kProgram, kept.status());
    std::cout << (kept->empty() ? "wrote " + path : *kept) << "\n";
  }
  return kExitOk;
}

}  // namespace
}  // namespace mtb

int main(int argc, char** argv) {
  mtb::InitLogging(argv[0]);
  mtb::ParseCommandLineOrExit(
      argc, argv,
      "every strategy x world size x model, against PyTorch's DDP and "
      "ZeroRedundancyOptimizer");
  return mtb::Main(argc, argv);
}
