// comm_bench's command line, shared by the Gloo binary (comm_bench) and the
// NCCL one (comm_bench_nccl): the flags' raw values, and their validation into
// SweepOptions before any rank communicates (docs/errors.md: every error names
// the flag, the value and the rule; exit 2).
#ifndef MTB_COMM_BENCH_OPTIONS_H_
#define MTB_COMM_BENCH_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "comm_bench/comm_bench.pb.h"
#include "comm_bench/harness.h"
#include "comm_bench/report_files.h"
#include "common/faults/fault_spec.h"
#include "common/launch/timeouts.h"
#include "common/trace/window.h"

namespace mtb::comm_bench {

// The flags as typed (defaults are the flags' defaults).
struct FlagValues {
  std::string ops = "all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,all_to_allv";
  std::string minbytes = "1K";
  std::string maxbytes = "64M";
  int64_t stepfactor = 2;
  int iters = 20;
  int warmup_iters = 5;
  std::string dtype = "float32";
  std::string op = "sum";
  int root = 0;
  int check = 1;
  double min_busbw = 0;
  std::string imbalance = "uniform";
  bool imbalance_was_set = false;
  std::string split_matrix;
  // --minbytes, --maxbytes or --stepfactor given on the command line.
  bool size_range_was_set = false;
  std::string out;
  std::string markdown;
  std::string plot;
  std::string ceiling;  // a loopback_ceiling result JSON, or ""
  std::string testonly_corrupt;  // "OP:RANK"
  // --trace_dir: each rank's Chrome trace (docs/traces.md); "" none.
  std::string trace_dir;
  // --trace_steps=A:B: only sweep points A..B are traced; "" every one.
  std::string trace_steps;
  // --fault= (docs/faults.md): step = sweep point, phase = op; "" none.
  std::string fault;
  // --transport: auto, shm or tcp (common/collective Transport).
  std::string transport = "auto";
};

// The values of the flags defined in options.cc (after ParseCommandLine).
FlagValues ReadFlags();

// Validates `flags` for `world_size` ranks. kInvalidArgument naming the flag
// for anything wrong, including a --split_matrix file that is missing or
// malformed (nothing has run yet, so it is a usage error).
absl::StatusOr<SweepOptions> ResolveOptions(const FlagValues& flags,
                                            int world_size);

// Output paths: --out (or results/comm_bench_<time>.json), --markdown and
// --plot, resolved against the user's checkout under `bazel run`.
OutputPaths ResolveOutputPaths(const FlagValues& flags, absl::string_view tool);

// --fault= for `options` at `world_size` ranks (common/faults): step is the
// sweep point (SweepPointOps), phase its op. kInvalidArgument naming the bad
// part, a rank outside the world, a point past the sweep's last or an op the
// point does not run; a slow fault at or above the timeout it runs under
// (--first_step_timeout on the first point only, else --collective_timeout:
// ValidateSlowFaults, as the trainer checks its own) or that fires on no
// point.
absl::StatusOr<std::vector<Fault>> ResolveFaults(const FlagValues& flags,
                                                 const SweepOptions& options,
                                                 int world_size,
                                                 const TimeoutOptions& timeouts);

// --trace_steps for `options` at `world_size` ranks (common/trace/window.h):
// the window of sweep points (SweepPointOps) to trace, every point when the
// flag is empty. kInvalidArgument naming the flag: not A:B, outside 1..the
// number of points, or without --trace_dir.
absl::StatusOr<trace::TraceWindow> ResolveTraceWindow(const FlagValues& flags,
                                                     const SweepOptions& options,
                                                     int world_size);

// OptionsProto(options) plus what only the flags know.
CommBenchOptions OptionsForResult(const SweepOptions& options,
                                  const FlagValues& flags, int world_size,
                                  absl::string_view backend);

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_OPTIONS_H_
