// The fault matrix's pieces that need no processes: the rows to run, how a
// job's timestamped output says what detected a fault and when, and the
// Markdown table (//trainer/bench:fault_matrix runs the jobs).
#ifndef MTB_TRAINER_BENCH_FAULT_MATRIX_H_
#define MTB_TRAINER_BENCH_FAULT_MATRIX_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "trainer/bench/fault_matrix.pb.h"

namespace mtb {

// One row to run: a strategy and one --fault= spec.
struct FaultCase {
  std::string strategy;
  std::string kind;   // kill, exit, nan, corrupt, hang, slow
  std::string phase;  // kill only
  std::string fault;  // the --fault= value
};

// The step phases and the checkpoint phases a kill can hit.
const std::vector<std::string>& FaultMatrixPhases();

// Every kind on every strategy; kills in every phase (`all_phases`) or in
// `backward` and `checkpoint_write` only. Faults act at step 4 (a save
// step of --save_every=2, --steps=6); corrupt also kills at step 5 so that a
// restart meets the corrupted checkpoint.
std::vector<FaultCase> FaultMatrixCases(const std::vector<std::string>& strategies,
                                        const std::vector<std::string>& kinds, bool all_phases);

// A line of the job's combined output and when it arrived.
struct StampedLine {
  absl::Time time;
  std::string text;
};

// Fills row->detected_by and row->detect_seconds from the job's output:
// the fault's own line (where it acts) to the first line showing it was
// detected. Leaves them empty / 0 when the output does not show both.
void ClassifyDetection(const std::vector<StampedLine>& lines, FaultMatrixRow* row);

std::string RenderFaultMatrixMarkdown(const FaultMatrixResult& result);

}  // namespace mtb

#endif  // MTB_TRAINER_BENCH_FAULT_MATRIX_H_
