// //report's input: result files of every tool, read through their protos,
// and the provenance rule (runs that differ in commit, dirty flag, build
// mode, host or library versions are not compared unless the user allows it).
#ifndef MTB_REPORT_RESULTS_SET_H_
#define MTB_REPORT_RESULTS_SET_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm_bench/comm_bench.pb.h"
#include "moe_comm/moe_comm.pb.h"
#include "common/results/results.pb.h"
#include "tp_check/tp_check.pb.h"
#include "trainer/train_result.pb.h"

namespace mtb::report {

struct ResultFile {
  std::string path;
  std::string tool;  // run_context.tool
  RunContext context;
  // Exactly one is set, by `tool`; "other" tools keep only the context.
  std::vector<TrainResult> trainer;
  std::vector<comm_bench::CommBenchResult> comm_bench;
  std::vector<tp_check::TpCheckResult> tp_check;
  std::vector<moe_comm::MoeCommResult> moe_comm;
};

// `arguments`: files, or directories whose *.json files are read (sorted).
// Any file that is not valid JSON, or does not parse strictly as its tool's
// result: kDataLoss naming the file (exit 1). A file named in `arguments`
// without provenance is refused the same way; one found in a directory is
// skipped and its path appended to `skipped` (a results directory also
// holds what is not a result: flight recorder dumps of a failed run, merged
// traces). Nothing to read: kInvalidArgument (exit 2).
absl::StatusOr<std::vector<ResultFile>> ReadResultFiles(
    const std::vector<std::string>& arguments,
    std::vector<std::string>* skipped = nullptr);

// Provenance fields whose values differ between files: "git_commit: a.json
// 1234567, b.json 89abcde". Empty when all agree.
std::vector<std::string> ProvenanceDifferences(
    const std::vector<ResultFile>& files);

}  // namespace mtb::report

#endif  // MTB_REPORT_RESULTS_SET_H_
