#include "trainer/tp/bytes.h"

#include "common/collective/traffic.h"
#include "trainer/tp/options.h"

namespace mtb::tp {

namespace {

// One micro-batch of `rows` = b * T rows through `layers` blocks, with the
// embedding (`embed`) and the head and loss (`head`) when those run here.
// `block_forward` gets one block's forward bytes (activation checkpointing
// repeats them).
int64_t MicroBatchBytes(const TrainConfig& config, int n, int64_t rows,
                        int64_t layers, bool embed, bool head,
                        int64_t* block_forward) {
  const bool bf16 = config.precision() == TrainConfig::bf16;
  const int64_t a = rows * config.d_model() * 4;
  auto ar = [n](int64_t bytes) {
    return collective::AllReduceTraffic(bytes, n).sent;
  };
  auto ag = [n](int64_t bytes) {
    return collective::AllGatherTraffic(bytes, n).sent;
  };
  auto rs = [n](int64_t bytes) {
    return collective::ReduceScatterTraffic(bytes, n).sent;
  };
  const int64_t softmax = 3 * ar(rows * 4);
  if (!config.sequence_parallel()) {
    *block_forward = 2 * ar(a);
    return (embed ? ar(a) : 0) + layers * *block_forward +
           (head ? softmax : 0) +                             // forward
           layers * 2 * ar(a) + (head ? ar(a) : 0);           // backward
  }
  *block_forward = 2 * (ag(a) + rs(a));
  const int64_t shared = ar(int64_t{config.d_model()} * 4);
  // Backward of a block's f (all-gather) is a reduce-scatter of an fp32
  // gradient; of its g (reduce-scatter) an all-gather of the gradient of
  // the row-parallel output, bf16 under autocast (a copy: 2 bytes).
  const int64_t block_backward = 2 * (rs(a) + ag(bf16 ? a / 2 : a));
  return (embed ? ar(a) : 0) + layers * *block_forward +
         (head ? ag(a) + softmax : 0) + layers * block_backward +
         (head ? rs(a) : 0) + (embed ? ag(a) : 0) +
         (6 * layers + (head ? 2 : 0)) * shared;
}

bool Counted(const TrainConfig& config, int n) {
  const bool bf16 = config.precision() == TrainConfig::bf16;
  return n > 1 && (bf16 || config.precision() == TrainConfig::fp32);
}

}  // namespace

int64_t ExpectedTensorParallelStepBytes(const TrainConfig& config) {
  const int n = TensorParallelSize(config);
  if (!Counted(config, n)) return 0;
  const int64_t rows = int64_t{config.batch_size()} * config.seq_len();
  const int64_t layers = config.n_layers();
  int64_t block_forward = 0;
  int64_t micro_batch = MicroBatchBytes(config, n, rows, layers, true, true,
                                        &block_forward);
  if (config.activation_checkpointing()) micro_batch += layers * block_forward;
  return config.grad_accum() * micro_batch +
         collective::AllReduceTraffic(8, n).sent;
}

int64_t ExpectedStageTensorParallelStepBytes(const TrainConfig& config,
                                             int64_t blocks, bool embed,
                                             bool head, int micro_batches) {
  const int n = TensorParallelSize(config);
  if (!Counted(config, n) || micro_batches < 1) return 0;
  const int64_t rows =
      int64_t{config.batch_size() / micro_batches} * config.seq_len();
  int64_t block_forward = 0;
  return micro_batches *
         MicroBatchBytes(config, n, rows, blocks, embed, head, &block_forward);
}

}  // namespace mtb::tp
