// The CUDA trainer's parameter buffer against the LibTorch model it must equal.
#include "trainer/cuda/layout.h"

#include <cstring>
#include <vector>

#include "ATen/ATen.h"
#include "gtest/gtest.h"
#include "trainer/cuda/gpt_tensors.h"
#include "trainer/model/model.h"

namespace mtb {
namespace cuda {
namespace {

ModelShape SmallShape() {
  ModelShape shape;
  shape.vocab_size = 96;
  shape.d_model = 32;
  shape.n_layers = 3;
  shape.n_heads = 4;
  shape.seq_len = 16;
  return shape;
}

TEST(ParameterLayout, NamesShapesAndDecayAreTheModelsInItsOrder) {
  const ParameterLayout layout = ParameterLayout::ForGpt(SmallShape());
  const GptModel model(SmallShape(), /*seed=*/1);
  ASSERT_EQ(layout.tensors().size(), model.parameters().size());
  int64_t offset = 0;
  for (size_t i = 0; i < layout.tensors().size(); ++i) {
    const TensorSlot& slot = layout.tensors()[i];
    const NamedParameter& parameter = model.parameters()[i];
    EXPECT_EQ(slot.name, parameter.name);
    EXPECT_EQ(slot.shape, parameter.tensor.sizes().vec()) << slot.name;
    EXPECT_EQ(slot.weight_decay, parameter.weight_decay) << slot.name;
    EXPECT_EQ(slot.offset, offset) << slot.name;  // back to back
    offset += slot.numel;
  }
  EXPECT_EQ(layout.total(), model.ParameterCount());
  EXPECT_EQ(ParameterCountOf(SmallShape()), model.ParameterCount());
  EXPECT_EQ(layout.tensors()[BlockTensorIndex(1, kFcWeight)].name,
            "h.1.mlp.c_fc.weight");
  EXPECT_EQ(layout.tensors()[FinalLnBiasIndex(3)].name, "ln_f.bias");
}

// Bit equality: the same counter draws, cast the same way.
TEST(InitializeParameters, EqualsTheModelsInitialisationBitForBit) {
  const ParameterLayout layout = ParameterLayout::ForGpt(SmallShape());
  std::vector<float> buffer(layout.total());
  InitializeParameters(layout, /*seed=*/1234, buffer.data());
  const GptModel model(SmallShape(), /*seed=*/1234);
  for (size_t i = 0; i < layout.tensors().size(); ++i) {
    const TensorSlot& slot = layout.tensors()[i];
    const at::Tensor expected = model.parameters()[i].tensor.contiguous();
    EXPECT_EQ(std::memcmp(buffer.data() + slot.offset,
                          expected.data_ptr<float>(),
                          slot.numel * sizeof(float)),
              0)
        << slot.name;
  }
  // Negative: another seed gives other normal tensors (the ones and zeros stay).
  std::vector<float> other(layout.total());
  InitializeParameters(layout, /*seed=*/1235, other.data());
  const TensorSlot& wte = layout.tensors()[kTokenEmbeddingIndex];
  EXPECT_NE(std::memcmp(other.data() + wte.offset, buffer.data() + wte.offset,
                        wte.numel * sizeof(float)),
            0);
}

}  // namespace
}  // namespace cuda
}  // namespace mtb
