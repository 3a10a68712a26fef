#include "comm_bench/options.h"

#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "common/base/byte_size.h"
#include "common/base/flags.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "common/base/skew.h"
#include "common/base/status.h"

ABSL_FLAG(std::string, ops, mtb::comm_bench::FlagValues().ops,
          "Comma-separated collectives to sweep: all_reduce, all_gather, "
          "reduce_scatter, broadcast, all_to_all, all_to_allv.");
ABSL_FLAG(std::string, minbytes, "1K",
          "Smallest size (nccl-tests -b). K/M/G are powers of 1024.");
ABSL_FLAG(std::string, maxbytes, "64M", "Largest size (nccl-tests -e).");
ABSL_FLAG(int64_t, stepfactor, 2,
          "Multiply the size by this between rows (nccl-tests -f), > 1.");
ABSL_FLAG(int32_t, iters, 20,
          "Calls in the timed loop and in the per-iteration loop (nccl-tests -n).");
ABSL_FLAG(int32_t, warmup_iters, 5,
          "Untimed calls before each size's timing (nccl-tests -w).");
ABSL_FLAG(std::string, dtype, "float32", "float32 or bfloat16.");
ABSL_FLAG(std::string, op, "sum", "Reduction for all_reduce and reduce_scatter: sum or max.");
ABSL_FLAG(int32_t, root, 0, "Broadcast root rank.");
ABSL_FLAG(int32_t, check, 1,
          "1: check every row's result on fresh data (#wrong); 0: skip (N/A).");
ABSL_FLAG(double, min_busbw, 0,
          "Fail (exit 1) when an op's average busbw in GB/s is below 0.9 x "
          "this, as nccl-tests' NCCL_TESTS_MIN_BW; 0 = no gate.");
ABSL_FLAG(std::string, imbalance, "uniform",
          "all_to_allv receive skew: uniform, linear or zipf:S (S >= 0).");
ABSL_FLAG(std::string, split_matrix, "",
          "all_to_allv: a file of world_size x world_size byte counts "
          "(row = sender, column = receiver); replaces --imbalance and the sweep.");
ABSL_FLAG(std::string, out, "",
          "Result JSON (default results/<tool>_<UTC time>.json in the checkout).");
ABSL_FLAG(std::string, markdown, "", "Also write a Markdown summary here.");
ABSL_FLAG(std::string, plot, "", "Also write an SVG of busbw vs size here.");
ABSL_FLAG(std::string, ceiling, "",
          "A loopback_ceiling result JSON: every row that runs over TCP also reports busbw "
          "as a fraction of the matching ceiling (over shared memory the sweep measures "
          "its own ceiling; docs/comm_bench.md, \"Ceiling\").");
ABSL_FLAG(std::string, trace_dir, "",
          "each rank writes DIR/rank_<r>.trace.json (Perfetto; bazel run "
          "//profiler_agg -- DIR): a ProfilerStep#N span per sweep point and "
          "every collective");
ABSL_FLAG(std::string, trace_steps, "",
          "with --trace_dir: trace only sweep points A..B (A:B, from 1 = the "
          "first size of the first op, as ProfilerStep#N); default every point");
ABSL_FLAG(std::string, fault, "",
          "inject faults (docs/faults.md), step = the sweep point (1 = the first "
          "size of the first op), phase = the op: kill:rank=R,step=S,phase=OP; "
          "hang:rank=R,step=S[,phase=OP]; slow:rank=R,ms=M[,every=K]; "
          "exit:rank=R,step=S,code=C; several separated by ';'");
ABSL_FLAG(std::string, transport, "auto",
          "What the collectives run on: auto (shared memory when every rank is on "
          "this host, else Gloo over TCP), shm or tcp (docs/collective.md).");
ABSL_FLAG(std::string, testonly_corrupt, "",
          "Testing only: OP:RANK makes RANK corrupt one element of OP's output "
          "before every check, to prove the check and the exit code.");

namespace mtb::comm_bench {
namespace {

absl::Status Invalid(absl::string_view flag, absl::string_view value,
                     absl::string_view rule) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, ": ", rule));
}

}  // namespace

FlagValues ReadFlags() {
  FlagValues flags;
  flags.ops = absl::GetFlag(FLAGS_ops);
  flags.minbytes = absl::GetFlag(FLAGS_minbytes);
  flags.maxbytes = absl::GetFlag(FLAGS_maxbytes);
  flags.stepfactor = absl::GetFlag(FLAGS_stepfactor);
  flags.iters = absl::GetFlag(FLAGS_iters);
  flags.warmup_iters = absl::GetFlag(FLAGS_warmup_iters);
  flags.dtype = absl::GetFlag(FLAGS_dtype);
  flags.op = absl::GetFlag(FLAGS_op);
  flags.root = absl::GetFlag(FLAGS_root);
  flags.check = absl::GetFlag(FLAGS_check);
  flags.min_busbw = absl::GetFlag(FLAGS_min_busbw);
  flags.imbalance = absl::GetFlag(FLAGS_imbalance);
  flags.imbalance_was_set = FlagWasSet("imbalance");
  flags.split_matrix = absl::GetFlag(FLAGS_split_matrix);
  flags.size_range_was_set = FlagWasSet("minbytes") ||
                             FlagWasSet("maxbytes") || FlagWasSet("stepfactor");
  flags.out = absl::GetFlag(FLAGS_out);
  flags.markdown = absl::GetFlag(FLAGS_markdown);
  flags.plot = absl::GetFlag(FLAGS_plot);
  flags.ceiling = absl::GetFlag(FLAGS_ceiling);
  flags.testonly_corrupt = absl::GetFlag(FLAGS_testonly_corrupt);
  flags.transport = absl::GetFlag(FLAGS_transport);
  flags.trace_dir = absl::GetFlag(FLAGS_trace_dir);
  flags.trace_steps = absl::GetFlag(FLAGS_trace_steps);
  flags.fault = absl::GetFlag(FLAGS_fault);
  return flags;
}

absl::StatusOr<std::vector<Fault>> ResolveFaults(const FlagValues& flags,
                                                 const SweepOptions& options,
                                                 int world_size,
                                                 const TimeoutOptions& timeouts) {
  ASSIGN_OR_RETURN(std::vector<Fault> faults,
                   ParseFaults(flags.fault, SweepFaultGrammar("comm_bench",
                                                              CollectiveNames(),
                                                              "sweep point")));
  if (faults.empty()) return faults;
  FaultBounds bounds;
  bounds.world_size = world_size;
  ASSIGN_OR_RETURN(bounds.phase_of_step, SweepPointOps(options, world_size));
  bounds.steps = static_cast<int64_t>(bounds.phase_of_step.size());
  bounds.step_name = "sweep point";
  bounds.first_step_timeout = timeouts.first_step_timeout;
  bounds.collective_timeout = timeouts.collective_timeout;
  RETURN_IF_ERROR(ValidateFaults(faults, bounds));
  return faults;
}

absl::StatusOr<trace::TraceWindow> ResolveTraceWindow(const FlagValues& flags,
                                                     const SweepOptions& options,
                                                     int world_size) {
  if (flags.trace_steps.empty()) return trace::TraceWindow();
  ASSIGN_OR_RETURN(const std::vector<std::string> points,
                   SweepPointOps(options, world_size));
  const int64_t count = static_cast<int64_t>(points.size());
  return trace::ParseTraceWindow(flags.trace_steps, flags.trace_dir, count,
                                 absl::StrCat(count, " (the sweep's points)"));
}

absl::StatusOr<SweepOptions> ResolveOptions(const FlagValues& flags,
                                            int world_size) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size ", world_size, " must be >= 1"));
  }
  SweepOptions options;
  std::set<std::string> seen;
  for (absl::string_view name :
       absl::StrSplit(flags.ops, ',', absl::SkipWhitespace())) {
    const std::string op(absl::StripAsciiWhitespace(name));
    if (!seen.insert(op).second) {
      return Invalid("ops", flags.ops, absl::StrCat("'", op, "' is listed twice"));
    }
    bool known = false;
    for (const std::string& candidate : CollectiveNames()) known |= candidate == op;
    if (!known) {
      return Invalid("ops", flags.ops,
                     absl::StrCat("unknown collective '", op, "'; expected ",
                                  absl::StrJoin(CollectiveNames(), ",")));
    }
    options.ops.push_back(op);
  }
  if (options.ops.empty()) return Invalid("ops", flags.ops, "names no collective");

  ASSIGN_OR_RETURN(options.min_bytes, ParseByteSize("minbytes", flags.minbytes));
  ASSIGN_OR_RETURN(options.max_bytes, ParseByteSize("maxbytes", flags.maxbytes));
  if (options.min_bytes == 0) return Invalid("minbytes", flags.minbytes, "must be > 0");
  if (options.min_bytes > options.max_bytes) {
    return Invalid("maxbytes", flags.maxbytes,
                   absl::StrCat("must be >= --minbytes=", flags.minbytes, " (",
                                options.max_bytes, " < ", options.min_bytes,
                                " bytes)"));
  }
  if (flags.stepfactor <= 1) {
    return Invalid("stepfactor", absl::StrCat(flags.stepfactor),
                   "must be > 1 (sizes grow by this factor)");
  }
  options.step_factor = flags.stepfactor;
  if (flags.iters < 1) return Invalid("iters", absl::StrCat(flags.iters), "must be >= 1");
  if (flags.warmup_iters < 0) {
    return Invalid("warmup_iters", absl::StrCat(flags.warmup_iters), "must be >= 0");
  }
  options.iters = flags.iters;
  options.warmup_iters = flags.warmup_iters;
  ASSIGN_OR_RETURN(options.dtype, ParseDType("dtype", flags.dtype));
  ASSIGN_OR_RETURN(options.redop, ParseRedOp("op", flags.op));
  if (flags.root < 0 || flags.root >= world_size) {
    return Invalid("root", absl::StrCat(flags.root),
                   absl::StrCat("must be a rank in [0, ", world_size - 1,
                                "] (world size ", world_size, ")"));
  }
  options.root = flags.root;
  if (flags.check != 0 && flags.check != 1) {
    return Invalid("check", absl::StrCat(flags.check), "must be 1 (check) or 0 (skip)");
  }
  options.check = flags.check == 1;
  if (!std::isfinite(flags.min_busbw) || flags.min_busbw < 0) {
    return Invalid("min_busbw", absl::StrCat(flags.min_busbw),
                   "must be a finite number of GB/s >= 0");
  }
  options.min_busbw = flags.min_busbw;

  ASSIGN_OR_RETURN(options.all_to_allv.skew, ParseSkew("imbalance", flags.imbalance));
  if (!flags.split_matrix.empty()) {
    if (flags.imbalance_was_set) {
      return Invalid("split_matrix", flags.split_matrix,
                     "--imbalance and --split_matrix are alternatives; give one");
    }
    if (!seen.count("all_to_allv")) {
      return Invalid("split_matrix", flags.split_matrix,
                     "only all_to_allv uses it; add all_to_allv to --ops");
    }
    const std::string path = ResolveUserPath(flags.split_matrix);
    absl::StatusOr<SplitMatrix> matrix =
        ReadSplitMatrixFile(path, world_size, ElementSize(options.dtype));
    if (!matrix.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--split_matrix=", flags.split_matrix, ": ", matrix.status().message()));
    }
    options.all_to_allv.matrix_bytes = *std::move(matrix);
    if (flags.size_range_was_set) {
      options.notes.push_back(
          seen.size() == 1
              ? "--split_matrix wins for all_to_allv: its one size comes from "
                "the matrix, so --minbytes/--maxbytes/--stepfactor change "
                "nothing here"
              : "--split_matrix wins for all_to_allv (its one size comes from "
                "the matrix); --minbytes/--maxbytes/--stepfactor sweep the "
                "other ops");
    }
  }

  if (flags.transport != "auto" && flags.transport != "shm" && flags.transport != "tcp") {
    return Invalid("transport", flags.transport, "expected auto, shm or tcp");
  }
  if (!flags.testonly_corrupt.empty()) {
    std::vector<std::string> parts = absl::StrSplit(flags.testonly_corrupt, ':');
    int rank = -1;
    if (parts.size() != 2 || !seen.count(parts[0]) ||
        !absl::SimpleAtoi(parts[1], &rank) || rank < 0 || rank >= world_size) {
      return Invalid("testonly_corrupt", flags.testonly_corrupt,
                     "expected OP:RANK with OP in --ops and RANK a rank");
    }
    options.corrupt_op = parts[0];
    options.corrupt_rank = rank;
  }
  if (!flags.ceiling.empty()) {
    const absl::Status read =
        ReadJsonFile(ResolveUserPath(flags.ceiling), &options.ceiling);
    if (!read.ok()) {
      return Invalid("ceiling", flags.ceiling,
                     absl::StrCat("expected a loopback_ceiling result JSON: ",
                                  read.message()));
    }
    if (options.ceiling.tcp_both_ways_gbps() <= 0) {
      return Invalid("ceiling", flags.ceiling,
                     "has no tcp_both_ways_gbps; write it with "
                     "//comm_bench:loopback_ceiling --out=PATH");
    }
    options.has_ceiling = true;
  }
  // No output may overwrite an input or another output (by any spelling).
  std::vector<NamedPath> outputs = {{"--out", ResolveUserPath(flags.out)},
                                    {"--markdown", ResolveUserPath(flags.markdown)},
                                    {"--plot", ResolveUserPath(flags.plot)}};
  for (NamedPath& trace : RankTraceFiles(ResolveUserPath(flags.trace_dir), world_size)) {
    outputs.push_back(std::move(trace));
  }
  RETURN_IF_ERROR(CheckOutputsAgainstInputs(
      outputs, {{"--split_matrix", ResolveUserPath(flags.split_matrix)},
                {"--ceiling", ResolveUserPath(flags.ceiling)}}));
  if (!flags.trace_dir.empty()) {
    RETURN_IF_ERROR(CheckOutputWritable(
        "trace_dir", ResolveUserPath(flags.trace_dir) + "/rank_0.trace.json"));
  }
  // Outputs that cannot be written fail now, before any rank starts.
  for (const auto& [flag, path] :
       {std::pair<const char*, const std::string&>{"out", flags.out},
        {"markdown", flags.markdown},
        {"plot", flags.plot}}) {
    RETURN_IF_ERROR(CheckOutputWritable(flag, ResolveUserPath(path)));
  }
  return options;
}

OutputPaths ResolveOutputPaths(const FlagValues& flags, absl::string_view tool) {
  OutputPaths paths;
  paths.json = flags.out.empty() ? DefaultResultPath(tool, "json")
                                 : ResolveUserPath(flags.out);
  paths.markdown = ResolveUserPath(flags.markdown);
  paths.svg = ResolveUserPath(flags.plot);
  return paths;
}

CommBenchOptions OptionsForResult(const SweepOptions& options,
                                  const FlagValues& flags, int world_size,
                                  absl::string_view backend) {
  CommBenchOptions proto = OptionsProto(options);
  proto.set_world_size(world_size);
  proto.set_backend(std::string(backend));
  proto.set_split_matrix(flags.split_matrix);
  if (!flags.split_matrix.empty()) proto.set_imbalance("");
  return proto;
}

}  // namespace mtb::comm_bench
