#include "trainer/tp/bytes.h"

#include "common/collective/traffic.h"
#include "trainer/tp/options.h"

namespace mtb::tp {

int64_t ExpectedTensorParallelStepBytes(const TrainConfig& config) {
  const int n = TensorParallelSize(config);
  const bool bf16 = config.precision() == TrainConfig::bf16;
  if (n == 1 || (!bf16 && config.precision() != TrainConfig::fp32)) return 0;
  const int64_t rows = int64_t{config.batch_size()} * config.seq_len();
  const int64_t a = rows * config.d_model() * 4;
  const int64_t layers = config.n_layers();
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
  int64_t block_forward = 0;
  int64_t micro_batch = 0;
  if (!config.sequence_parallel()) {
    block_forward = 2 * ar(a);
    micro_batch = ar(a) + layers * block_forward + softmax +  // forward
                  layers * 2 * ar(a) + ar(a);                 // backward
  } else {
    block_forward = 2 * (ag(a) + rs(a));
    const int64_t shared = ar(int64_t{config.d_model()} * 4);
    // Backward of a block's f (all-gather) is a reduce-scatter of an fp32
    // gradient; of its g (reduce-scatter) an all-gather of the gradient of
    // the row-parallel output, bf16 under autocast (a copy: 2 bytes).
    const int64_t block_backward = 2 * (rs(a) + ag(bf16 ? a / 2 : a));
    micro_batch = ar(a) + layers * block_forward + ag(a) + softmax +
                  layers * block_backward + rs(a) + ag(a) +
                  (6 * layers + 2) * shared;
  }
  if (config.activation_checkpointing()) micro_batch += layers * block_forward;
  return config.grad_accum() * micro_batch + ar(8);
}

}  // namespace mtb::tp
