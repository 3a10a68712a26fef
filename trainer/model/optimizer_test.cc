// FlatAdamW (one elementwise update over flat slices, decay per element) must
// equal the per-parameter AdamW bit for bit on the same inputs, whatever the
// slice and piece boundaries.
#include "trainer/model/optimizer.h"

#include <vector>

#include "ATen/ATen.h"
#include "gtest/gtest.h"
#include "trainer/model/model.h"

namespace mtb {
namespace {

ModelShape SmallShape() {
  ModelShape shape;
  shape.vocab_size = 37;
  shape.d_model = 20;
  shape.n_layers = 2;
  shape.n_heads = 4;
  shape.seq_len = 9;
  return shape;
}

AdamWOptions Options() {
  AdamWOptions options;
  options.weight_decay = 0.1;
  return options;
}

// Gradient of step s for the model's flat layout: seeded normal values.
at::Tensor StepGradient(int64_t numel, int step) {
  at::Generator generator = at::detail::createCPUGenerator(100 + step);
  return at::normal(0, 1e-2, {numel}, generator);
}

// Runs 3 AdamW steps per parameter on `reference` and flat (ranges, pieces)
// on `flat`, both from the same gradients; every parameter must be equal.
void ExpectFlatEqualsPerParameter(std::vector<FlatAdamW::Range> ranges,
                                  int64_t piece_elements) {
  GptModel reference(SmallShape(), 5);
  GptModel flat(SmallShape(), 5);
  ParameterStore& store = flat.store();
  AdamW per_parameter(reference.parameters(), Options());
  FlatAdamW flat_adamw(store, ranges, Options(), piece_elements);
  for (int step = 1; step <= 3; ++step) {
    const at::Tensor gradient = StepGradient(store.numel(), step);
    for (size_t i = 0; i < reference.parameters().size(); ++i) {
      const at::Tensor& p = reference.parameters()[i].tensor;
      p.mutable_grad() = gradient.narrow(0, store.offset(i), p.numel())
                             .view(p.sizes())
                             .clone();
    }
    per_parameter.Step(3e-3);
    std::vector<at::Tensor> grads;
    for (const FlatAdamW::Range& range : ranges) {
      grads.push_back(gradient.narrow(0, range.offset, range.numel).clone());
    }
    flat_adamw.Step(3e-3, grads);
  }
  for (size_t i = 0; i < reference.parameters().size(); ++i) {
    EXPECT_TRUE(at::equal(flat.parameters()[i].tensor,
                          reference.parameters()[i].tensor))
        << reference.parameters()[i].name;
  }
}

TEST(FlatAdamW, OneRangeEqualsPerParameterAdamWBitForBit) {
  const int64_t numel = GptModel(SmallShape(), 5).ParameterCount();
  ExpectFlatEqualsPerParameter({{0, numel}}, int64_t{1} << 20);
}

TEST(FlatAdamW, OddRangesAndPiecesEqualPerParameterAdamWBitForBit) {
  const int64_t numel = GptModel(SmallShape(), 5).ParameterCount();
  // Boundaries in the middle of parameters with and without decay, pieces
  // of 97 elements (a prime: never aligned with a vector width).
  const int64_t a = 1001, b = numel / 2 + 13;
  ExpectFlatEqualsPerParameter({{0, a}, {a, b - a}, {b, numel - b}}, 97);
}

TEST(FlatAdamW, DecayAppliesOnlyWhereMarked) {
  const at::Tensor w = at::ones({3}).requires_grad_();
  const at::Tensor bias = at::ones({2}).requires_grad_();
  ParameterStore store({{"w", w, true}, {"bias", bias, false}});
  AdamWOptions options;
  options.weight_decay = 0.5;
  FlatAdamW adamw(store, {{0, 5}}, options, 2);
  adamw.Step(0.1, {at::zeros({5})});  // zero gradient: only decay moves
  EXPECT_TRUE(at::equal(w, at::full({3}, 0.95f)));
  EXPECT_TRUE(at::equal(bias, at::ones({2})));
  EXPECT_EQ(adamw.state_bytes(), 2 * 5 * 4);
}

}  // namespace
}  // namespace mtb
