#include "trainer/model/parameter_store.h"

#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "gtest/gtest.h"
#include "trainer/model/model.h"

namespace mtb {
namespace {

ModelShape SmallShape() {
  ModelShape shape;
  shape.vocab_size = 50;
  shape.d_model = 20;
  shape.n_layers = 3;
  shape.n_heads = 4;
  shape.seq_len = 7;
  return shape;
}

TEST(ParameterStore, ModelParametersAreViewsOfOneFlatBufferInUnitOrder) {
  const GptModel model(SmallShape(), 3);
  const ParameterStore& store = model.store();
  ASSERT_EQ(store.units().size(), 4u);
  EXPECT_EQ(store.units()[0].name, "root");
  EXPECT_EQ(store.units()[1].name, "h.0");
  EXPECT_EQ(store.units()[3].name, "h.2");
  const std::vector<NamedParameter>& parameters = store.parameters();
  // The root unit: wte, wpe, ln_f.weight, ln_f.bias, in that order.
  std::vector<std::string> root;
  for (int index : store.units()[0].parameters) {
    root.push_back(parameters[index].name);
  }
  EXPECT_EQ(root, (std::vector<std::string>{"wte", "wpe", "ln_f.weight",
                                            "ln_f.bias"}));
  int64_t expected_offset = 0;
  const float* base = store.flat_parameters().data_ptr<float>();
  for (const ParameterUnit& unit : store.units()) {
    EXPECT_EQ(unit.offset, expected_offset) << unit.name;
    for (int index : unit.parameters) {
      const at::Tensor& tensor = parameters[index].tensor;
      EXPECT_EQ(store.offset(index), expected_offset) << parameters[index].name;
      EXPECT_EQ(tensor.data_ptr<float>(), base + expected_offset)
          << parameters[index].name << " is not a view of the flat buffer";
      EXPECT_TRUE(tensor.is_leaf());
      EXPECT_TRUE(tensor.requires_grad());
      expected_offset += tensor.numel();
    }
    EXPECT_EQ(unit.numel, expected_offset - unit.offset);
  }
  EXPECT_EQ(store.numel(), model.ParameterCount());
  // Writing the flat buffer writes the parameters.
  store.flat_parameters().narrow(0, store.offset(0), 1).fill_(42);
  EXPECT_EQ(parameters[0].tensor.view({-1})[0].item<float>(), 42.0f);
}

TEST(ParameterStore, BackwardAccumulatesIntoTheFlatGradientBuffer) {
  const at::Tensor a = at::ones({2, 3}).requires_grad_();
  const at::Tensor b = at::ones({4}).requires_grad_();
  ParameterStore store({{"a", a}, {"b", b}});
  store.AttachGradients();
  ((a * 2).sum() + (b * 3).sum()).backward();
  ((a * 2).sum()).backward();  // accumulates on top, in place
  const at::Tensor& flat = store.flat_gradients();
  EXPECT_TRUE(at::equal(flat.narrow(0, 0, 6), at::full({6}, 4.0f)));
  EXPECT_TRUE(at::equal(flat.narrow(0, 6, 4), at::full({4}, 3.0f)));
  EXPECT_EQ(a.grad().data_ptr<float>(), flat.data_ptr<float>());
  store.ZeroGradients();
  EXPECT_TRUE(at::equal(a.grad(), at::zeros({2, 3})));
  // Detached, backward allocates its own gradient again.
  store.DetachGradients();
  (b * 5).sum().backward();
  EXPECT_TRUE(at::equal(b.grad(), at::full({4}, 5.0f)));
  EXPECT_FALSE(store.flat_gradients().defined());
}

// The mechanism fsdp stands on: a unit's storage of its own,
// freed under autograd's saved tensors by resizing it to 0 bytes and brought
// back by refilling the same storage through the unit buffer, which moves no
// version counter, so backward still runs and gets the right gradients.
TEST(ParameterStore, ASplitUnitIsFreedAndRefilledUnderAutogradsSavedTensors) {
  const at::Tensor a = at::full({2, 3}, 2.0f).requires_grad_();
  const at::Tensor b = at::full({4}, 3.0f).requires_grad_();
  const at::Tensor c = at::full({5}, 5.0f).requires_grad_();
  ParameterStore store({{"a", a}, {"b", b}, {"c", c}},
                       {{"first", {0, 1}}, {"second", {2}}});
  const at::Tensor first_values = store.unit_parameters(0).clone();
  store.SplitUnitStorage();
  EXPECT_FALSE(store.flat_parameters().defined());
  for (int u : {0, 1}) EXPECT_FALSE(store.unit_allocated(u)) << u;
  EXPECT_EQ(a.storage().nbytes(), 0u);  // freed under the parameter itself
  store.AllocateUnit(0);
  store.unit_parameters(0).copy_(first_values);
  EXPECT_EQ(a.data_ptr<float>(), store.unit_parameters(0).data_ptr<float>());
  EXPECT_EQ(b.data_ptr<float>(), a.data_ptr<float>() + 6);
  EXPECT_TRUE(at::equal(b, at::full({4}, 3.0f)));
  EXPECT_FALSE(store.unit_allocated(1));
  const auto version = a._version();
  // x * a saves a (and x) for backward; then the unit is freed and refilled.
  const at::Tensor x = at::full({2, 3}, 7.0f).requires_grad_();
  const at::Tensor loss = (x * a).sum() + (b * b).sum();
  store.FreeUnit(0);
  EXPECT_EQ(a.storage().nbytes(), 0u);
  store.AllocateUnit(0);
  store.unit_parameters(0).copy_(first_values);
  EXPECT_EQ(a._version(), version) << "refilling moved the version counter";
  const at::Tensor grad = at::zeros({10});
  store.AttachUnitGradients(0, grad);
  loss.backward();
  EXPECT_TRUE(at::equal(grad.narrow(0, 0, 6), at::full({6}, 7.0f)));  // x
  EXPECT_TRUE(at::equal(grad.narrow(0, 6, 4), at::full({4}, 6.0f)));  // 2b
  EXPECT_TRUE(at::equal(x.grad(), at::full({2, 3}, 2.0f)));            // a
  store.DetachUnitGradients(0);
  EXPECT_FALSE(a.grad().defined());
}

TEST(ParameterStore, DecayRunsFollowTheParametersAndMerge) {
  const at::Tensor w1 = at::ones({4}).requires_grad_();
  const at::Tensor w2 = at::ones({3}).requires_grad_();
  const at::Tensor bias = at::ones({5}).requires_grad_();
  ParameterStore store(
      {{"w1", w1, true}, {"w2", w2, true}, {"bias", bias, false}});
  // Elements 2..9: the tail of w1 and all of w2 merge into one decay run,
  // then three of bias.
  const std::vector<DecayRun> runs = store.DecayRuns(2, 8);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].offset, 0);
  EXPECT_EQ(runs[0].numel, 5);
  EXPECT_TRUE(runs[0].weight_decay);
  EXPECT_EQ(runs[1].offset, 5);
  EXPECT_EQ(runs[1].numel, 3);
  EXPECT_FALSE(runs[1].weight_decay);
}

}  // namespace
}  // namespace mtb
