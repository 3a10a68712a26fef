// The stdout table, in nccl-tests' layout so its numbers read side by side
// with nccl-tests': one header per collective, one line per size as soon as
// it finishes, then nccl-tests' footer ("Out of bounds values", "Avg bus
// bandwidth"). The 13 nccl-tests columns come first, unchanged in meaning;
// comm_bench's extra columns (slowest rank's loop time, per-iteration p50 and
// p99, per placement) follow after a '|', then remarks (emulated, the
// all_to_allv bottleneck).
#ifndef MTB_COMM_BENCH_TABLE_H_
#define MTB_COMM_BENCH_TABLE_H_

#include <ostream>
#include <string>
#include <vector>

#include "comm_bench/harness.h"

namespace mtb::comm_bench {

class TablePrinter : public SweepListener {
 public:
  // `out` must outlive the printer; lines are flushed as they are written.
  TablePrinter(std::ostream& out, std::string backend_name);

  void OpStarted(const Collective& op, const SweepOptions& options,
                 int world_size, const Support& support) override;
  void SizeFinished(const Collective& op,
                    const std::vector<CommBenchRow>& rows) override;
  void Note(const std::string& note) override;
  void OpFinished(const CommBenchOpSummary& summary) override;

 private:
  std::ostream& out_;
  const std::string backend_name_;
  double min_busbw_ = 0;
  bool check_ = true;
};

// nccl-tests' number format for a column of `width` characters: two
// decimals, fewer when the number would not fit, then exponent notation.
std::string NcclTestsNumber(double value, int width);

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_TABLE_H_
