// Measures the Communicator's reduce-scatter and flat all-gather algorithms
// against each other (docs/collective.md, "Reduce-scatter" and "All-gather"):
// reduce-scatter as c10d alltoall_base + local sum, Gloo's halving-doubling on
// a second gloo context, and chunked send/recv (one entry per chunk size);
// all-gather as c10d's list allgather and direct send/recv.
//
//   bazel run --config=bench //common/collective:reduce_scatter_benchmark --
//       --op=reduce_scatter --world_sizes=2,3 --chunk_bytes=262144,1048576
//   bazel run --config=bench //common/collective:reduce_scatter_benchmark --
//       --op=all_gather --world_sizes=2,3
//
// Ranks are threads of this process (test_util.h) with one intra-op thread
// each. Every size is first checked against the closed form, then each
// algorithm runs `--reps` rounds of `iters` timed calls, alternating, and the
// table shows the median round (per call, slowest rank).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/collective/test_util.h"
#include "common/base/flags.h"
#include "common/base/logging.h"
#include "common/base/stats.h"
#include "common/base/status.h"
#include "glog/logging.h"

ABSL_FLAG(std::string, op, "reduce_scatter",
          "reduce_scatter, all_gather or all_reduce (Gloo's ring through c10d, "
          "Gloo's bcube, our reduce_scatter + all_gather)");
ABSL_FLAG(std::string, world_sizes, "2,3", "comma-separated rank counts");
ABSL_FLAG(int64_t, min_bytes, 1024, "smallest size S (float32 bytes)");
ABSL_FLAG(int64_t, max_bytes, 64 << 20, "largest size S");
ABSL_FLAG(int, step_factor, 4, "multiply S by this between sizes");
ABSL_FLAG(int, reps, 5, "alternating rounds per algorithm (median reported)");
ABSL_FLAG(int64_t, bytes_per_round, 64 << 20,
          "iterations per round = this / S, clamped to [3, max_iters]");
ABSL_FLAG(int, max_iters, 100, "most timed calls per round");
ABSL_FLAG(bool, halving_doubling, true,
          "reduce_scatter: include Gloo's halving-doubling (slow at large S)");
ABSL_FLAG(std::string, chunk_bytes, "262144,1048576,4194304",
          "reduce_scatter: the chunked algorithm's chunk sizes, one column each");
ABSL_FLAG(std::string, depths, "2",
          "reduce_scatter: the chunked algorithm's steps in flight (comma "
          "list; a column per chunk size and depth)");
ABSL_FLAG(bool, in_place, false,
          "reduce_scatter: the output is the rank's own block of the input (the "
          "chunked algorithm then stages every peer's chunks)");
ABSL_FLAG(bool, exchange_only, true,
          "reduce_scatter: add a column moving the same bytes with no sums "
          "(a direct all-gather of the blocks): the transfer's own time");
ABSL_FLAG(bool, breakdown, true,
          "reduce_scatter: also print where each algorithm's time went (per "
          "call, mean over ranks and timed calls: in flight, local reduce, "
          "and for chunked the waits for received and sent chunks)");

namespace mtb::collective {
namespace {

// One column of the table.
struct Variant {
  std::string label;
  ReduceScatterAlgorithm reduce_scatter = ReduceScatterAlgorithm::kAuto;
  int64_t chunk_bytes = 0;  // kChunked only
  int depth = 0;            // kChunked only
  AllGatherAlgorithm all_gather = AllGatherAlgorithm::kAuto;
  AllReduceAlgorithm all_reduce = AllReduceAlgorithm::kAuto;
  // reduce_scatter mode: a direct all-gather of the same bytes instead.
  bool exchange_only = false;
};

bool AllReduceMode() { return absl::GetFlag(FLAGS_op) == "all_reduce"; }

std::vector<Variant> Variants(bool reduce_scatter) {
  std::vector<Variant> variants;
  if (AllReduceMode()) {
    for (AllReduceAlgorithm algorithm :
         {AllReduceAlgorithm::kRing, AllReduceAlgorithm::kBcube,
          AllReduceAlgorithm::kReduceScatterAllGather, AllReduceAlgorithm::kAuto}) {
      Variant variant{std::string(AllReduceAlgorithmName(algorithm))};
      variant.all_reduce = algorithm;
      variants.push_back(variant);
    }
    return variants;
  }
  if (!reduce_scatter) {
    variants.push_back({"list", {}, 0, 0, AllGatherAlgorithm::kList});
    variants.push_back({"direct", {}, 0, 0, AllGatherAlgorithm::kDirect});
    variants.push_back({"auto", {}, 0, 0, AllGatherAlgorithm::kAuto});
    return variants;
  }
  variants.push_back({"alltoall", ReduceScatterAlgorithm::kAllToAll});
  if (absl::GetFlag(FLAGS_halving_doubling)) {
    variants.push_back({"halving_doubling",
                        ReduceScatterAlgorithm::kHalvingDoubling});
  }
  for (absl::string_view text :
       absl::StrSplit(absl::GetFlag(FLAGS_chunk_bytes), ',')) {
    const int64_t chunk = std::stoll(std::string(text));
    for (absl::string_view depth_text :
         absl::StrSplit(absl::GetFlag(FLAGS_depths), ',')) {
      const int depth = std::stoi(std::string(depth_text));
      Variant variant{absl::StrCat("chunked ", chunk / 1024, " KiB x", depth),
                      ReduceScatterAlgorithm::kChunked, chunk};
      variant.depth = depth;
      variants.push_back(variant);
    }
  }
  variants.push_back({"auto", ReduceScatterAlgorithm::kAuto});
  if (absl::GetFlag(FLAGS_exchange_only)) {
    Variant exchange{"exchange only", {}, 0, 0, AllGatherAlgorithm::kDirect};
    exchange.exchange_only = true;
    variants.push_back(exchange);
  }
  return variants;
}

struct Row {
  int world_size = 0;
  int64_t bytes = 0;
  std::vector<double> seconds;  // per variant: per call, median round, slowest rank
  std::vector<std::string> algorithm;
  // per variant, per call, mean over ranks and timed calls (seconds): in
  // flight, local reduce, receive wait, send wait.
  std::vector<std::array<double, 4>> phases;
  bool correct = true;
};

absl::Status MeasureWorldSize(int n, bool reduce_scatter,
                              const std::vector<Variant>& variants,
                              std::vector<Row>& rows) {
  std::vector<int64_t> sizes;
  for (int64_t s = absl::GetFlag(FLAGS_min_bytes);
       s <= absl::GetFlag(FLAGS_max_bytes);
       s *= absl::GetFlag(FLAGS_step_factor)) {
    sizes.push_back(s);
  }
  const int reps = absl::GetFlag(FLAGS_reps);
  const int v_count = static_cast<int>(variants.size());
  // seconds[size][variant][rep][rank]
  std::vector<std::vector<std::vector<std::vector<double>>>> seconds(
      sizes.size(), std::vector<std::vector<std::vector<double>>>(
                        v_count, std::vector<std::vector<double>>(
                                     reps, std::vector<double>(n, 0))));
  std::vector<Row> measured(sizes.size());
  for (Row& row : measured) {
    row.algorithm.resize(v_count);
    row.phases.assign(v_count, {0, 0, 0, 0});
  }
  absl::Mutex mutex;
  ThreadRanksOptions options;
  options.timeout = absl::Minutes(2);
  // One rank's buffers for one size.
  struct Buffers {
    at::Tensor input, output, expected;
    // reduce_scatter's exchange-only column: this rank's block in, every
    // block out.
    at::Tensor exchange_input, exchange_output, exchange_expected;
  };
  auto run = [&](Communicator& comm, int v, const Buffers& b) {
    // all_reduce: in place on `output`, which holds the input (see below).
    if (AllReduceMode()) return comm.AllReduce(b.output);
    if (variants[v].exchange_only) {
      return comm.AllGather(b.exchange_input, b.exchange_output);
    }
    if (reduce_scatter) return comm.ReduceScatter(b.input, b.output);
    return comm.AllGather(b.input, b.output);
  };
  // Variants of one communicator: those without a chunk size share one (with
  // the default chunking), each (chunk, depth) has its own (fixed at
  // creation).
  const std::pair<int64_t, int> default_chunking = {
      CommunicatorOptions().reduce_scatter_chunk_bytes,
      CommunicatorOptions().reduce_scatter_depth};
  auto chunking_of = [&](const Variant& variant) {
    return variant.chunk_bytes > 0
               ? std::make_pair(variant.chunk_bytes, variant.depth)
               : default_chunking;
  };
  std::vector<std::pair<int64_t, int>> chunkings;
  for (const Variant& variant : variants) chunkings.push_back(chunking_of(variant));
  std::sort(chunkings.begin(), chunkings.end());
  chunkings.erase(std::unique(chunkings.begin(), chunkings.end()), chunkings.end());
  for (const auto& [chunk, depth] : chunkings) {
    std::vector<int> mine;
    for (int v = 0; v < v_count; ++v) {
      if (chunking_of(variants[v]) == std::make_pair(chunk, depth)) mine.push_back(v);
    }
    if (mine.empty()) continue;
    options.reduce_scatter_chunk_bytes = chunk;
    options.reduce_scatter_depth = depth;
    RETURN_IF_ERROR(RunRanksAsThreads(
        n,
        [&](Communicator& comm) {
          at::set_num_threads(1);
          for (size_t i = 0; i < sizes.size(); ++i) {
            // Elements divisible by n: S/4 rounded down to a multiple of n.
            const int64_t elements = sizes[i] / 4 / n * n;
            const int64_t k = elements / n;
            const at::Tensor pattern = at::arange(elements, at::kFloat).fmod_(1000);
            const bool all_reduce = AllReduceMode();
            const bool in_place = reduce_scatter && absl::GetFlag(FLAGS_in_place);
            Buffers b;
            const at::Tensor source =
                reduce_scatter || all_reduce
                    ? pattern * (comm.rank() + 1)
                    : pattern.narrow(0, comm.rank() * k, k).clone();
            // In place, the input is a copy refreshed before the check (the
            // timed calls overwrite its own block: values change, shapes not).
            b.input = in_place ? source.clone() : source;
            b.output = in_place ? b.input.narrow(0, comm.rank() * k, k)
                                : at::empty({reduce_scatter && !all_reduce ? k : elements});
            b.expected =
                all_reduce ? pattern * (n * (n + 1) / 2)
                : reduce_scatter
                    ? (pattern * (n * (n + 1) / 2)).narrow(0, comm.rank() * k, k)
                    : pattern;
            if (reduce_scatter) {
              b.exchange_input = source.narrow(0, comm.rank() * k, k);
              b.exchange_output = at::empty({elements});
              b.exchange_expected = at::empty({elements});
              for (int p = 0; p < n; ++p) {
                b.exchange_expected.narrow(0, p * k, k)
                    .copy_(pattern.narrow(0, p * k, k) * (p + 1));
              }
            }
            const int iters = static_cast<int>(std::clamp<int64_t>(
                absl::GetFlag(FLAGS_bytes_per_round) / sizes[i], 3,
                absl::GetFlag(FLAGS_max_iters)));
            for (int v : mine) {
              comm.SetReduceScatterAlgorithm(variants[v].reduce_scatter);
              comm.SetAllGatherAlgorithm(variants[v].all_gather);
              comm.SetAllReduceAlgorithm(variants[v].all_reduce);
              if (all_reduce) {
                b.output.copy_(b.input);
              } else if (in_place) {
                b.input.copy_(source);
              } else {
                b.output.fill_(-1);
              }
              absl::Status status = run(comm, v, b);
              const bool ok =
                  status.ok() &&
                  (variants[v].exchange_only
                       ? at::equal(b.exchange_output, b.exchange_expected)
                       : at::equal(b.output, b.expected));
              absl::MutexLock lock(&mutex);
              if (!ok) measured[i].correct = false;
              measured[i].algorithm[v] = comm.log().Records().back().algorithm;
            }
            std::vector<std::array<double, 4>> phases(v_count, {0, 0, 0, 0});
            for (int rep = 0; rep < reps; ++rep) {
              for (int v : mine) {
                comm.SetReduceScatterAlgorithm(variants[v].reduce_scatter);
                comm.SetAllGatherAlgorithm(variants[v].all_gather);
                comm.SetAllReduceAlgorithm(variants[v].all_reduce);
                (void)comm.Barrier();
                (void)comm.log().TakeRecords();
                const absl::Time start = absl::Now();
                for (int it = 0; it < iters; ++it)
                  (void)run(comm, v, b);
                seconds[i][v][rep][comm.rank()] =
                    absl::ToDoubleSeconds(absl::Now() - start) / iters;
                for (const CollectiveRecord& r : comm.log().TakeRecords()) {
                  if (r.op != CollectiveOp::kReduceScatter) continue;
                  const double calls = static_cast<double>(iters) * reps * n;
                  phases[v][0] += absl::ToDoubleSeconds(r.duration) / calls;
                  phases[v][1] += absl::ToDoubleSeconds(r.reduce_time) / calls;
                  phases[v][2] += absl::ToDoubleSeconds(r.receive_wait_time) / calls;
                  phases[v][3] += absl::ToDoubleSeconds(r.send_wait_time) / calls;
                }
              }
            }
            {
              absl::MutexLock lock(&mutex);
              for (int v : mine) {
                for (int k = 0; k < 4; ++k) measured[i].phases[v][k] += phases[v][k];
              }
            }
            if (comm.rank() == 0) {
              LOG(INFO) << "n=" << n << " chunk " << chunk << ": size "
                        << (i + 1) << "/" << sizes.size() << " done";
            }
          }
        },
        options));
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    Row row = measured[i];
    row.world_size = n;
    row.bytes = sizes[i] / 4 / n * n * 4;
    for (int v = 0; v < v_count; ++v) {
      std::vector<double> slowest;
      for (int rep = 0; rep < reps; ++rep) {
        slowest.push_back(Max(seconds[i][v][rep]));
      }
      row.seconds.push_back(Median(slowest));
    }
    rows.push_back(row);
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  ParseCommandLineOrExit(
      argc, argv,
      "reduce_scatter_benchmark: reduce-scatter and all-gather algorithms");
  InitLogging(argv[0]);
  const std::string op = absl::GetFlag(FLAGS_op);
  if (op != "reduce_scatter" && op != "all_gather" && op != "all_reduce") {
    std::fprintf(stderr,
                 "--op=%s: expected reduce_scatter, all_gather or all_reduce\n",
                 op.c_str());
    return 2;
  }
  const bool reduce_scatter = op == "reduce_scatter";
  const std::vector<Variant> variants = Variants(reduce_scatter);
  std::vector<Row> rows;
  for (absl::string_view text :
       absl::StrSplit(absl::GetFlag(FLAGS_world_sizes), ',')) {
    const int n = std::stoi(std::string(text));
    const absl::Status status =
        MeasureWorldSize(n, reduce_scatter, variants, rows);
    if (!status.ok()) return ReportAndExitCode(argv[0], status);
  }
  std::printf("%s: time per call in us (busbw GB/s), median of %d rounds\n",
              op.c_str(), absl::GetFlag(FLAGS_reps));
  std::printf("| n | S (bytes) |");
  for (const Variant& variant : variants) std::printf(" %s |", variant.label.c_str());
  std::printf(" fastest | ok |\n|---|---|");
  for (size_t v = 0; v < variants.size(); ++v) std::printf("---|");
  std::printf("---|---|\n");
  bool all_correct = true;
  for (const Row& row : rows) {
    const double factor = (AllReduceMode() ? 2.0 : 1.0) *
                          (row.world_size - 1.0) / row.world_size;
    std::printf("| %d | %lld |", row.world_size, static_cast<long long>(row.bytes));
    size_t fastest = 0;
    for (size_t v = 0; v < variants.size(); ++v) {
      std::printf(" %.0f (%.2f) |", row.seconds[v] * 1e6,
                  row.bytes * factor / row.seconds[v] / 1e9);
      // "auto" is the default, not a contender.
      if (variants[v].label != "auto" && row.seconds[v] < row.seconds[fastest]) {
        fastest = v;
      }
    }
    std::printf(" %s | %s |\n", variants[fastest].label.c_str(),
                row.correct ? "yes" : "WRONG");
    all_correct = all_correct && row.correct;
  }
  if (reduce_scatter && absl::GetFlag(FLAGS_breakdown)) {
    std::printf(
        "\nwhere reduce_scatter's time went, us per call (mean over ranks and "
        "timed calls): in flight = local reduce + (chunked) receive wait + "
        "send wait + the rest (posting messages, which also writes them to "
        "the socket)\n| n | S (bytes) | algorithm | in flight | local reduce "
        "| receive wait | send wait | rest |\n|---|---|---|---|---|---|---|---|\n");
    for (const Row& row : rows) {
      for (size_t v = 0; v < variants.size(); ++v) {
        if (variants[v].label == "auto" || variants[v].exchange_only) continue;
        const std::array<double, 4>& p = row.phases[v];
        std::printf("| %d | %lld | %s | %.0f | %.0f | %.0f | %.0f | %.0f |\n",
                    row.world_size, static_cast<long long>(row.bytes),
                    variants[v].label.c_str(), p[0] * 1e6, p[1] * 1e6, p[2] * 1e6,
                    p[3] * 1e6, (p[0] - p[1] - p[2] - p[3]) * 1e6);
      }
    }
  }
  std::printf("algorithms at the largest size:");
  for (const std::string& name : rows.back().algorithm) {
    std::printf(" [%s]", name.c_str());
  }
  std::printf("\n");
  return all_correct ? kExitOk : kExitFailure;
}

}  // namespace
}  // namespace mtb::collective

int main(int argc, char** argv) { return mtb::collective::Main(argc, argv); }
