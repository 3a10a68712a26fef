#include "comm_bench/collective.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb::comm_bench {
namespace {

using ::testing::ElementsAre;

std::unique_ptr<Collective> Make(const std::string& name,
                                 const AllToAllvPattern& pattern = {}) {
  absl::StatusOr<std::unique_ptr<Collective>> op = MakeCollective(name, pattern);
  CHECK(op.ok()) << op.status();
  return *std::move(op);
}

CallContext Context(int rank, int world_size, DType dtype = DType::kFloat32) {
  CallContext context;
  context.rank = rank;
  context.world_size = world_size;
  context.dtype = dtype;
  return context;
}

TEST(BusBandwidthFactor, MatchesNcclTestsForTwoThreeAndEightRanks) {
  // Hand-computed: all_reduce 2(n-1)/n; all_gather, reduce_scatter,
  // all_to_all(v) (n-1)/n; broadcast 1.
  struct Case {
    const char* op;
    double n2, n3, n8;
  };
  for (const Case& c : {Case{"all_reduce", 1.0, 4.0 / 3, 1.75},
                        Case{"all_gather", 0.5, 2.0 / 3, 0.875},
                        Case{"reduce_scatter", 0.5, 2.0 / 3, 0.875},
                        Case{"all_to_all", 0.5, 2.0 / 3, 0.875},
                        Case{"all_to_allv", 0.5, 2.0 / 3, 0.875},
                        Case{"broadcast", 1.0, 1.0, 1.0}}) {
    std::unique_ptr<Collective> op = Make(c.op);
    EXPECT_DOUBLE_EQ(op->BusBandwidthFactor(2), c.n2) << c.op;
    EXPECT_DOUBLE_EQ(op->BusBandwidthFactor(3), c.n3) << c.op;
    EXPECT_DOUBLE_EQ(op->BusBandwidthFactor(8), c.n8) << c.op;
  }
}

TEST(AlgorithmBandwidth, IsBytesOver1e9PerSecond) {
  // 1 MiB in 100 us: 1048576 / 1e9 / 1e-4 = 10.48576 GB/s; an all_reduce at
  // n = 3 then has busbw 10.48576 * 4/3 = 13.98101...
  EXPECT_DOUBLE_EQ(AlgorithmBandwidth(1 << 20, 100e-6), 10.48576);
  EXPECT_NEAR(AlgorithmBandwidth(1 << 20, 100e-6) *
                  Make("all_reduce")->BusBandwidthFactor(3),
              13.981013333, 1e-8);
  // 64 MiB all_gather at n = 8 in 10 ms: algbw 6.7108864, busbw x 7/8.
  EXPECT_NEAR(AlgorithmBandwidth(64 << 20, 10e-3) *
                  Make("all_gather")->BusBandwidthFactor(8),
              5.8720256, 1e-9);
}

TEST(Shape, ShardedOpsRoundPerRankCountsDownAsNcclTestsAtThreeRanks) {
  for (const char* name : {"all_gather", "reduce_scatter", "all_to_all"}) {
    std::unique_ptr<Collective> op = Make(name);
    // 1K float: 256 elements / 3 = 85 per rank, down to a multiple of 4
    // (16 bytes) = 84; S = 84 * 3 * 4.
    CallShape one_k = op->Shape(1024, Context(0, 3));
    EXPECT_EQ(one_k.count, 84) << name;
    EXPECT_EQ(one_k.bytes, 1008) << name;
    // 3M divides by 3 x 16 bytes: unchanged.
    CallShape three_m = op->Shape(3 << 20, Context(0, 3));
    EXPECT_EQ(three_m.count, 262144) << name;
    EXPECT_EQ(three_m.bytes, 3 << 20) << name;
    // 64M: 16777216 / 3 = 5592405 -> 5592404 per rank; S = 67108848.
    CallShape sixty_four_m = op->Shape(64 << 20, Context(0, 3));
    EXPECT_EQ(sixty_four_m.count, 5592404) << name;
    EXPECT_EQ(sixty_four_m.bytes, 67108848) << name;
    EXPECT_EQ(sixty_four_m.bytes % (3 * 4), 0);
    // bf16: 512 elements / 3 = 170 -> 168 (multiple of 8 = 16 bytes).
    CallShape bf16 = op->Shape(1024, Context(0, 3, DType::kBFloat16));
    EXPECT_EQ(bf16.count, 168) << name;
    EXPECT_EQ(bf16.bytes, 1008) << name;
    // Too small: 32 B = 8 floats, 2 per rank, 0 after alignment.
    EXPECT_EQ(op->Shape(32, Context(0, 3)).bytes, 0) << name;
  }
}

TEST(Shape, AllReduceAndBroadcastKeepTheWholeBufferAsNcclTests) {
  for (const char* name : {"all_reduce", "broadcast"}) {
    CallShape shape = Make(name)->Shape(1024, Context(0, 3));
    EXPECT_EQ(shape.count, 256) << name;
    EXPECT_EQ(shape.bytes, 1024) << name;
    EXPECT_EQ(Make(name)->Shape(1023, Context(0, 3)).bytes, 1020) << name;
  }
}

TEST(Shape, InPlaceOffsetsAreNcclTestsRankBlocks) {
  CallShape gather = Make("all_gather")->Shape(3 << 20, Context(2, 3));
  EXPECT_EQ(gather.in_place_input_offset, 2 * gather.count);
  EXPECT_EQ(gather.in_place_output_offset, 0);
  CallShape scatter = Make("reduce_scatter")->Shape(3 << 20, Context(2, 3));
  EXPECT_EQ(scatter.in_place_input_offset, 0);
  EXPECT_EQ(scatter.in_place_output_offset, 2 * scatter.count);
  EXPECT_FALSE(Make("all_to_all")->supports_in_place());
  EXPECT_FALSE(Make("all_to_allv")->supports_in_place());
}

TEST(Shape, AllToAllvBottleneckIsTheBusiestRank) {
  AllToAllvPattern pattern;
  pattern.skew = {Skew::Kind::kLinear, 0};
  // 1K float at 3 ranks: 84 per peer, 252 per rank split 1:2:3 = 42, 84, 126;
  // rank 2 receives 3 x 126 = 378 elements = 1512 bytes.
  CallShape shape = Make("all_to_allv", pattern)->Shape(1024, Context(1, 3));
  EXPECT_EQ(shape.count, 84);
  EXPECT_THAT(shape.send_counts, ElementsAre(42, 84, 126));
  EXPECT_THAT(shape.recv_counts, ElementsAre(84, 84, 84));
  EXPECT_THAT(shape.send_bytes_per_rank, ElementsAre(1008, 1008, 1008));
  EXPECT_THAT(shape.recv_bytes_per_rank, ElementsAre(504, 1008, 1512));
  EXPECT_EQ(shape.bottleneck_rank, 2);
  EXPECT_EQ(shape.bytes, 1512);
  EXPECT_EQ(shape.bandwidth_bytes, 1512);
  // Uniform: the same figures as all_to_all.
  CallShape uniform = Make("all_to_allv")->Shape(1024, Context(0, 3));
  CallShape equal = Make("all_to_all")->Shape(1024, Context(0, 3));
  EXPECT_EQ(uniform.bytes, equal.bytes);
  EXPECT_EQ(uniform.count, equal.count);
}

TEST(Shape, AllToAllvFromAMatrixUsesItsBytesAndOneSize) {
  AllToAllvPattern pattern;
  pattern.matrix_bytes = SplitMatrix{{0, 8}, {16, 4}};
  std::unique_ptr<Collective> op = Make("all_to_allv", pattern);
  EXPECT_THAT(op->SweepSizes(1024, 1 << 20, 2), ElementsAre(1024));
  CallShape shape = op->Shape(1024, Context(0, 2));
  EXPECT_THAT(shape.send_counts, ElementsAre(0, 2));
  EXPECT_THAT(shape.recv_counts, ElementsAre(0, 4));
  // Rank 1 sends 20 bytes; it is the bottleneck.
  EXPECT_EQ(shape.bottleneck_rank, 1);
  EXPECT_EQ(shape.bytes, 20);
}

TEST(SweepSizes, FollowNcclTestsLoop) {
  std::unique_ptr<Collective> op = Make("all_reduce");
  EXPECT_EQ(op->SweepSizes(1024, 64 << 20, 2).size(), 17u);
  EXPECT_THAT(op->SweepSizes(1024, 3 << 20, 4),
              ElementsAre(1024, 4096, 16384, 65536, 262144, 1048576));
  EXPECT_THAT(op->SweepSizes(1000, 1000, 2), ElementsAre(1000));
  // No overflow at the top of the range.
  EXPECT_EQ(op->SweepSizes(int64_t{1} << 61, int64_t{1} << 62, 3).size(), 1u);
}

// `value` rounded to `dtype`, as a backend storing it would.
float RoundTo(DType dtype, float value) {
  return dtype == DType::kFloat32 ? value
                                  : BFloat16ToFloat(FloatToBFloat16(value));
}

TEST(PatternRange, FollowsEachDtypesExactIntegerRange) {
  EXPECT_EQ(ExactIntegerLimit(DType::kFloat32), 1 << 24);
  EXPECT_EQ(ExactIntegerLimit(DType::kBFloat16), 1 << 8);
  // Reductions: [0, floor(L / n)], i.e. modulus floor(L / n) + 1.
  EXPECT_EQ(PatternRangeFor(DType::kBFloat16, 1, true).modulus, 257);
  EXPECT_EQ(PatternRangeFor(DType::kBFloat16, 3, true).modulus, 86);
  EXPECT_EQ(PatternRangeFor(DType::kBFloat16, 256, true).modulus, 2);
  EXPECT_EQ(PatternRangeFor(DType::kBFloat16, 256, true).stride, 1);
  EXPECT_EQ(PatternRangeFor(DType::kFloat32, 256, true).modulus, 65537);
  // Beyond L ranks: 1000 bf16 ranks, stride 4, 250 contributors, {0, 1}.
  EXPECT_EQ(PatternRangeFor(DType::kBFloat16, 1000, true).stride, 4);
  EXPECT_EQ(PatternRangeFor(DType::kBFloat16, 1000, true).modulus, 2);
  // Copy-only collectives keep the whole range at any world size.
  EXPECT_EQ(PatternRangeFor(DType::kBFloat16, 256, false).modulus, 256);
  EXPECT_EQ(PatternRangeFor(DType::kFloat32, 1000, false).modulus, 1 << 24);
}

// The check is meaningful at any world size: at 256 ranks (and beyond the
// bf16 range, at 1000) a reduction's inputs still take more than one value,
// and the sum over every rank, rounded to the dtype after each addition in
// either order, equals the exact integer sum.
TEST(PatternValue, ReductionSumsStayExactInEitherOrderAtAnyWorldSize) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (int world_size : {1, 2, 3, 8, 256, 1000}) {
      SCOPED_TRACE(absl::StrCat(DTypeName(dtype), " at ", world_size));
      const PatternRange range = PatternRangeFor(dtype, world_size, true);
      std::set<float> seen;
      for (int64_t i = 0; i < 200; ++i) {
        int64_t exact = 0;
        float forward = 0;
        float backward = 0;
        for (int rank = 0; rank < world_size; ++rank) {
          const float value = PatternValue(range, 7, rank, i);
          ASSERT_EQ(RoundTo(dtype, value), value);
          ASSERT_EQ(value, std::floor(value));
          ASSERT_GE(value, 0);
          ASSERT_LT(value, range.modulus);
          seen.insert(value);
          exact += static_cast<int64_t>(value);
          forward = RoundTo(dtype, forward + value);
          backward = RoundTo(dtype, backward + PatternValue(range, 7,
                                                            world_size - 1 - rank, i));
        }
        ASSERT_LE(exact, ExactIntegerLimit(dtype));
        ASSERT_EQ(forward, static_cast<float>(exact)) << "element " << i;
        ASSERT_EQ(backward, static_cast<float>(exact)) << "element " << i;
      }
      EXPECT_GT(seen.size(), 1u);
    }
  }
}

TEST(PatternValue, CopyOnlyValuesUseTheWholeExactRange) {
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    const PatternRange range = PatternRangeFor(dtype, 256, false);
    float max_seen = 0;
    for (int64_t i = 0; i < 5000; ++i) {
      const float value = PatternValue(range, 3, 255, i);
      EXPECT_EQ(RoundTo(dtype, value), value);
      EXPECT_LT(value, ExactIntegerLimit(dtype));
      max_seen = std::max(max_seen, value);
    }
    // 5000 draws from [0, L): the largest is near the top.
    EXPECT_GT(max_seen, ExactIntegerLimit(dtype) / 2) << DTypeName(dtype);
  }
}

TEST(PatternValue, SeedsRanksAndNeighboursDiffer) {
  const PatternRange range = PatternRangeFor(DType::kFloat32, 2, true);
  int differences = 0;
  for (int64_t i = 0; i < 100; ++i) {
    differences += PatternValue(range, 1, 0, i) != PatternValue(range, 2, 0, i);
    differences += PatternValue(range, 1, 0, i) != PatternValue(range, 1, 1, i);
    differences +=
        PatternValue(range, 1, 0, i) != PatternValue(range, 1, 0, i + 1);
  }
  EXPECT_GT(differences, 250);
}

TEST(MakeCollective, UnknownNameIsInvalidArgument) {
  absl::StatusOr<std::unique_ptr<Collective>> op = MakeCollective("all_scatter", {});
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mtb::comm_bench
