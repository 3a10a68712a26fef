// The strategy matrix: what //trainer/bench:strategy_matrix
// runs and how it turns runs into rows, a Markdown table and one SVG per
// (model, precision) of peak memory per rank against the world size.
// strategy_matrix_main.cc launches the trainer and the PyTorch peers; this
// library holds everything that does not need a process.
#ifndef MTB_TRAINER_BENCH_STRATEGY_MATRIX_H_
#define MTB_TRAINER_BENCH_STRATEGY_MATRIX_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/bench/strategy_matrix.pb.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// The benchmark models of trainer/bench/ddp_bench.py (batch 8 per rank).
struct StrategyMatrixModel {
  std::string name;
  int vocab_size = 0;
  int d_model = 0;
  int n_layers = 0;
  int n_heads = 0;
  int seq_len = 0;
  int steps = 0;
  int timing_warmup_steps = 0;
};
// "tiny" (vocab 512, d_model 128, 2 layers, seq 64) and "small" (vocab 4096,
// d_model 256, 4 layers, seq 128).
const std::vector<StrategyMatrixModel>& StrategyMatrixModels();
inline constexpr int kStrategyMatrixBatch = 8;

// Ours: ddp, zero1, zero2, fsdp, fsdp_no_reshard, fsdp_prefetch; each of
// ddp, zero1, zero2, fsdp under tensor parallelism over kMatrixTp ranks
// ("tp2_<strategy>", --tp=2), whose peer is the same strategy without tp on
// the same ranks, and the same with --sequence_parallel
// ("tp2_sp_<strategy>"); each of ddp, zero1, zero2, fsdp with
// --reduction=exact ("<strategy>_exact", chunks of kMatrixExactChunk
// samples), whose peer is the same strategy in float mode.
// One column of the matrix: the trainer under a strategy with the variant's
// flags, compared against `peer`: PyTorch's counterpart, or (peer_is_ours)
// the same strategy without the variant's switch (float mode for an exact
// variant, data parallelism alone over the same ranks for a tp variant) of
// the same rounds. Built from the strategy registry
// (trainer/strategy/registry.h): every strategy, fsdp's switches, every
// strategy under tp (with and without SP) and every strategy in exact mode.
struct MatrixVariant {
  std::string name;
  std::vector<std::string> flags;
  std::string peer;  // "" when there is none
  bool peer_is_ours = false;
  // Ranks per tensor-parallel group (--tp; 1: none). A tp variant runs on
  // the world sizes it divides: tp x dp with dp = world / tp, on the same
  // global batch as the other variants (MatrixTrainerFlags).
  int tp = 1;
};
const std::vector<MatrixVariant>& MatrixVariants();
inline constexpr int kMatrixTp = 2;
inline constexpr char kTpPrefix[] = "tp2_";
inline constexpr char kTpSpPrefix[] = "tp2_sp_";
// Whether `variant` runs on `world_size` ranks (its tp divides it).
bool MatrixVariantRunsAt(const MatrixVariant& variant, int world_size);
// The names of `strategies` (variants) that run on `world_size` ranks, in
// their order.
std::vector<std::string> MatrixStrategiesAt(
    const std::vector<std::string>& strategies, int world_size);
// nullptr when `name` is not a variant.
const MatrixVariant* FindMatrixVariant(const std::string& name);
// The variants' names, in order.
std::vector<std::string> MatrixStrategies();
inline constexpr char kExactSuffix[] = "_exact";
inline constexpr int kMatrixExactChunk = 4;

// The GEMM backends a row can run the model's products on (--gemm,
// docs/gemm.md), in the order --gemms' default runs them.
const std::vector<std::string>& MatrixGemms();
// --gemms: a comma-separated list of MatrixGemms(), each at most once.
absl::StatusOr<std::vector<std::string>> ParseMatrixGemms(
    const std::string& text);

// The trainer's flags for one run (without --out): the model, synthetic
// data, batch 8 per data-parallel replica (a tp variant's tp group is one
// replica: --batch_size=8 x tp, the global batch of the other rows on the
// same ranks), one intra-op thread, dropout 0, the strategy and its
// switches, the GEMM backend.
std::vector<std::string> MatrixTrainerFlags(const StrategyMatrixModel& model,
                                            const std::string& precision,
                                            int world_size,
                                            const std::string& strategy,
                                            const std::string& gemm);

// The PyTorch peer's arguments (trainer/bench/ddp_peer.py --strategy=ddp or
// zero1) for "pytorch_ddp" or "pytorch_zero1".
std::vector<std::string> MatrixPeerArgs(const StrategyMatrixModel& model,
                                        const std::string& precision,
                                        int world_size,
                                        const std::string& peer);

// One round of one of our strategies, from its result.
struct MatrixRun {
  double tokens_per_second = 0;
  double step_ms = 0;
  double comm_wait_ms = 0;
  int64_t peak_memory_bytes = 0;  // the largest rank's
  int64_t memory_estimate_bytes = 0;
  double bytes_per_step = 0;  // gradient + gather, mean over timed steps
  double expected_bytes_per_step = 0;
  double tp_bytes_per_step = 0;  // on the tp group (tp variants), mean
  double expected_tp_bytes_per_step = 0;
  int64_t parameters = 0;
  double gather_in_flight_ms = 0;  // fsdp, summary means
  double gather_hidden_ms = 0;
  double cpu_ms = 0;  // rank 0's process CPU time per step, timed steps' mean
};
MatrixRun MatrixRunFromResult(const TrainResult& result);
// A PyTorch peer's round (no counted memory or bytes).
MatrixRun MatrixRunFromPeer(const PeerRun& peer);

// Medians (and tokens/s range) over rounds; `peer_runs` (the same rounds'
// tokens/s of the PyTorch peer, or empty) gives the ratio.
StrategyMatrixRow MatrixRow(const std::string& model,
                            const std::string& precision, int world_size,
                            const std::string& strategy,
                            const std::vector<MatrixRun>& runs,
                            const std::string& peer,
                            const std::vector<double>& peer_tokens_per_second);

// One (model, precision, world size) cell's rounds: ours by strategy and
// GEMM backend, the peers by name; every vector holds one run per round.
struct MatrixCellRuns {
  std::map<std::pair<std::string, std::string>, std::vector<MatrixRun>> ours;
  std::map<std::string, std::vector<MatrixRun>> peers;
};
// The cell's rows: ours for each strategy and, within it, each backend of
// `gemms` (their order), each against its peer of the same rounds (PyTorch's
// counterpart when it ran; an exact variant: the same strategy in float mode
// on the same backend, when it ran); then one row per peer.
std::vector<StrategyMatrixRow> MatrixCellRows(
    const std::string& model, const std::string& precision, int world_size,
    const std::vector<std::string>& strategies,
    const std::vector<std::string>& gemms,
    const std::vector<std::string>& peers, const MatrixCellRuns& runs);

// The Markdown report: one table per (model, precision), a row per strategy
// and world size, then the notes.
std::string RenderStrategyMatrixMarkdown(const StrategyMatrixResult& result);

// Peak memory per rank (MiB) against the world size, one series per strategy
// of ours, for the rows of (model, precision).
std::string RenderPeakMemorySvg(const StrategyMatrixResult& result,
                                const std::string& model,
                                const std::string& precision);

}  // namespace mtb

#endif  // MTB_TRAINER_BENCH_STRATEGY_MATRIX_H_
