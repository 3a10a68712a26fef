// ceiling: in one run, the host's ceilings and the collectives measured
// against them (docs/comm_bench.md, "Ceiling"). First the loopback TCP
// ceiling (ceiling.h); then comm_bench at the requested sizes, which over
// shared memory measures each op's shared-memory ceiling inside its sweep
// (shm_ceiling.h) and over TCP compares with the TCP one. Then each row's
// busbw as a % of its ceiling and a verdict: a row that beats its ceiling by
// more than 10% means the ceiling does not bound ("CEILING INVALID"), exit 1.
//
//   bazel run --config=bench //comm_bench:ceiling -- --nproc=2 --minbytes=1M --maxbytes=16M
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "comm_bench/ceiling.h"
#include "comm_bench/shm_ceiling.h"
#include "common/base/byte_size.h"
#include "common/base/flags.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "common/results/run_context.h"

ABSL_FLAG(int, nproc, 2, "Ranks, and processes measuring the shared-memory ceiling.");
ABSL_FLAG(std::string, ops, "all_reduce,all_gather,reduce_scatter,broadcast,all_to_all",
          "Ops to measure (comm_bench --ops).");
ABSL_FLAG(std::string, minbytes, "1M", "Smallest size S.");
ABSL_FLAG(std::string, maxbytes, "16M", "Largest size S.");
ABSL_FLAG(int64_t, stepfactor, 4, "Size multiplier between points.");
ABSL_FLAG(int, rounds, 5, "TCP ceiling rounds (median shown, min..max kept).");
ABSL_FLAG(std::string, tcp_bytes, "16M", "Bytes per peer and direction of the TCP ceiling.");
ABSL_FLAG(std::string, transport, "auto", "comm_bench --transport.");
ABSL_FLAG(int, iters, 10, "comm_bench --iters.");
ABSL_FLAG(std::string, out, "",
          "The ceiling JSON (comm_bench's result goes beside it as _comm_bench.json); "
          "default results/ceiling_<time>.json.");

namespace {

int Usage(const std::string& flag, const std::string& value, const std::string& rule) {
  std::fprintf(stderr, "ceiling: --%s=%s: %s\n", flag.c_str(), value.c_str(), rule.c_str());
  return 2;
}

std::string Sibling(const std::string& name) {
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string path(self, n > 0 ? n : 0);
  return path.substr(0, path.rfind('/') + 1) + name;
}

}  // namespace

int main(int argc, char** argv) {
  mtb::ParseCommandLineOrExit(argc, argv, "ceiling --nproc=2 --minbytes=1M --maxbytes=16M");
  using mtb::comm_bench::CommBenchCeiling;
  const int nproc = absl::GetFlag(FLAGS_nproc);
  if (nproc < 2) return Usage("nproc", std::to_string(nproc), "expected at least 2 ranks");
  absl::StatusOr<int64_t> min_bytes =
      mtb::ParseByteSize("--minbytes", absl::GetFlag(FLAGS_minbytes));
  absl::StatusOr<int64_t> max_bytes =
      mtb::ParseByteSize("--maxbytes", absl::GetFlag(FLAGS_maxbytes));
  absl::StatusOr<int64_t> tcp_bytes =
      mtb::ParseByteSize("--tcp_bytes", absl::GetFlag(FLAGS_tcp_bytes));
  if (!min_bytes.ok() || *min_bytes < 4096) {
    return Usage("minbytes", absl::GetFlag(FLAGS_minbytes), "expected a size of at least 4K");
  }
  if (!max_bytes.ok() || *max_bytes < *min_bytes) {
    return Usage("maxbytes", absl::GetFlag(FLAGS_maxbytes), "expected a size >= --minbytes");
  }
  if (!tcp_bytes.ok() || *tcp_bytes <= 0) {
    return Usage("tcp_bytes", absl::GetFlag(FLAGS_tcp_bytes), "expected a positive size");
  }
  if (absl::GetFlag(FLAGS_stepfactor) < 2) {
    return Usage("stepfactor", std::to_string(absl::GetFlag(FLAGS_stepfactor)), "expected >= 2");
  }
  if (absl::GetFlag(FLAGS_rounds) < 1) {
    return Usage("rounds", std::to_string(absl::GetFlag(FLAGS_rounds)), "expected >= 1");
  }
  for (absl::string_view op : absl::StrSplit(absl::GetFlag(FLAGS_ops), ',')) {
    const std::string shape = mtb::comm_bench::ShmCeilingShapeOf(std::string(op));
    if (shape.empty()) {
      return Usage("ops", absl::GetFlag(FLAGS_ops),
                   absl::StrCat("'", op,
                                "' has no ceiling shape; expected all_reduce, "
                                "all_gather, reduce_scatter, broadcast, all_to_all(v)"));
    }
  }
  mtb::RunContext context = mtb::NewRunContext("ceiling", argc, argv);

  mtb::comm_bench::CeilingOptions tcp;
  tcp.bytes = *tcp_bytes;
  tcp.rounds = absl::GetFlag(FLAGS_rounds);
  tcp.peers_world_size = std::max(3, nproc);
  absl::StatusOr<mtb::comm_bench::Ceiling> measured = mtb::comm_bench::MeasureCeiling(tcp);
  if (!measured.ok()) return mtb::ReportAndExitCode("ceiling", measured.status());

  CommBenchCeiling ceiling = mtb::comm_bench::CeilingProto(*measured, tcp);
  mtb::FinishRunContext(&context);
  *ceiling.mutable_context() = context;

  std::printf("# ceiling: loopback TCP (the shared-memory ceiling is measured in comm_bench's "
              "sweep, per op and size)\n");
  std::printf("# %-15s %12s %12s %17s  %s\n", "op", "size (B)", "GB/s", "min..max", "shape");
  std::printf("  %-15s %12lld %12.2f %8.2f..%-8.2f  tcp both ways (2 processes)\n", "tcp",
              static_cast<long long>(tcp.bytes), ceiling.tcp_both_ways_gbps(),
              ceiling.tcp_both_ways_min_gbps(), ceiling.tcp_both_ways_max_gbps());
  std::printf("  %-15s %12lld %12.2f %8.2f..%-8.2f  tcp %d peers at once\n", "tcp",
              static_cast<long long>(tcp.bytes), ceiling.tcp_peers_gbps(),
              ceiling.tcp_peers_min_gbps(), ceiling.tcp_peers_max_gbps(),
              ceiling.peers_world_size() - 1);

  std::string path = absl::GetFlag(FLAGS_out);
  if (path.empty()) path = mtb::DefaultResultPath("ceiling", "json");
  path = mtb::ResolveUserPath(path);
  if (const absl::Status written = mtb::WriteJsonFile(ceiling, path); !written.ok()) {
    return mtb::ReportAndExitCode("ceiling", written);
  }
  std::printf("# ceiling result: %s\n", path.c_str());
  std::fflush(stdout);

  // The collectives against it, in this run.
  const std::string comm_bench = Sibling("comm_bench");
  const std::string comm_bench_out = path.substr(0, path.rfind(".json")) + "_comm_bench.json";
  std::vector<std::string> args = {
      comm_bench,
      absl::StrCat("--nproc=", nproc),
      absl::StrCat("--ops=", absl::GetFlag(FLAGS_ops)),
      absl::StrCat("--minbytes=", *min_bytes),
      absl::StrCat("--maxbytes=", *max_bytes),
      absl::StrCat("--stepfactor=", absl::GetFlag(FLAGS_stepfactor)),
      absl::StrCat("--iters=", absl::GetFlag(FLAGS_iters)),
      absl::StrCat("--transport=", absl::GetFlag(FLAGS_transport)),
      absl::StrCat("--ceiling=", path),
      absl::StrCat("--out=", comm_bench_out),
  };
  std::vector<char*> raw;
  for (std::string& arg : args) raw.push_back(arg.data());
  raw.push_back(nullptr);
  const pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "ceiling: fork failed\n");
    return 1;
  }
  if (child == 0) {
    execv(comm_bench.c_str(), raw.data());
    std::fprintf(stderr, "ceiling: cannot run %s (build //comm_bench:comm_bench)\n",
                 comm_bench.c_str());
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  const int comm_bench_exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128;

  // Each row against its ceiling, and the verdict.
  mtb::comm_bench::CommBenchResult result;
  if (const absl::Status read = mtb::ReadJsonFile(comm_bench_out, &result); !read.ok()) {
    std::fprintf(stderr, "ceiling: comm_bench exited %d and left no result (%s)\n",
                 comm_bench_exit, std::string(read.message()).c_str());
    return 1;
  }
  bool invalid = false;
  int rows_with_ceiling = 0;
  std::printf("\n%s", mtb::comm_bench::CeilingReport(result, &invalid, &rows_with_ceiling).c_str());
  if (comm_bench_exit != 0 && !invalid) {
    std::printf("# comm_bench's verdict: %s\n", result.verdict().c_str());
  }
  return invalid || comm_bench_exit != 0 ? 1 : 0;
}
