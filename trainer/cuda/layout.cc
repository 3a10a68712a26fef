#include "trainer/cuda/layout.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/counter_rng.h"
#include "glog/logging.h"
#include "trainer/cuda/gpt_tensors.h"

namespace mtb {
namespace cuda {
namespace {

constexpr double kInitStd = 0.02;  // trainer/model/model.cc's

}  // namespace

ParameterLayout ParameterLayout::ForGpt(const ModelShape& shape) {
  CHECK_EQ(shape.d_model % shape.n_heads, 0);
  ParameterLayout layout;
  layout.shape_ = shape;
  const int64_t d = shape.d_model;
  const double residual_std = kInitStd / std::sqrt(2.0 * shape.n_layers);
  auto add = [&layout](std::string name, std::vector<int64_t> dims,
                       InitKind init, double stddev, bool decay) {
    TensorSlot slot;
    slot.name = std::move(name);
    slot.numel = 1;
    for (int64_t n : dims) slot.numel *= n;
    slot.shape = std::move(dims);
    slot.offset = layout.total_;
    slot.init = init;
    slot.stddev = stddev;
    slot.weight_decay = decay;
    layout.total_ += slot.numel;
    layout.tensors_.push_back(std::move(slot));
  };
  auto normal = [&](std::string name, std::vector<int64_t> dims, double stddev,
                    bool decay) {
    add(std::move(name), std::move(dims), InitKind::kNormal, stddev, decay);
  };
  auto zeros = [&](std::string name, int64_t n) {
    add(std::move(name), {n}, InitKind::kZeros, 0, false);
  };
  auto ones = [&](std::string name, int64_t n) {
    add(std::move(name), {n}, InitKind::kOnes, 0, false);
  };
  normal("wte", {shape.vocab_size, d}, kInitStd, false);
  normal("wpe", {shape.seq_len, d}, kInitStd, false);
  for (int64_t layer = 0; layer < shape.n_layers; ++layer) {
    const std::string p = absl::StrCat("h.", layer, ".");
    ones(p + "ln_1.weight", d);
    zeros(p + "ln_1.bias", d);
    normal(p + "attn.c_attn.weight", {3 * d, d}, kInitStd, true);
    zeros(p + "attn.c_attn.bias", 3 * d);
    normal(p + "attn.c_proj.weight", {d, d}, residual_std, true);
    zeros(p + "attn.c_proj.bias", d);
    ones(p + "ln_2.weight", d);
    zeros(p + "ln_2.bias", d);
    normal(p + "mlp.c_fc.weight", {4 * d, d}, kInitStd, true);
    zeros(p + "mlp.c_fc.bias", 4 * d);
    normal(p + "mlp.c_proj.weight", {d, 4 * d}, residual_std, true);
    zeros(p + "mlp.c_proj.bias", d);
  }
  ones("ln_f.weight", d);
  zeros("ln_f.bias", d);
  CHECK_EQ(static_cast<int>(layout.tensors_.size()),
           TensorCount(shape.n_layers));
  return layout;
}

void InitializeParameters(const ParameterLayout& layout, uint64_t seed,
                          float* buffer) {
  for (size_t index = 0; index < layout.tensors().size(); ++index) {
    const TensorSlot& slot = layout.tensors()[index];
    float* data = buffer + slot.offset;
    switch (slot.init) {
      case InitKind::kZeros:
        for (int64_t e = 0; e < slot.numel; ++e) data[e] = 0.0f;
        break;
      case InitKind::kOnes:
        for (int64_t e = 0; e < slot.numel; ++e) data[e] = 1.0f;
        break;
      case InitKind::kNormal: {
        const uint64_t key =
            CounterKey({seed, static_cast<uint64_t>(RngStream::kInit),
                        static_cast<uint64_t>(index)});
        for (int64_t e = 0; e < slot.numel; ++e) {
          data[e] = static_cast<float>(slot.stddev * CounterNormal(key, e));
        }
        break;
      }
    }
  }
}

}  // namespace cuda
}  // namespace mtb
