// loopback_ceiling: what this host can move between processes over loopback
// TCP (one way, both ways, n-1 peers at once) and with memcpy; the ceilings
// comm_bench's busbw is compared with (docs/comm_bench.md, "Ceiling").
//
//   bazel run --config=bench //comm_bench:loopback_ceiling -- --bytes=64M
#include <cstdio>

#include "absl/flags/flag.h"
#include "comm_bench/ceiling.h"
#include "common/base/byte_size.h"
#include "common/base/flags.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "common/results/run_context.h"

ABSL_FLAG(std::string, bytes, "64M", "bytes per peer and direction per round");
ABSL_FLAG(int, rounds, 5, "rounds per shape (median reported, min..max shown)");
ABSL_FLAG(int, peers_world_size, 3, "processes in the n-1-peers shape (>= 3)");
ABSL_FLAG(std::string, out, "",
          "Also write the result JSON here (comm_bench --ceiling reads it).");

int main(int argc, char** argv) {
  mtb::ParseCommandLineOrExit(argc, argv,
                              "loopback_ceiling --bytes=64M --rounds=5");
  absl::StatusOr<int64_t> bytes = mtb::ParseByteSize("--bytes", absl::GetFlag(FLAGS_bytes));
  if (!bytes.ok() || *bytes <= 0) {
    std::fprintf(stderr, "--bytes=%s: expected a positive size such as 64M\n",
                 absl::GetFlag(FLAGS_bytes).c_str());
    return 2;
  }
  if (absl::GetFlag(FLAGS_rounds) <= 0 || absl::GetFlag(FLAGS_peers_world_size) < 3) {
    std::fprintf(stderr, "--rounds must be > 0 and --peers_world_size >= 3\n");
    return 2;
  }
  mtb::RunContext context = mtb::NewRunContext("loopback_ceiling", argc, argv);
  mtb::comm_bench::CeilingOptions options;
  options.bytes = *bytes;
  options.rounds = absl::GetFlag(FLAGS_rounds);
  options.peers_world_size = absl::GetFlag(FLAGS_peers_world_size);
  absl::StatusOr<mtb::comm_bench::Ceiling> ceiling =
      mtb::comm_bench::MeasureCeiling(options);
  if (!ceiling.ok()) return mtb::ReportAndExitCode(argv[0], ceiling.status());
  const double g = 1e9;
  std::printf("| ceiling (per process, GB/s) | median | min..max |\n|---|---|---|\n");
  std::printf("| memcpy | %.2f | |\n", ceiling->memcpy_bytes_per_second / g);
  std::printf("| tcp one way (2 processes) | %.2f | %.2f..%.2f |\n",
              ceiling->tcp_one_way / g, ceiling->tcp_one_way_min / g,
              ceiling->tcp_one_way_max / g);
  std::printf("| tcp both ways (2 processes) | %.2f | %.2f..%.2f |\n",
              ceiling->tcp_both_ways / g, ceiling->tcp_both_ways_min / g,
              ceiling->tcp_both_ways_max / g);
  std::printf("| tcp %d peers at once (%d processes) | %.2f | %.2f..%.2f |\n",
              ceiling->peers_world_size - 1, ceiling->peers_world_size,
              ceiling->tcp_peers / g, ceiling->tcp_peers_min / g,
              ceiling->tcp_peers_max / g);
  if (!absl::GetFlag(FLAGS_out).empty()) {
    mtb::comm_bench::CommBenchCeiling proto =
        mtb::comm_bench::CeilingProto(*ceiling, options);
    mtb::FinishRunContext(&context);
    *proto.mutable_context() = context;
    const std::string path = mtb::ResolveUserPath(absl::GetFlag(FLAGS_out));
    const absl::Status written = mtb::WriteJsonFile(proto, path);
    if (!written.ok()) return mtb::ReportAndExitCode(argv[0], written);
    std::printf("# result: %s\n", path.c_str());
  }
  return 0;
}
