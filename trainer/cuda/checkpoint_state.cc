#include "trainer/cuda/checkpoint_state.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace mtb {
namespace cuda {
namespace {

// Every tensor of the state, in the saved order: its name, global shape,
// element count, dtype and bytes.
template <typename Visit>
void ForEachTensor(const ParameterLayout& layout, const HostState& state,
                   const Visit& visit) {
  const struct {
    const char* prefix;
    const std::vector<float>* values;
  } groups[] = {{"model/", &state.parameters},
                {"optimizer/exp_avg/", &state.exp_avg},
                {"optimizer/exp_avg_sq/", &state.exp_avg_sq}};
  for (const auto& group : groups) {
    for (const TensorSlot& slot : layout.tensors()) {
      visit(absl::StrCat(group.prefix, slot.name), slot.shape, slot.numel, "float32",
            reinterpret_cast<const char*>(group.values->data() + slot.offset));
    }
  }
  visit("optimizer/step", std::vector<int64_t>{}, 1, "int64",
        reinterpret_cast<const char*>(&state.step));
}

}  // namespace

std::vector<checkpoint::TensorShard> ShardsOf(const ParameterLayout& layout,
                                              const HostState& state) {
  std::vector<checkpoint::TensorShard> shards;
  ForEachTensor(layout, state,
                [&](std::string name, const std::vector<int64_t>& shape, int64_t numel,
                    const char* dtype, const char* bytes) {
                  shards.push_back({std::move(name), dtype, shape, 0, numel,
                                    absl::string_view(bytes, numel * checkpoint::ElementBytes(dtype))});
                });
  return shards;
}

std::vector<checkpoint::TensorShard> RangeShardsOf(const ParameterLayout& layout,
                                                   const HostState& state,
                                                   const std::vector<PlanRange>& ranges,
                                                   bool with_step) {
  std::vector<checkpoint::TensorShard> shards;
  // One piece per tensor that flat elements [range) touch.
  auto append = [&](const PlanRange& range, const char* prefix,
                    const std::vector<float>& values) {
    for (const TensorSlot& slot : layout.tensors()) {
      const int64_t from = std::max(range.offset, slot.offset);
      const int64_t to = std::min(range.offset + range.numel, slot.offset + slot.numel);
      if (from >= to) continue;
      shards.push_back({absl::StrCat(prefix, slot.name), "float32", slot.shape,
                        from - slot.offset, to - from,
                        absl::string_view(reinterpret_cast<const char*>(values.data() + from),
                                          (to - from) * sizeof(float))});
    }
  };
  for (const PlanRange& range : ranges) append(range, "model/", state.parameters);
  for (const PlanRange& range : ranges) {
    append(range, "optimizer/exp_avg/", state.exp_avg);
    append(range, "optimizer/exp_avg_sq/", state.exp_avg_sq);
  }
  if (with_step) {
    shards.push_back({"optimizer/step", "int64", {}, 0, 1,
                      absl::string_view(reinterpret_cast<const char*>(&state.step),
                                        sizeof(state.step))});
  }
  return shards;
}

std::vector<checkpoint::RangeRequest> RequestsInto(const ParameterLayout& layout,
                                                   HostState* state) {
  std::vector<checkpoint::RangeRequest> requests;
  ForEachTensor(layout, *state,
                [&](std::string name, const std::vector<int64_t>& shape, int64_t numel,
                    const char* dtype, const char* bytes) {
                  // The bytes are `state`'s own (ForEachTensor only reads).
                  requests.push_back({std::move(name), dtype, shape, 0, numel,
                                      const_cast<char*>(bytes)});
                });
  return requests;
}

}  // namespace cuda
}  // namespace mtb
