#include "trainer/model/parameter_store.h"

#include <algorithm>
#include <utility>

#include "ATen/ATen.h"
#include "ATen/native/Resize.h"
#include "glog/logging.h"

namespace mtb {

ParameterStore::ParameterStore(std::vector<NamedParameter> parameters)
    : ParameterStore(std::move(parameters), {}) {}

ParameterStore::ParameterStore(
    std::vector<NamedParameter> parameters,
    const std::vector<std::pair<std::string, std::vector<int>>>& units)
    : parameters_(std::move(parameters)) {
  const int count = static_cast<int>(parameters_.size());
  std::vector<std::pair<std::string, std::vector<int>>> groups = units;
  if (groups.empty()) {
    std::vector<int> all(count);
    for (int i = 0; i < count; ++i) all[i] = i;
    groups.push_back({"all", all});
  }
  offsets_.assign(count, -1);
  for (const auto& [name, members] : groups) {
    ParameterUnit unit;
    unit.name = name;
    unit.offset = numel_;
    for (int index : members) {
      CHECK(index >= 0 && index < count) << name << ": " << index;
      CHECK_EQ(offsets_[index], -1) << parameters_[index].name << " twice";
      const at::Tensor& tensor = parameters_[index].tensor;
      CHECK(tensor.scalar_type() == at::kFloat)
          << parameters_[index].name << ": the store holds fp32";
      offsets_[index] = numel_;
      numel_ += tensor.numel();
      unit.parameters.push_back(index);
      layout_.push_back(index);
    }
    unit.numel = numel_ - unit.offset;
    units_.push_back(std::move(unit));
  }
  for (int i = 0; i < count; ++i) {
    CHECK_GE(offsets_[i], 0) << parameters_[i].name << " is in no unit";
  }
  at::NoGradGuard no_grad;
  flat_parameters_ = at::empty({numel_}, at::kFloat);
  for (int i = 0; i < count; ++i) {
    at::Tensor& tensor = parameters_[i].tensor;
    at::Tensor view =
        flat_parameters_.narrow(0, offsets_[i], tensor.numel()).view(tensor.sizes());
    view.copy_(tensor);
    // set_data keeps the tensor's autograd meta (leaf, requires_grad) and its
    // own version counter, so writes through the flat buffer (optimizer,
    // all-gathers) never look like in-place edits of a saved tensor.
    tensor.set_data(view);
  }
  for (const ParameterUnit& unit : units_) {
    unit_parameters_.push_back(
        flat_parameters_.narrow(0, unit.offset, unit.numel));
  }
}

void ParameterStore::SplitUnitStorage() {
  CHECK(!split_) << "SplitUnitStorage twice";
  at::NoGradGuard no_grad;
  split_ = true;
  for (size_t u = 0; u < units_.size(); ++u) {
    const ParameterUnit& unit = units_[u];
    at::Tensor buffer = at::empty({unit.numel}, at::kFloat);
    for (int index : unit.parameters) {
      at::Tensor& tensor = parameters_[index].tensor;
      tensor.set_data(buffer.narrow(0, offsets_[index] - unit.offset,
                                    tensor.numel())
                          .view(tensor.sizes()));
    }
    unit_parameters_[u] = std::move(buffer);
    // Freed at once: at most one unit more than the flat buffer exists.
    FreeUnit(static_cast<int>(u));
  }
  flat_parameters_ = at::Tensor();
}

void ParameterStore::FreeUnit(int unit) {
  CHECK(split_) << "SplitUnitStorage first";
  // Dropping references would not free it (autograd's saved views keep the
  // storage alive); resizing the shared storage does, for every view at once.
  at::native::resize_bytes_cpu(
      unit_parameters_[unit].storage().unsafeGetStorageImpl(), 0);
}

void ParameterStore::AllocateUnit(int unit) {
  CHECK(split_) << "SplitUnitStorage first";
  const size_t bytes = static_cast<size_t>(units_[unit].numel) * sizeof(float);
  c10::StorageImpl* storage =
      unit_parameters_[unit].storage().unsafeGetStorageImpl();
  if (storage->nbytes() != bytes) at::native::resize_bytes_cpu(storage, bytes);
}

bool ParameterStore::unit_allocated(int unit) const {
  return !split_ || unit_parameters_[unit].storage().nbytes() > 0;
}

void ParameterStore::AttachUnitGradients(int unit, const at::Tensor& buffer) {
  const ParameterUnit& u = units_[unit];
  CHECK_EQ(buffer.numel(), u.numel) << u.name;
  for (int index : u.parameters) {
    at::Tensor& tensor = parameters_[index].tensor;
    tensor.mutable_grad() = buffer.narrow(0, offsets_[index] - u.offset,
                                          tensor.numel())
                                .view(tensor.sizes());
  }
}

void ParameterStore::DetachUnitGradients(int unit) {
  for (int index : units_[unit].parameters) {
    parameters_[index].tensor.mutable_grad() = at::Tensor();
  }
}

void ParameterStore::AttachGradients() {
  at::NoGradGuard no_grad;
  if (!flat_gradients_.defined()) {
    flat_gradients_ = at::zeros({numel_}, at::kFloat);
  } else {
    flat_gradients_.zero_();
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    at::Tensor& tensor = parameters_[i].tensor;
    tensor.mutable_grad() =
        flat_gradients_.narrow(0, offsets_[i], tensor.numel()).view(tensor.sizes());
  }
}

void ParameterStore::ZeroGradients() {
  CHECK(flat_gradients_.defined()) << "AttachGradients first";
  flat_gradients_.zero_();
}

void ParameterStore::DetachGradients() {
  for (NamedParameter& p : parameters_) p.tensor.mutable_grad() = at::Tensor();
  flat_gradients_ = at::Tensor();
}

std::vector<DecayRun> ParameterStore::DecayRuns(int64_t offset,
                                                int64_t numel) const {
  CHECK(offset >= 0 && numel >= 0 && offset + numel <= numel_);
  std::vector<DecayRun> runs;
  const int64_t end = offset + numel;
  for (int index : layout_) {
    const int64_t begin_p = offsets_[index];
    const int64_t end_p = begin_p + parameters_[index].tensor.numel();
    const int64_t begin = std::max(begin_p, offset);
    const int64_t stop = std::min(end_p, end);
    if (begin >= stop) continue;
    const bool decay = parameters_[index].weight_decay;
    if (!runs.empty() && runs.back().weight_decay == decay &&
        runs.back().offset + runs.back().numel == begin - offset) {
      runs.back().numel += stop - begin;
    } else {
      runs.push_back({begin - offset, stop - begin, decay});
    }
  }
  return runs;
}

double ParameterStore::SquaredNormCounted(const at::Tensor& values,
                                          int64_t offset) const {
  const int64_t numel = values.numel();
  CHECK(offset >= 0 && offset + numel <= numel_);
  bool all_counted = true;
  for (const NamedParameter& p : parameters_) all_counted &= p.counted_in_norm;
  if (all_counted) {
    const at::Tensor flat = values.to(at::kDouble);
    return at::dot(flat, flat).item<double>();
  }
  const at::Tensor flat = values.reshape({-1});
  const int64_t end = offset + numel;
  double sum = 0;
  for (int index : layout_) {
    if (!parameters_[index].counted_in_norm) continue;
    const int64_t begin = std::max(offsets_[index], offset);
    const int64_t stop =
        std::min(offsets_[index] + parameters_[index].tensor.numel(), end);
    if (begin >= stop) continue;
    const at::Tensor run =
        flat.narrow(0, begin - offset, stop - begin).to(at::kDouble);
    sum += at::dot(run, run).item<double>();
  }
  return sum;
}

}  // namespace mtb
