#include "trainer/model/model_shape.h"

namespace mtb {

ModelShape ModelShapeOf(const TrainConfig& config) {
  ModelShape shape;
  shape.vocab_size = config.vocab_size();
  shape.d_model = config.d_model();
  shape.n_layers = config.n_layers();
  shape.n_heads = config.n_heads();
  shape.seq_len = config.seq_len();
  return shape;
}

int64_t ParameterCountOf(const ModelShape& shape) {
  const int64_t d = shape.d_model;
  return shape.vocab_size * d + shape.seq_len * d +
         shape.n_layers * (12 * d * d + 13 * d) + 2 * d;
}

int64_t FlopsParameterCountOf(const ModelShape& shape) {
  return ParameterCountOf(shape) - shape.seq_len * shape.d_model;
}

double FlopsPerTokenOf(const ModelShape& shape) {
  return 6.0 * static_cast<double>(FlopsParameterCountOf(shape)) +
         12.0 * static_cast<double>(shape.n_layers * shape.seq_len *
                                    shape.d_model);
}

}  // namespace mtb
