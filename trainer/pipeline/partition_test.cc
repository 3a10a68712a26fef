#include "trainer/pipeline/partition.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "gtest/gtest.h"

namespace mtb::pipeline {
namespace {

std::vector<int64_t> BlockCounts(const std::vector<StageBlocks>& partition) {
  std::vector<int64_t> counts;
  for (const StageBlocks& stage : partition) {
    counts.push_back(stage.end_block - stage.first_block);
  }
  return counts;
}

int64_t LargestLoad(const std::vector<StageBlocks>& partition) {
  int64_t largest = 0;
  for (const StageBlocks& stage : partition) {
    largest = std::max(largest, stage.load);
  }
  return largest;
}

TEST(Partition, GptSizesCountEveryParameter) {
  // vocab 256, width 64, 2 layers, seq 32: the tiny model's 136,832.
  const PartSizes sizes = GptPartSizes(256, 64, 2, 32);
  EXPECT_EQ(sizes.block, 12 * 64 * 64 + 13 * 64);
  // Every parameter once, plus the head's copy of the token embedding.
  EXPECT_EQ(sizes.embeddings + 2 * sizes.block + sizes.head - 256 * 64,
            256 * 64 + 32 * 64 + 2 * (12 * 64 * 64 + 13 * 64) + 2 * 64);
}

// With a large vocabulary the embedding and head stages take fewer blocks:
// vocab 4096 at width 64 is ~5.3 blocks on each end.
TEST(Partition, EmbeddingAndHeadStagesTakeFewerBlocks) {
  const PartSizes sizes = GptPartSizes(4096, 64, 6, 32);
  const std::vector<StageBlocks> partition =
      PartitionStages(sizes, 3, {}).value();
  EXPECT_EQ(BlockCounts(partition), (std::vector<int64_t>{1, 4, 1}));
  EXPECT_EQ(partition[0].first_block, 0);
  EXPECT_EQ(partition[1].first_block, 1);
  EXPECT_EQ(partition[2].end_block, 6);
  EXPECT_EQ(partition[0].load, sizes.embeddings + sizes.block);
  EXPECT_EQ(partition[1].load, 4 * sizes.block);
  EXPECT_EQ(partition[2].load, sizes.block + sizes.head);
}

TEST(Partition, EqualPartsTieTowardsLaterStages) {
  PartSizes sizes;
  sizes.blocks = 5;
  sizes.block = 10;
  EXPECT_EQ(BlockCounts(PartitionStages(sizes, 2, {}).value()),
            (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(BlockCounts(PartitionStages(sizes, 5, {}).value()),
            (std::vector<int64_t>{1, 1, 1, 1, 1}));
  EXPECT_EQ(BlockCounts(PartitionStages(sizes, 1, {}).value()),
            (std::vector<int64_t>{5}));
}

// The dynamic programme's largest load equals the best of every contiguous
// split, enumerated, over awkward sizes.
TEST(Partition, BalancedSplitIsOptimalAgainstEnumeration) {
  for (int64_t blocks = 1; blocks <= 8; ++blocks) {
    for (int stages = 1; stages <= std::min<int64_t>(blocks, 4); ++stages) {
      for (int64_t embeddings : {0, 7, 25, 61}) {
        for (int64_t head : {0, 13, 40}) {
          PartSizes sizes{blocks, 10, embeddings, head};
          int64_t best = std::numeric_limits<int64_t>::max();
          std::vector<int64_t> counts(stages, 0);
          std::function<void(int, int64_t)> enumerate = [&](int s,
                                                            int64_t left) {
            if (s == stages - 1) {
              counts[s] = left;
              if (left < 1) return;
              best = std::min(best,
                              LargestLoad(PartitionStages(sizes, stages, counts)
                                              .value()));
              return;
            }
            for (int64_t c = 1; c <= left - (stages - 1 - s); ++c) {
              counts[s] = c;
              enumerate(s + 1, left - c);
            }
          };
          enumerate(0, blocks);
          EXPECT_EQ(LargestLoad(PartitionStages(sizes, stages, {}).value()),
                    best)
              << "blocks " << blocks << " stages " << stages << " embeddings "
              << embeddings << " head " << head;
        }
      }
    }
  }
}

TEST(Partition, ExplicitSplitIsTakenAsGiven) {
  const PartSizes sizes = GptPartSizes(256, 64, 4, 32);
  const std::vector<StageBlocks> partition =
      PartitionStages(sizes, 2, ParseSplit("3,1").value()).value();
  EXPECT_EQ(BlockCounts(partition), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(partition[1].first_block, 3);
}

TEST(Partition, MoreStagesThanBlocksIsRefused) {
  const absl::StatusOr<std::vector<StageBlocks>> partition =
      PartitionStages(GptPartSizes(256, 64, 2, 32), 3, {});
  EXPECT_EQ(partition.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(partition.status().message(),
            "--pp=3 must be between 1 and --n_layers=2 (every stage runs at "
            "least one block)");
}

TEST(Partition, SplitNotSummingToTheLayersIsRefused) {
  const PartSizes sizes = GptPartSizes(256, 64, 4, 32);
  absl::StatusOr<std::vector<StageBlocks>> partition =
      PartitionStages(sizes, 2, {2, 1});
  EXPECT_EQ(partition.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(partition.status().message(),
            "--pp_split=2,1 has 2 stage(s) summing to 3 blocks; --pp=2 and "
            "--n_layers=4 need 2 stages summing to 4");
  partition = PartitionStages(sizes, 2, {1, 1, 2});
  EXPECT_EQ(partition.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Partition, SplitThatIsNotPositiveIntegersIsRefused) {
  for (const char* bad : {"2,0", "a,2", "2,,2", "", "-1,5"}) {
    const absl::StatusOr<std::vector<int64_t>> split = ParseSplit(bad);
    EXPECT_EQ(split.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_NE(split.status().message().find("--pp_split="), std::string::npos);
  }
}

}  // namespace
}  // namespace mtb::pipeline
