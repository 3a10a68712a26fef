// planner: predicts the step time, memory and bottleneck of training layouts
// on a cluster, calibrated from this project's own measurements
// (docs/planner.md).
//
//   planner predict   --cluster=F --model=gpt2-124m --dp=8 --strategy=zero2 ...
//   planner search    --cluster=F --model=gpt2-1.5b --global_batch=512
//   planner calibrate --comm_bench=A.json,B.json --trainer=T1.json,T2.json
//   planner validate  --cluster=F --matrix=strategy_matrix.json
//   planner reproduce --cluster=F --table=planner/testdata/megatron_2021_table1.json
//
// Each writes a JSON result (--out) and its Markdown beside it. Exit 2 for
// bad input (one line naming the flag, field or rule), 1 for a failure.
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/flags.h"
#include "planner/cli.h"

ABSL_FLAG(std::string, cluster, "", "cluster file (planner/cluster.proto JSON)");
ABSL_FLAG(std::string, model, "", "a named model (planner/model.h), or give the shape flags");
ABSL_FLAG(int32_t, vocab_size, 0, "model shape, as the trainer's flag");
ABSL_FLAG(int32_t, d_model, 0, "model shape, as the trainer's flag");
ABSL_FLAG(int32_t, n_layers, 0, "model shape, as the trainer's flag");
ABSL_FLAG(int32_t, n_heads, 0, "model shape, as the trainer's flag");
ABSL_FLAG(int32_t, seq_len, 0, "model shape, as the trainer's flag");
ABSL_FLAG(int64_t, global_batch, 0,
          "samples per optimizer step (search; predict: sets micro_batches)");
ABSL_FLAG(int32_t, dp, 1, "predict: data-parallel ranks");
ABSL_FLAG(int32_t, tp, 1, "predict: tensor-parallel ranks");
ABSL_FLAG(int32_t, pp, 1, "predict: pipeline stages");
ABSL_FLAG(std::string, strategy, "ddp", "predict: ddp, zero1, zero2, fsdp");
ABSL_FLAG(int32_t, micro_batch, 1,
          "predict: samples per rank per micro-batch (the trainer's --batch_size)");
ABSL_FLAG(int32_t, micro_batches, 1,
          "predict: micro-batches per step (the trainer's --grad_accum)");
ABSL_FLAG(bool, activation_checkpointing, false, "predict: recompute activations");
ABSL_FLAG(std::string, precision, "fp32", "fp32 or bf16");
ABSL_FLAG(bool, fsdp_prefetch, false, "predict, fsdp: the next unit's gather in flight");
ABSL_FLAG(bool, reshard_after_forward, true, "predict, fsdp: gather again for backward");
ABSL_FLAG(bool, sequence_parallel, false, "predict, tp > 1: sequence parallelism");
ABSL_FLAG(int32_t, pipeline_chunks, 1, "predict, pp > 1: interleaved model chunks per stage");
ABSL_FLAG(int32_t, gradient_bytes, 4, "bytes per gradient element the dp collectives move");
ABSL_FLAG(bool, ddp_overlap, true, "predict, ddp: buckets launched during backward");
ABSL_FLAG(int32_t, world_size, 0, "search: ranks (0: every device)");
ABSL_FLAG(int32_t, top, 5, "search: layouts printed");
ABSL_FLAG(std::string, comm_bench, "", "calibrate: comm_bench result files, comma-separated");
ABSL_FLAG(std::string, trainer, "", "calibrate: one-rank trainer result files, comma-separated");
ABSL_FLAG(std::string, name, "this machine", "calibrate: the cluster's name");
ABSL_FLAG(std::string, matrix, "", "validate: a strategy-matrix result file");
ABSL_FLAG(std::string, table, "", "reproduce: a published table (planner.proto PublishedTable)");
ABSL_FLAG(std::string, out, "", "result JSON (default results/planner_<command>_<UTC>.json)");

namespace {

std::vector<std::string> List(const std::string& value) {
  return absl::StrSplit(value, ',', absl::SkipEmpty());
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args =
      mtb::ParseCommandLineOrExit(argc, argv,
                                  "predicts training layouts' step time and memory on a cluster:\n"
                                  "  planner predict|search|calibrate|validate|reproduce [flags]",
                                  mtb::Operands::kAllowed);
  if (args.size() != 2) {
    std::cerr << "planner: give one command: predict, search, calibrate, "
                 "validate or reproduce\n";
    return mtb::kExitUsage;
  }
  mtb::planner::CliOptions o;
  o.command = args[1];
  o.cluster = absl::GetFlag(FLAGS_cluster);
  o.model = absl::GetFlag(FLAGS_model);
  o.shape = {absl::GetFlag(FLAGS_vocab_size), absl::GetFlag(FLAGS_d_model),
             absl::GetFlag(FLAGS_n_layers), absl::GetFlag(FLAGS_n_heads),
             absl::GetFlag(FLAGS_seq_len)};
  o.global_batch = absl::GetFlag(FLAGS_global_batch);
  mtb::planner::Layout& l = o.layout;
  l = mtb::planner::DefaultLayout();
  l.set_dp(absl::GetFlag(FLAGS_dp));
  l.set_tp(absl::GetFlag(FLAGS_tp));
  l.set_pp(absl::GetFlag(FLAGS_pp));
  l.set_strategy(absl::GetFlag(FLAGS_strategy));
  l.set_micro_batch(absl::GetFlag(FLAGS_micro_batch));
  l.set_micro_batches(absl::GetFlag(FLAGS_micro_batches));
  l.set_activation_checkpointing(absl::GetFlag(FLAGS_activation_checkpointing));
  l.set_precision(absl::GetFlag(FLAGS_precision));
  l.set_fsdp_prefetch(absl::GetFlag(FLAGS_fsdp_prefetch));
  l.set_fsdp_reshard_after_forward(absl::GetFlag(FLAGS_reshard_after_forward));
  l.set_sequence_parallel(absl::GetFlag(FLAGS_sequence_parallel));
  l.set_pipeline_chunks(absl::GetFlag(FLAGS_pipeline_chunks));
  l.set_gradient_bytes(absl::GetFlag(FLAGS_gradient_bytes));
  l.set_ddp_launch_after_backward(!absl::GetFlag(FLAGS_ddp_overlap));
  o.world_size = absl::GetFlag(FLAGS_world_size);
  o.top = absl::GetFlag(FLAGS_top);
  o.comm_bench_files = List(absl::GetFlag(FLAGS_comm_bench));
  o.trainer_files = List(absl::GetFlag(FLAGS_trainer));
  o.name = absl::GetFlag(FLAGS_name);
  o.matrix = absl::GetFlag(FLAGS_matrix);
  o.table = absl::GetFlag(FLAGS_table);
  o.out = absl::GetFlag(FLAGS_out);
  absl::StatusOr<std::string> summary = mtb::planner::RunPlannerCommand(o, argc, argv);
  if (!summary.ok()) return mtb::ReportAndExitCode("planner", summary.status());
  std::cout << *summary;
  return mtb::kExitOk;
}
