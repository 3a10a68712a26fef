#include "comm_bench/options.h"

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/results/atomic_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb::comm_bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Resolving `flags` at `world_size` fails with kInvalidArgument naming `flag`.
void ExpectRejected(const FlagValues& flags, int world_size,
                    const std::string& flag, const std::string& rule) {
  absl::StatusOr<SweepOptions> options = ResolveOptions(flags, world_size);
  ASSERT_FALSE(options.ok()) << flag;
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(options.status().message()), HasSubstr("--" + flag + "="));
  EXPECT_THAT(std::string(options.status().message()), HasSubstr(rule));
}

TEST(ResolveOptions, DefaultsAreTheIssuesSweep) {
  absl::StatusOr<SweepOptions> options = ResolveOptions(FlagValues(), 2);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->ops.size(), 6u);
  EXPECT_EQ(options->min_bytes, 1024);
  EXPECT_EQ(options->max_bytes, 64 << 20);
  EXPECT_EQ(options->step_factor, 2);
  EXPECT_EQ(options->iters, 20);
  EXPECT_EQ(options->warmup_iters, 5);
  EXPECT_TRUE(options->check);
}

TEST(ResolveOptions, ParsesSizesOpsAndTypes) {
  FlagValues flags;
  flags.ops = "all_gather, broadcast";
  flags.minbytes = "3M";
  flags.maxbytes = "1G";
  flags.stepfactor = 4;
  flags.dtype = "bfloat16";
  flags.op = "max";
  flags.root = 2;
  flags.check = 0;
  absl::StatusOr<SweepOptions> options = ResolveOptions(flags, 3);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_THAT(options->ops, ElementsAre("all_gather", "broadcast"));
  EXPECT_EQ(options->min_bytes, 3 << 20);
  EXPECT_EQ(options->max_bytes, int64_t{1} << 30);
  EXPECT_EQ(options->dtype, DType::kBFloat16);
  EXPECT_EQ(options->redop, RedOp::kMax);
  EXPECT_EQ(options->root, 2);
  EXPECT_FALSE(options->check);
}

TEST(ResolveOptions, BadInputNamesTheFlagAndTheRule) {
  FlagValues flags;
  flags.minbytes = "abc";
  ExpectRejected(flags, 2, "minbytes", "whole number of bytes");
  flags = FlagValues();
  flags.minbytes = "0";
  ExpectRejected(flags, 2, "minbytes", "must be > 0");
  flags = FlagValues();
  flags.maxbytes = "-1M";
  ExpectRejected(flags, 2, "maxbytes", "negative");
  flags = FlagValues();
  flags.minbytes = "2M";
  flags.maxbytes = "1M";
  ExpectRejected(flags, 2, "maxbytes", "must be >= --minbytes=2M");
  flags = FlagValues();
  flags.stepfactor = 1;
  ExpectRejected(flags, 2, "stepfactor", "must be > 1");
  flags = FlagValues();
  flags.iters = 0;
  ExpectRejected(flags, 2, "iters", ">= 1");
  flags = FlagValues();
  flags.warmup_iters = -1;
  ExpectRejected(flags, 2, "warmup_iters", ">= 0");
  flags = FlagValues();
  flags.ops = "all_reduce,all_scatter";
  ExpectRejected(flags, 2, "ops", "unknown collective 'all_scatter'");
  flags = FlagValues();
  flags.ops = "all_reduce,all_reduce";
  ExpectRejected(flags, 2, "ops", "listed twice");
  flags = FlagValues();
  flags.ops = " , ";
  ExpectRejected(flags, 2, "ops", "names no collective");
  flags = FlagValues();
  flags.dtype = "float16";
  ExpectRejected(flags, 2, "dtype", "float32 or bfloat16");
  flags = FlagValues();
  flags.op = "prod";
  ExpectRejected(flags, 2, "op", "sum or max");
  flags = FlagValues();
  flags.root = 2;
  ExpectRejected(flags, 2, "root", "must be a rank in [0, 1]");
  flags = FlagValues();
  flags.check = 2;
  ExpectRejected(flags, 2, "check", "1 (check) or 0");
  flags = FlagValues();
  flags.min_busbw = -1;
  ExpectRejected(flags, 2, "min_busbw", ">= 0");
  flags = FlagValues();
  flags.imbalance = "zipf:-2";
  ExpectRejected(flags, 2, "imbalance", "Zipf exponent");
  flags = FlagValues();
  flags.testonly_corrupt = "all_reduce:5";
  ExpectRejected(flags, 2, "testonly_corrupt", "OP:RANK");
}

TEST(ResolveOptions, SplitMatrixIsReadValidatedAndExclusive) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/split.txt";
  ASSERT_TRUE(WriteFileAtomically(path, "0 8\n16 4\n").ok());
  FlagValues flags;
  flags.split_matrix = path;
  absl::StatusOr<SweepOptions> options = ResolveOptions(flags, 2);
  ASSERT_TRUE(options.ok()) << options.status();
  ASSERT_TRUE(options->all_to_allv.matrix_bytes.has_value());
  EXPECT_THAT((*options->all_to_allv.matrix_bytes)[1], ElementsAre(16, 4));
  // Wrong shape for 3 ranks; bf16 fine, 6-byte entries not for float32.
  ExpectRejected(flags, 3, "split_matrix", "row 0 has 2 entries, expected 3");
  flags.imbalance_was_set = true;
  ExpectRejected(flags, 2, "split_matrix", "alternatives");
  flags.imbalance_was_set = false;
  flags.ops = "all_reduce";
  ExpectRejected(flags, 2, "split_matrix", "add all_to_allv to --ops");
  flags = FlagValues();
  flags.split_matrix = "/nonexistent/split.txt";
  ExpectRejected(flags, 2, "split_matrix", "/nonexistent/split.txt");
}

TEST(ResolveOptions, OutputsThatCollideWithEachOtherOrAnInputAreRefused) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/collide";
  const std::string matrix = dir + "/split.txt";
  ASSERT_TRUE(WriteFileAtomically(matrix, "0 8\n16 4\n").ok());
  FlagValues flags;
  flags.out = dir + "/r.json";
  flags.markdown = dir + "/sub/../r.json";
  ExpectRejected(flags, 2, "markdown", "are the same file: one would overwrite the other");
  flags.markdown = dir + "/r.md";
  flags.plot = dir + "/r.md";
  ExpectRejected(flags, 2, "plot", "are the same file");
  flags.plot = dir + "/r.svg";
  flags.trace_dir = dir;
  flags.out = dir + "/rank_1.trace.json";
  ExpectRejected(flags, 2, "out", "rank 1's trace in --trace_dir");
  flags.out = dir + "/r.json";
  flags.split_matrix = matrix;
  flags.plot = dir + "/./split.txt";
  ExpectRejected(flags, 2, "plot", "is the same file as --split_matrix");
  EXPECT_EQ(*ReadFileToString(matrix), "0 8\n16 4\n") << "the input is intact";
  flags.plot = dir + "/r.svg";
  EXPECT_TRUE(ResolveOptions(flags, 2).ok());
}

TEST(ResolveOptions, SplitMatrixWithAnExplicitSizeRangeSaysWhichWins) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/split2.txt";
  ASSERT_TRUE(WriteFileAtomically(path, "0 8\n16 4\n").ok());
  FlagValues flags;
  flags.split_matrix = path;
  absl::StatusOr<SweepOptions> quiet = ResolveOptions(flags, 2);
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  EXPECT_TRUE(quiet->notes.empty());
  flags.size_range_was_set = true;
  absl::StatusOr<SweepOptions> all_ops = ResolveOptions(flags, 2);
  ASSERT_TRUE(all_ops.ok()) << all_ops.status();
  EXPECT_THAT(all_ops->notes,
              ElementsAre("--split_matrix wins for all_to_allv (its one size "
                          "comes from the matrix); --minbytes/--maxbytes/"
                          "--stepfactor sweep the other ops"));
  flags.ops = "all_to_allv";
  absl::StatusOr<SweepOptions> only = ResolveOptions(flags, 2);
  ASSERT_TRUE(only.ok()) << only.status();
  ASSERT_EQ(only->notes.size(), 1u);
  EXPECT_NE(only->notes[0].find("change nothing here"), std::string::npos);
}

TEST(ResolveFaults, StepsAreSweepPointsAndPhasesTheirOps) {
  FlagValues flags;
  flags.ops = "all_reduce,all_gather";
  flags.minbytes = "1K";
  flags.maxbytes = "4K";
  flags.stepfactor = 4;  // points: all_reduce 1K, 4K; all_gather 1K, 4K
  const SweepOptions options = *ResolveOptions(flags, 2);
  flags.fault = "kill:rank=1,step=3,phase=all_gather;hang:rank=0,step=2;slow:rank=1,ms=5";
  absl::StatusOr<std::vector<Fault>> faults = ResolveFaults(flags, options, 2, TimeoutOptions());
  ASSERT_TRUE(faults.ok()) << faults.status();
  EXPECT_EQ(faults->size(), 3u);
  flags.fault = "";
  EXPECT_TRUE(ResolveFaults(flags, options, 2, TimeoutOptions())->empty());
  // Each way a spec can be wrong: one line naming it.
  for (const auto& [spec, message] : std::vector<std::pair<std::string, std::string>>{
           {"kill:rank=1,step=3", "'kill:rank=1,step=3' lacks phase (kill needs rank, step, phase)"},
           {"nan:rank=0,step=1", "'nan' is not a fault comm_bench injects (kill, hang, slow, "
                                 "exit): it has no loss to make NaN"},
           {"kill:rank=0,step=1,phase=forward",
            "'forward' is not a phase (all_reduce, all_gather, reduce_scatter, broadcast, "
            "all_to_all, all_to_allv)"},
           {"kill:rank=1,step=1,phase=all_gather",
            "sweep point 1 runs all_reduce, not all_gather (1-2 all_reduce, 3-4 all_gather)"},
           {"hang:rank=0,step=5", "sweep point 5 is after the last sweep point 4"},
           {"exit:rank=2,step=1,code=3", "rank 2 is not a rank of the world size 2"},
       }) {
    flags.fault = spec;
    const absl::StatusOr<std::vector<Fault>> refused = ResolveFaults(flags, options, 2, TimeoutOptions());
    ASSERT_FALSE(refused.ok()) << spec;
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_THAT(std::string(refused.status().message()),
                HasSubstr("--fault=" + spec.substr(0, spec.find(':')))) << spec;
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr(message)) << spec;
  }
}

// A slow fault is checked against the timeout it runs under, as the
// trainer's are: the first sweep point's is --first_step_timeout, every
// later one's --collective_timeout.
TEST(ResolveFaults, ASlowFaultMustStayShorterThanTheTimeoutItRunsUnder) {
  FlagValues flags;
  flags.ops = "all_reduce,all_gather";
  flags.minbytes = "1K";
  flags.maxbytes = "4K";
  flags.stepfactor = 4;  // 4 points
  const SweepOptions options = *ResolveOptions(flags, 2);
  TimeoutOptions timeouts;
  timeouts.first_step_timeout = absl::Seconds(10);
  timeouts.collective_timeout = absl::Seconds(3);
  flags.fault = "slow:rank=1,ms=2999";  // every point, below both
  EXPECT_TRUE(ResolveFaults(flags, options, 2, timeouts).ok());
  flags.fault = "slow:rank=1,ms=3000";
  EXPECT_EQ(ResolveFaults(flags, options, 2, timeouts).status().message(),
            "--fault=slow:rank=1,ms=3000: the delay 3s is not shorter than "
            "--collective_timeout=3s: the other ranks would time out waiting for rank 1 (a "
            "slow rank is not a hung one: hang: tests a timeout)");
  flags.fault = "slow:rank=1,ms=5000,every=4";  // point 4 only: steady state
  EXPECT_THAT(std::string(ResolveFaults(flags, options, 2, timeouts).status().message()),
              HasSubstr("not shorter than --collective_timeout=3s"));
  flags.fault = "slow:rank=1,ms=5000,every=5";
  EXPECT_THAT(std::string(ResolveFaults(flags, options, 2, timeouts).status().message()),
              HasSubstr("every=5 fires on none of the run's 4 sweep points"));
  // With the default timeouts (minutes) the same 5 s fault is slow, not hung.
  flags.fault = "slow:rank=1,ms=5000,every=4";
  EXPECT_TRUE(ResolveFaults(flags, options, 2, TimeoutOptions()).ok());
}

TEST(ResolveTraceWindow, StepsAreSweepPointsAndBadWindowsNameTheFlag) {
  FlagValues flags;
  flags.ops = "all_reduce,all_gather";
  flags.minbytes = "1K";
  flags.maxbytes = "4K";
  flags.stepfactor = 4;  // 4 points: all_reduce 1K, 4K; all_gather 1K, 4K
  const SweepOptions options = *ResolveOptions(flags, 2);
  const absl::StatusOr<trace::TraceWindow> every = ResolveTraceWindow(flags, options, 2);
  ASSERT_TRUE(every.ok()) << every.status();
  EXPECT_TRUE(every->Contains(1));
  EXPECT_TRUE(every->Contains(4));
  flags.trace_dir = "traces";
  flags.trace_steps = "2:4";
  const absl::StatusOr<trace::TraceWindow> window = ResolveTraceWindow(flags, options, 2);
  ASSERT_TRUE(window.ok()) << window.status();
  EXPECT_EQ(window->first, 2);
  EXPECT_EQ(window->last, 4);
  for (const auto& [steps, dir, message] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"2:5", "traces", "--trace_steps=2:5 must be A:B with 1 <= A <= B <= 4 (the sweep's points)"},
           {"0:1", "traces", "--trace_steps=0:1 must be A:B"},
           {"3", "traces", "--trace_steps=3 must be A:B"},
           {"1:2", "", "--trace_steps needs --trace_dir"},
       }) {
    flags.trace_steps = steps;
    flags.trace_dir = dir;
    const absl::StatusOr<trace::TraceWindow> refused = ResolveTraceWindow(flags, options, 2);
    ASSERT_FALSE(refused.ok()) << steps;
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << steps;
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr(message)) << steps;
  }
}

}  // namespace
}  // namespace mtb::comm_bench
