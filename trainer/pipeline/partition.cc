// Balanced contiguous partition by dynamic programming over (stage, blocks
// placed): best[s][k] is the smallest largest load of stages 0..s holding
// blocks 0..k-1; the last stage's load adds the head, stage 0's the
// embeddings. O(stages x blocks^2), for at most a few hundred blocks.
#include "trainer/pipeline/partition.h"

#include <algorithm>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace mtb::pipeline {
namespace {

int64_t LoadOf(const PartSizes& sizes, int stage, int stages, int64_t blocks) {
  int64_t load = blocks * sizes.block;
  if (stage == 0) load += sizes.embeddings;
  if (stage == stages - 1) load += sizes.head;
  return load;
}

}  // namespace

PartSizes GptPartSizes(int64_t vocab_size, int64_t d_model, int64_t n_layers,
                       int64_t seq_len) {
  PartSizes sizes;
  sizes.blocks = n_layers;
  sizes.block = 12 * d_model * d_model + 13 * d_model;
  sizes.embeddings = vocab_size * d_model + seq_len * d_model;
  sizes.head = 2 * d_model + vocab_size * d_model;
  return sizes;
}

absl::StatusOr<std::vector<int64_t>> ParseSplit(absl::string_view split) {
  std::vector<int64_t> counts;
  for (absl::string_view part : absl::StrSplit(split, ',')) {
    int64_t count = 0;
    if (!absl::SimpleAtoi(part, &count) || count < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--pp_split=", split, ": '", part,
          "' is not a positive block count (expected e.g. --pp_split=3,2)"));
    }
    counts.push_back(count);
  }
  return counts;
}

absl::StatusOr<std::vector<StageBlocks>> PartitionStages(
    const PartSizes& sizes, int stages, const std::vector<int64_t>& split) {
  if (stages < 1 || stages > sizes.blocks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--pp=", stages, " must be between 1 and --n_layers=", sizes.blocks,
        " (every stage runs at least one block)"));
  }
  std::vector<int64_t> counts = split;
  if (!counts.empty()) {
    int64_t sum = 0;
    for (int64_t c : counts) sum += c;
    if (static_cast<int>(counts.size()) != stages || sum != sizes.blocks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--pp_split=", absl::StrJoin(counts, ","), " has ", counts.size(),
          " stage(s) summing to ", sum, " blocks; --pp=", stages,
          " and --n_layers=", sizes.blocks, " need ", stages,
          " stages summing to ", sizes.blocks));
    }
  } else {
    const int64_t n = sizes.blocks;
    constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
    // best[s][k], and the blocks stage s takes in it.
    std::vector<std::vector<int64_t>> best(stages,
                                           std::vector<int64_t>(n + 1, kNone));
    std::vector<std::vector<int64_t>> take(stages,
                                           std::vector<int64_t>(n + 1, 0));
    for (int64_t k = 1; k <= n; ++k) {
      best[0][k] = LoadOf(sizes, 0, stages, k);
      take[0][k] = k;
    }
    for (int s = 1; s < stages; ++s) {
      for (int64_t k = s + 1; k <= n; ++k) {
        // Stage s takes blocks [k - c, k); the earlier stages k - c >= s.
        // Larger c first: ties keep the earliest cut point.
        for (int64_t c = k - s; c >= 1; --c) {
          const int64_t before = best[s - 1][k - c];
          if (before == kNone) continue;
          const int64_t worst =
              std::max(before, LoadOf(sizes, s, stages, c));
          if (worst < best[s][k]) {
            best[s][k] = worst;
            take[s][k] = c;
          }
        }
      }
    }
    counts.assign(stages, 0);
    int64_t k = n;
    for (int s = stages - 1; s >= 0; --s) {
      counts[s] = take[s][k];
      k -= counts[s];
    }
  }
  std::vector<StageBlocks> partition;
  int64_t first = 0;
  for (int s = 0; s < stages; ++s) {
    StageBlocks stage;
    stage.first_block = first;
    stage.end_block = first + counts[s];
    stage.load = LoadOf(sizes, s, stages, counts[s]);
    partition.push_back(stage);
    first = stage.end_block;
  }
  return partition;
}

std::string DescribePartition(const std::vector<StageBlocks>& partition) {
  std::vector<std::string> parts;
  for (size_t s = 0; s < partition.size(); ++s) {
    const StageBlocks& stage = partition[s];
    parts.push_back(absl::StrCat("stage ", s, ": blocks ", stage.first_block,
                                 "-", stage.end_block - 1, " (",
                                 stage.load, " parameters)"));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace mtb::pipeline
