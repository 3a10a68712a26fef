#include "moe_comm/flags.h"

#include <cstdint>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/results/output_path.h"
#include "moe_comm/options.h"

ABSL_FLAG(std::string, tokens_per_rank, "1024",
          "N, tokens per rank (comma list: swept)");
ABSL_FLAG(std::string, hidden, "128", "D, the model width (comma list)");
ABSL_FLAG(int32_t, ffn_hidden, 0, "F, each expert's MLP width (0: 4 x D)");
ABSL_FLAG(std::string, num_experts, "0",
          "E, divisible by the world size (0: 2 x world size; comma list)");
ABSL_FLAG(std::string, top_k, "2", "experts per token, 1 or 2 (comma list)");
ABSL_FLAG(std::string, capacity_factor, "1.25",
          "capacity per expert per source rank = ceil(cf x N x k / E) (comma "
          "list)");
ABSL_FLAG(std::string, skew, "uniform,zipf:0.5,zipf:1,zipf:1.5,zipf:2",
          "router skew, uniform or zipf:S (comma list)");
ABSL_FLAG(int32_t, iters, 20, "timed layer calls per configuration");
ABSL_FLAG(int32_t, warmup_iters, 5, "untimed layer calls before them");
ABSL_FLAG(uint64_t, seed, 1234, "keys every weight and token");
ABSL_FLAG(bool, check, false,
          "check the layer against the single-process reference (forward and "
          "backward) on every configuration instead of timing it; exit 1 on a "
          "mismatch");
ABSL_FLAG(double, rtol, 1e-4, "--check: AllClose relative tolerance");
ABSL_FLAG(double, atol, 1e-4, "--check: AllClose absolute tolerance");
ABSL_FLAG(double, aux_loss_weight, 0.01, "--check: weight of the aux loss");
ABSL_FLAG(double, z_loss_weight, 0.001, "--check: weight of the z-loss");
ABSL_FLAG(bool, test_packing_bug, false,
          "test hook: pack rows in expert order across destinations (the "
          "classic bug), so --check fails");
ABSL_FLAG(std::string, out, "",
          "result JSON path (default results/moe_comm_<UTC time>.json in your "
          "checkout)");
ABSL_FLAG(bool, markdown, true, "write the Markdown report beside --out");
ABSL_FLAG(std::string, trace_dir, "",
          "each rank writes a Chrome trace-event file DIR/rank_<r>.trace.json "
          "(Perfetto, chrome://tracing; bazel run //profiler_agg -- DIR): a "
          "ProfilerStep#N per configuration (benchmark point or check) and "
          "every collective");
ABSL_FLAG(std::string, trace_steps, "",
          "A:B: trace only configurations A..B of the sweep (default: all)");
ABSL_FLAG(std::string, fault, "",
          "inject faults (docs/faults.md), step = the configuration (from 1, "
          "in sweep order), phase = dispatch or combine: "
          "kill:rank=R,step=S,phase=P; hang:rank=R,step=S[,phase=P]; "
          "slow:rank=R,ms=M[,every=K]; exit:rank=R,step=S,code=C; several "
          "separated by ';'");
ABSL_FLAG(bool, plot, true,
          "write the time and drop-rate SVGs beside --out (benchmark mode)");

namespace mtb::moe_comm {

absl::StatusOr<MoeCommOptions> OptionsFromFlags() {
  MoeCommOptions options;
  ASSIGN_OR_RETURN(const std::vector<int> tokens,
                   ParseIntList("tokens_per_rank", absl::GetFlag(FLAGS_tokens_per_rank)));
  for (int v : tokens) options.add_tokens_per_rank(v);
  ASSIGN_OR_RETURN(const std::vector<int> hidden,
                   ParseIntList("hidden", absl::GetFlag(FLAGS_hidden)));
  for (int v : hidden) options.add_hidden(v);
  options.set_ffn_hidden(absl::GetFlag(FLAGS_ffn_hidden));
  ASSIGN_OR_RETURN(const std::vector<int> experts,
                   ParseIntList("num_experts", absl::GetFlag(FLAGS_num_experts)));
  for (int v : experts) options.add_num_experts(v);
  ASSIGN_OR_RETURN(const std::vector<int> top_k,
                   ParseIntList("top_k", absl::GetFlag(FLAGS_top_k)));
  for (int v : top_k) options.add_top_k(v);
  ASSIGN_OR_RETURN(
      const std::vector<double> capacity,
      ParseDoubleList("capacity_factor", absl::GetFlag(FLAGS_capacity_factor)));
  for (double v : capacity) options.add_capacity_factor(v);
  for (absl::string_view skew : absl::StrSplit(absl::GetFlag(FLAGS_skew), ',')) {
    options.add_skew(std::string(skew));
  }
  options.set_iters(absl::GetFlag(FLAGS_iters));
  options.set_warmup_iters(absl::GetFlag(FLAGS_warmup_iters));
  options.set_seed(absl::GetFlag(FLAGS_seed));
  options.set_check(absl::GetFlag(FLAGS_check));
  options.set_rtol(absl::GetFlag(FLAGS_rtol));
  options.set_atol(absl::GetFlag(FLAGS_atol));
  options.set_aux_loss_weight(absl::GetFlag(FLAGS_aux_loss_weight));
  options.set_z_loss_weight(absl::GetFlag(FLAGS_z_loss_weight));
  return options;
}

MoeCheckHooks HooksFromFlags() {
  MoeCheckHooks hooks;
  if (absl::GetFlag(FLAGS_test_packing_bug)) {
    hooks.packing = PackingOrder::kExpertThenDestination;
  }
  return hooks;
}

absl::StatusOr<MoeTraceOptions> TraceOptionsFromFlags(int configurations,
                                                      absl::Duration timeout) {
  MoeTraceOptions trace;
  const std::string dir = absl::GetFlag(FLAGS_trace_dir);
  ASSIGN_OR_RETURN(trace.window,
                   trace::ParseTraceWindow(absl::GetFlag(FLAGS_trace_steps), dir,
                                           configurations,
                                           absl::StrCat(configurations, " (the sweep's "
                                                        "configurations)")));
  if (!dir.empty()) {
    trace.dir = ResolveUserPath(dir);
    RETURN_IF_ERROR(CheckOutputWritable("trace_dir", trace.dir + "/rank_0.trace.json"));
  }
  trace.timeout = timeout;
  return trace;
}

std::string OutFlag() { return absl::GetFlag(FLAGS_out); }
bool MarkdownFlag() { return absl::GetFlag(FLAGS_markdown); }
bool PlotFlag() { return absl::GetFlag(FLAGS_plot); }

std::string FaultFlag() { return absl::GetFlag(FLAGS_fault); }

}  // namespace mtb::moe_comm
