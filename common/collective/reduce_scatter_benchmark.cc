// Measures the two reduce-scatter algorithms of the Communicator against each
// other (docs/collective.md, "Reduce-scatter"): c10d alltoall_base + local sum, and
// gloo::ReduceScatterHalvingDoubling on a second gloo context.
//
//   bazel run -c opt //common/collective:reduce_scatter_benchmark --
//       --world_sizes=2,3 --min_bytes=1024 --max_bytes=67108864
//
// Ranks are threads of this process (test_util.h) with one intra-op thread
// each. Every size is first checked against the closed form, then each
// algorithm runs `--reps` rounds of `iters` timed calls, alternating, and the
// table shows the median round (per call, slowest rank).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/collective/test_util.h"
#include "common/base/flags.h"
#include "common/base/logging.h"
#include "common/base/stats.h"
#include "common/base/status.h"

ABSL_FLAG(std::string, world_sizes, "2,3", "comma-separated rank counts");
ABSL_FLAG(int64_t, min_bytes, 1024, "smallest input size S (float32 bytes)");
ABSL_FLAG(int64_t, max_bytes, 64 << 20, "largest input size S");
ABSL_FLAG(int, step_factor, 4, "multiply S by this between sizes");
ABSL_FLAG(int, reps, 5, "alternating rounds per algorithm (median reported)");
ABSL_FLAG(int64_t, bytes_per_round, 64 << 20,
          "iterations per round = this / S, clamped to [3, max_iters]");
ABSL_FLAG(int, max_iters, 100, "most timed calls per round");

namespace mtb::collective {
namespace {

constexpr ReduceScatterAlgorithm kAlgorithms[] = {
    ReduceScatterAlgorithm::kAllToAll,
    ReduceScatterAlgorithm::kHalvingDoubling};

struct Row {
  int world_size = 0;
  int64_t bytes = 0;
  double seconds[2] = {0, 0};  // per call, median round, slowest rank
  std::string algorithm[2];
  bool correct = true;
};

absl::Status MeasureWorldSize(int n, std::vector<Row>& rows) {
  std::vector<int64_t> sizes;
  for (int64_t s = absl::GetFlag(FLAGS_min_bytes);
       s <= absl::GetFlag(FLAGS_max_bytes);
       s *= absl::GetFlag(FLAGS_step_factor)) {
    sizes.push_back(s);
  }
  const int reps = absl::GetFlag(FLAGS_reps);
  // seconds[size][algorithm][rep][rank]
  std::vector<std::vector<std::vector<std::vector<double>>>> seconds(
      sizes.size(), std::vector<std::vector<std::vector<double>>>(
                        2, std::vector<std::vector<double>>(
                               reps, std::vector<double>(n, 0))));
  std::vector<Row> measured(sizes.size());
  absl::Mutex mutex;
  ThreadRanksOptions options;
  options.timeout = absl::Minutes(2);
  RETURN_IF_ERROR(RunRanksAsThreads(
      n,
      [&](Communicator& comm) {
        at::set_num_threads(1);
        for (size_t i = 0; i < sizes.size(); ++i) {
          // Elements divisible by n: S/4 rounded down to a multiple of n.
          const int64_t elements = sizes[i] / 4 / n * n;
          const int64_t k = elements / n;
          const at::Tensor input =
              at::arange(elements, at::kFloat).fmod_(1000) * (comm.rank() + 1);
          at::Tensor output = at::empty({k});
          const at::Tensor expected =
              (at::arange(elements, at::kFloat).fmod_(1000) * (n * (n + 1) / 2))
                  .narrow(0, comm.rank() * k, k);
          const int iters = static_cast<int>(std::clamp<int64_t>(
              absl::GetFlag(FLAGS_bytes_per_round) / sizes[i], 3,
              absl::GetFlag(FLAGS_max_iters)));
          for (int a = 0; a < 2; ++a) {
            comm.SetReduceScatterAlgorithm(kAlgorithms[a]);
            absl::Status status = comm.ReduceScatter(input, output);
            const bool ok = status.ok() && at::equal(output, expected);
            absl::MutexLock lock(&mutex);
            if (!ok) measured[i].correct = false;
            measured[i].algorithm[a] = comm.log().Records().back().algorithm;
          }
          for (int rep = 0; rep < reps; ++rep) {
            for (int a = 0; a < 2; ++a) {
              comm.SetReduceScatterAlgorithm(kAlgorithms[a]);
              (void)comm.Barrier();
              const absl::Time start = absl::Now();
              for (int it = 0; it < iters; ++it)
                (void)comm.ReduceScatter(input, output);
              seconds[i][a][rep][comm.rank()] =
                  absl::ToDoubleSeconds(absl::Now() - start) / iters;
            }
          }
          (void)comm.log().TakeRecords();
        }
      },
      options));
  for (size_t i = 0; i < sizes.size(); ++i) {
    Row row = measured[i];
    row.world_size = n;
    row.bytes = sizes[i] / 4 / n * n * 4;
    for (int a = 0; a < 2; ++a) {
      std::vector<double> slowest;
      for (int rep = 0; rep < reps; ++rep) {
        slowest.push_back(Max(seconds[i][a][rep]));
      }
      row.seconds[a] = Median(slowest);
    }
    rows.push_back(row);
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  ParseCommandLineOrExit(
      argc, argv, "reduce_scatter_benchmark: alltoall vs halving-doubling");
  InitLogging(argv[0]);
  std::vector<Row> rows;
  for (absl::string_view text :
       absl::StrSplit(absl::GetFlag(FLAGS_world_sizes), ',')) {
    const int n = std::stoi(std::string(text));
    const absl::Status status = MeasureWorldSize(n, rows);
    if (!status.ok()) return ReportAndExitCode(argv[0], status);
  }
  std::printf(
      "| n | S (bytes) | alltoall+sum (us) | halving-doubling (us) | "
      "hd / alltoall | alltoall busbw (GB/s) | hd busbw (GB/s) | ok |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  bool all_correct = true;
  for (const Row& row : rows) {
    const double factor = (row.world_size - 1.0) / row.world_size;
    std::printf("| %d | %lld | %.1f | %.1f | %.2f | %.2f | %.2f | %s |\n",
                row.world_size, static_cast<long long>(row.bytes),
                row.seconds[0] * 1e6, row.seconds[1] * 1e6,
                row.seconds[1] / row.seconds[0],
                row.bytes * factor / row.seconds[0] / 1e9,
                row.bytes * factor / row.seconds[1] / 1e9,
                row.correct ? "yes" : "WRONG");
    all_correct = all_correct && row.correct;
  }
  std::printf("algorithms: %s | %s\n", rows.front().algorithm[0].c_str(),
              rows.front().algorithm[1].c_str());
  return all_correct ? kExitOk : kExitFailure;
}

}  // namespace
}  // namespace mtb::collective

int main(int argc, char** argv) { return mtb::collective::Main(argc, argv); }
