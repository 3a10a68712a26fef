// The planner's commands behind its thin main: options in, files read,
// library called, result JSON and Markdown written, the summary returned.
#ifndef MTB_PLANNER_CLI_H_
#define MTB_PLANNER_CLI_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/planner.pb.h"
#include "planner/predict.h"

namespace mtb::planner {

struct ModelShapeFlags {
  int vocab_size = 0, d_model = 0, n_layers = 0, n_heads = 0, seq_len = 0;
};

struct CliOptions {
  std::string command;  // predict, search, calibrate, validate, reproduce
  std::string cluster;
  std::string model;  // a named model, or "" for `shape`
  ModelShapeFlags shape;
  int64_t global_batch = 0;
  Layout layout;
  int world_size = 0;
  int top = 5;
  std::vector<std::string> comm_bench_files;
  std::vector<std::string> trainer_files;
  std::string name;
  std::string matrix;
  std::string table;
  std::string out;
};

// Runs `options.command`; returns the Markdown summary and the result's
// path. kInvalidArgument (exit 2) for bad input, before anything is written.
absl::StatusOr<std::string> RunPlannerCommand(const CliOptions& options, int argc, char** argv);

}  // namespace mtb::planner

#endif  // MTB_PLANNER_CLI_H_
