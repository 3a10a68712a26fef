// batch_dump: prints one optimizer step's global batch of synthetic tokens as
// JSON, drawn by the same //trainer:samples both trainers draw from, for
// tools/gpu/torch_check.py (PyTorch on the GPU machine computes the loss and
// gradients on the batch the trainers saw):
//
//   batch_dump SEED VOCAB_SIZE SEQ_LEN BATCH_SIZE STEP
//
// prints {"step": S, "seq_len": T, "tokens": [[...], ...]}: BATCH_SIZE rows of
// SEQ_LEN + 1 tokens (inputs are tokens 0 .. T - 1, targets 1 .. T). Bad
// usage: one line, exit 2.
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "trainer/data/samples.h"

int main(int argc, char** argv) {
  const char* names[] = {"SEED", "VOCAB_SIZE", "SEQ_LEN", "BATCH_SIZE", "STEP"};
  if (argc != 6) {
    std::cerr << "usage: batch_dump SEED VOCAB_SIZE SEQ_LEN BATCH_SIZE STEP\n";
    return 2;
  }
  int64_t values[5];
  for (int i = 0; i < 5; ++i) {
    if (!absl::SimpleAtoi(argv[i + 1], &values[i]) || values[i] < (i == 0 ? 0 : 1)) {
      std::cerr << "batch_dump: " << names[i] << "=" << argv[i + 1]
                << " must be an integer >= " << (i == 0 ? 0 : 1) << "\n";
      return 2;
    }
  }
  const int64_t seq_len = values[2], batch = values[3], step = values[4];
  const auto samples = mtb::MakeSyntheticSamples(static_cast<uint64_t>(values[0]),
                                                 values[1], seq_len);
  std::vector<int64_t> tokens(batch * (seq_len + 1));
  samples->Fill(step, 0, batch, tokens.data());
  std::cout << "{\"step\": " << step << ", \"seq_len\": " << seq_len << ", \"tokens\": [";
  for (int64_t row = 0; row < batch; ++row) {
    std::cout << (row ? ", [" : "[");
    for (int64_t t = 0; t <= seq_len; ++t) {
      std::cout << (t ? ", " : "") << tokens[row * (seq_len + 1) + t];
    }
    std::cout << "]";
  }
  std::cout << "]}\n";
  return 0;
}
