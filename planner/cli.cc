#include "planner/cli.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/host_memory.h"
#include "common/base/status.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "common/results/run_context.h"
#include "planner/calibrate.h"
#include "planner/cluster.h"
#include "planner/model.h"
#include "planner/render.h"
#include "planner/reproduce.h"
#include "planner/search.h"
#include "planner/validate.h"

namespace mtb::planner {
namespace {

absl::StatusOr<ModelSpec> ResolveModel(const CliOptions& o) {
  if (!o.model.empty()) return NamedModel(o.model);
  if (o.shape.d_model == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("give --model (", NamedModelChoices(),
                     ") or the shape: --vocab_size, --d_model, --n_layers, --n_heads, "
                     "--seq_len"));
  }
  return ModelFromShape("custom", o.shape.vocab_size, o.shape.d_model, o.shape.n_layers,
                        o.shape.n_heads, o.shape.seq_len);
}

absl::StatusOr<Cluster> NeedCluster(const CliOptions& o) {
  if (o.cluster.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("planner ", o.command, " needs --cluster=FILE"));
  }
  return ReadClusterFile(ResolveUserPath(o.cluster));
}

std::string LoadAverage() {
  std::ifstream file("/proc/loadavg");
  std::string one, five, fifteen;
  file >> one >> five >> fifteen;
  return absl::StrCat(one, " ", five, " ", fifteen);
}

// Writes the JSON and its Markdown companion; returns the summary.
absl::StatusOr<std::string> Write(const google::protobuf::Message& result, const std::string& out,
                                  const std::string& markdown) {
  RETURN_IF_ERROR(WriteJsonFile(result, out));
  ASSIGN_OR_RETURN(std::string kept,
                   WriteCompanionFile(ReplaceExtension(out, "md"), out, markdown));
  return absl::StrCat(markdown, kept.empty() ? "" : absl::StrCat("\n", kept), "\nresult: ", out,
                      "\n");
}

}  // namespace

absl::StatusOr<std::string> RunPlannerCommand(const CliOptions& o, int argc, char** argv) {
  const std::string out = o.out.empty()
                              ? DefaultResultPath(absl::StrCat("planner_", o.command), "json")
                              : ResolveUserPath(o.out);
  if (o.command == "predict" || o.command == "search") {
    ASSIGN_OR_RETURN(const Cluster cluster, NeedCluster(o));
    ASSIGN_OR_RETURN(const ModelSpec model, ResolveModel(o));
    RETURN_IF_ERROR(CheckOutputWritable("out", out));
    PlannerResult result;
    if (o.command == "search") {
      SearchOptions options;
      options.model = model;
      options.global_batch = o.global_batch;
      options.precision = o.layout.precision();
      options.world_size = o.world_size;
      options.top = o.top;
      options.gradient_bytes = o.layout.gradient_bytes();
      ASSIGN_OR_RETURN(result, Search(options, cluster));
    } else {
      Layout layout = o.layout;
      if (o.global_batch > 0) {
        const int64_t per_step = static_cast<int64_t>(layout.dp()) * layout.micro_batch();
        if (o.global_batch % per_step != 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "--global_batch=", o.global_batch, " is not divisible by --dp=", layout.dp(),
              " x --micro_batch=", layout.micro_batch()));
        }
        layout.set_micro_batches(static_cast<int>(o.global_batch / per_step));
      }
      ASSIGN_OR_RETURN(Prediction prediction, Predict(model, layout, cluster));
      result.set_command("predict");
      *result.mutable_model() = model;
      result.set_cluster_name(cluster.name());
      result.set_global_batch(prediction.global_batch());
      *result.add_predictions() = std::move(prediction);
    }
    RunContext context = NewRunContext("planner", argc, argv);
    context.set_world_size(1);
    FinishRunContext(&context);
    *result.mutable_run_context() = context;
    result.set_schema_version(1);
    return Write(result, out, RenderPlannerMarkdown(result));
  }
  if (o.command == "calibrate") {
    CalibrateOptions options;
    options.name = o.name;
    for (const std::string& f : o.comm_bench_files) {
      options.comm_bench_files.push_back(ResolveUserPath(f));
    }
    for (const std::string& f : o.trainer_files) {
      options.trainer_files.push_back(ResolveUserPath(f));
    }
    ASSIGN_OR_RETURN(const HostMemory host, ReadHostMemory());
    options.host_memory_bytes = host.total_bytes;
    options.host_memory_source = absl::StrCat("/proc/meminfo ", host.source);
    RETURN_IF_ERROR(CheckOutputWritable("out", out));
    ASSIGN_OR_RETURN(Cluster cluster, Calibrate(options));
    RunContext context = NewRunContext("planner", argc, argv);
    FinishRunContext(&context);
    *cluster.mutable_run_context() = context;
    return Write(cluster, out, RenderClusterMarkdown(cluster));
  }
  if (o.command == "validate") {
    ASSIGN_OR_RETURN(const Cluster cluster, NeedCluster(o));
    if (o.matrix.empty()) {
      return absl::InvalidArgumentError(
          "planner validate needs --matrix=FILE "
          "(a strategy-matrix result)");
    }
    StrategyMatrixResult matrix;
    if (absl::Status read = ReadJsonFile(ResolveUserPath(o.matrix), &matrix); !read.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--matrix=", o.matrix, ": ", read.message()));
    }
    RETURN_IF_ERROR(CheckOutputWritable("out", out));
    ASSIGN_OR_RETURN(ValidationResult result, Validate(matrix, cluster));
    result.set_cluster_file(o.cluster);
    result.set_matrix_file(o.matrix);
    result.set_load_average(LoadAverage());
    RunContext context = NewRunContext("planner", argc, argv);
    FinishRunContext(&context);
    *result.mutable_run_context() = context;
    result.set_schema_version(1);
    return Write(result, out, RenderValidationMarkdown(result));
  }
  if (o.command == "reproduce") {
    ASSIGN_OR_RETURN(const Cluster cluster, NeedCluster(o));
    if (o.table.empty()) {
      return absl::InvalidArgumentError("planner reproduce needs --table=FILE (a PublishedTable)");
    }
    PublishedTable table;
    if (absl::Status read = ReadJsonFile(ResolveUserPath(o.table), &table); !read.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--table=", o.table, ": ", read.message()));
    }
    RETURN_IF_ERROR(CheckOutputWritable("out", out));
    ASSIGN_OR_RETURN(ReproductionResult result, Reproduce(table, cluster));
    result.set_table_file(o.table);
    result.set_cluster_file(o.cluster);
    RunContext context = NewRunContext("planner", argc, argv);
    FinishRunContext(&context);
    *result.mutable_run_context() = context;
    result.set_schema_version(1);
    return Write(result, out, RenderReproductionMarkdown(result));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", o.command,
                   "\" is not a planner command: use predict, search, "
                   "calibrate, validate or reproduce"));
}

}  // namespace mtb::planner
