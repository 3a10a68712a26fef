// Which blocks each pipeline stage runs (docs/pipeline.md "Stages").
// Torch-free.
//
// Stage s runs blocks [first_block, end_block); stage 0 also runs the token
// and position embeddings, the last stage the final LayerNorm, the LM head and
// the loss. The head is tied to the token embedding, so the last stage holds
// a copy of it too (its gradient is summed with stage 0's every step). A
// stage's *load* is the parameters it holds: its blocks, plus the
// embeddings on stage 0 and the final LayerNorm and the head's copy of the
// token embedding on the last.
#ifndef MTB_TRAINER_PIPELINE_PARTITION_H_
#define MTB_TRAINER_PIPELINE_PARTITION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb::pipeline {

// Parameter counts of the model's parts.
struct PartSizes {
  int64_t blocks = 0;           // number of blocks (layers)
  int64_t block = 0;            // parameters of one block
  int64_t embeddings = 0;       // token + position embedding (stage 0)
  int64_t head = 0;             // final LayerNorm + the tied head's copy of
                                // the token embedding (last stage)
};

// GPT sizes (trainer/model/model.h): a block holds 12 D^2 + 13 D, the embeddings
// V D + T D, the head 2 D + V D.
PartSizes GptPartSizes(int64_t vocab_size, int64_t d_model, int64_t n_layers,
                       int64_t seq_len);

struct StageBlocks {
  int64_t first_block = 0;
  int64_t end_block = 0;  // exclusive
  int64_t load = 0;       // parameters held (see the file comment)
};

// "4,2" -> {4, 2}; kInvalidArgument naming --pp_split for anything else than
// positive integers separated by commas.
absl::StatusOr<std::vector<int64_t>> ParseSplit(absl::string_view split);

// The blocks of each of `stages` stages, in order, every stage at least one
// block. With `split` empty: the contiguous split that minimises the largest
// load (ties: later stages take more blocks), so the embeddings' and the head's
// stages take fewer blocks. With `split`: split[s] blocks on stage s.
// kInvalidArgument, naming the flag and the arithmetic, when stages < 1,
// stages > blocks, or split has not `stages` entries summing to the blocks.
absl::StatusOr<std::vector<StageBlocks>> PartitionStages(
    const PartSizes& sizes, int stages, const std::vector<int64_t>& split);

// "blocks 0-1 (36.9k), blocks 2-3 (40.1k)": for logs.
std::string DescribePartition(const std::vector<StageBlocks>& partition);

}  // namespace mtb::pipeline

#endif  // MTB_TRAINER_PIPELINE_PARTITION_H_
