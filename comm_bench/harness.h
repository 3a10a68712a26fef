// The sweep every comm_bench backend shares: for each collective and size,
// warm-up -> a timed back-to-back loop (nccl-tests' time) -> a barrier-
// separated per-iteration loop (p50/p99) -> a check pass on fresh
// deterministic data (#wrong), out of place and then in place where the
// collective allows. Torch-free and CUDA-free: it sees only a Backend.
#ifndef MTB_COMM_BENCH_HARNESS_H_
#define MTB_COMM_BENCH_HARNESS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm_bench/backend.h"
#include "comm_bench/collective.h"
#include "comm_bench/comm_bench.pb.h"
#include "comm_bench/dtype.h"

namespace mtb::comm_bench {

inline constexpr int kSchemaVersion = 1;

struct SweepOptions {
  std::vector<std::string> ops;
  DType dtype = DType::kFloat32;
  RedOp redop = RedOp::kSum;
  int root = 0;
  int64_t min_bytes = 1024;
  int64_t max_bytes = 64 << 20;
  int64_t step_factor = 2;
  int iters = 20;
  int warmup_iters = 5;
  bool check = true;
  // Average-busbw gate in GB/s; <= 0 leaves it unchecked.
  double min_busbw = 0;
  AllToAllvPattern all_to_allv;
  // Remarks on how the flags were read (e.g. which of two settings wins),
  // added to the result's notes and shown before the first row.
  std::vector<std::string> notes;
  // --ceiling's figures: every row gets its matching ceiling and busbw as a
  // fraction of it (SetMatchingCeiling). Ignored when has_ceiling is false.
  CommBenchCeiling ceiling;
  bool has_ceiling = false;
  // What the collectives run on ("shm", "shm+tcp" or "tcp"): picks the
  // ceiling's shape.
  std::string transport = "tcp";
  // With transport "shm" and a backend that can share memory
  // (Backend::AllocateShared): the shared-memory ceiling of each point's op
  // and size (shm_ceiling.h), each measurement over `iters` runs per rank,
  // measured `shm_ceiling_measurements` times alternated with the point's
  // rows (AlternateCeilingAndRows: before, between and after them) and the
  // best of them used; every row is compared with it (and a row beating it
  // by >10% fails the verdict, "ceiling invalid"). It replaces --ceiling's
  // TCP figures, which do not bound shared memory.
  bool shm_ceiling = true;
  int shm_ceiling_measurements = 3;
  // The ceiling's chunk: the transport's slot (shm_slot_bytes).
  int64_t shm_ceiling_chunk_bytes = int64_t{1} << 20;

  // Testing only: in every check pass of `corrupt_op`, rank `corrupt_rank`
  // subtracts 1 from one element of its copied-back output before comparing, as a
  // broken collective would leave it.
  std::string corrupt_op;
  int corrupt_rank = -1;
};

// What the options look like in the result file (everything but the world
// size, backend, imbalance and split_matrix spelling, which the caller adds).
CommBenchOptions OptionsProto(const SweepOptions& options);

// Follows the sweep as it runs; the listener of rank 0 prints the table.
class SweepListener {
 public:
  virtual ~SweepListener() = default;
  // Before the first size of `op`; `support` says whether rows are emulated.
  virtual void OpStarted(const Collective& op, const SweepOptions& options,
                         int world_size, const Support& support) {}
  // One size done: its out-of-place row, then its in-place row if any.
  virtual void SizeFinished(const Collective& op,
                            const std::vector<CommBenchRow>& rows) {}
  // A remark, e.g. a size skipped because it rounds to 0 bytes.
  virtual void Note(const std::string& note) {}
  virtual void OpFinished(const CommBenchOpSummary& summary) {}
};

// What a backend supports, answerable before any rank exists (the launcher
// checks before it starts the ranks): Backend::Supports, or a backend's free
// function.
using SupportQuery =
    std::function<absl::StatusOr<Support>(OpKind, DType, RedOp)>;

// kInvalidArgument (exit 2) naming the op, dtype and redop when the backend
// cannot run a combination the options ask for, or an --ops name is unknown.
// Call before anything communicates.
absl::Status CheckSupported(const SupportQuery& supports,
                            const SweepOptions& options);
absl::Status CheckSupported(const Backend& backend, const SweepOptions& options);

// The op each sweep point runs, in sweep order: point p (counting from 1,
// as traces' ProfilerStep#p and --fault's step) is element p - 1. A point is
// one size of one op (its out-of-place and in-place rows); sizes that round
// to 0 bytes at `world_size` ranks are not points. Errors as
// CheckSupported's for an unknown op.
absl::StatusOr<std::vector<std::string>> SweepPointOps(const SweepOptions& options,
                                                       int world_size);

// What the caller hears as the sweep runs (each may be empty).
struct SweepHooks {
  // Once, after the first sweep point (e.g. to tighten the collective
  // timeout from the first-step to the steady-state value); an error fails
  // the sweep.
  std::function<absl::Status()> after_first_point;
  // Before each sweep point: its index (from 1) and op (where faults act
  // and the flight recorder's position is set).
  std::function<void(int64_t point, const std::string& op)> before_point;
};

// Runs the sweep on this rank. Collective: every rank calls it with the same
// options, in the same order relative to other collectives. Returns rows,
// per-op summaries, the average busbw, the verdict and notes, identical on
// every rank; `context` and `options` are the caller's to fill.
// `listener` may be null.
absl::StatusOr<CommBenchResult> RunSweep(Backend& backend,
                                         const SweepOptions& options,
                                         SweepListener* listener,
                                         const SweepHooks& hooks = {});

// 0 when the verdict is "pass", 1 otherwise.
int VerdictExitCode(const CommBenchResult& result);

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_HARNESS_H_
