#include "trainer/strategy/scalars.h"

#include <algorithm>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"

namespace mtb {
namespace {

bool Communicating(const collective::Communicator* communicator) {
  return communicator != nullptr && communicator->world_size() > 1;
}

}  // namespace

absl::StatusOr<double> ReduceScalarOverRanks(
    collective::Communicator* communicator, double value, ScalarReduction op,
    const std::string& who) {
  if (!Communicating(communicator)) return value;
  const at::Tensor tensor = at::full({1}, value, at::kDouble);
  collective::ReduceOp reduce = collective::ReduceOp::kSum;
  if (op == ScalarReduction::kMean) reduce = collective::ReduceOp::kAvg;
  if (op == ScalarReduction::kMax) reduce = collective::ReduceOp::kMax;
  RETURN_IF_ERROR(Annotate(communicator->AllReduce(tensor, reduce),
                           absl::StrCat(who, ": reducing a scalar")));
  return tensor.item<double>();
}

absl::StatusOr<std::vector<double>> GatherScalarsOverRanks(
    collective::Communicator* communicator, const std::vector<double>& values,
    const std::string& who) {
  if (!Communicating(communicator)) return values;
  const int64_t k = static_cast<int64_t>(values.size());
  const at::Tensor mine = at::empty({k}, at::kDouble);
  std::copy(values.begin(), values.end(), mine.data_ptr<double>());
  const at::Tensor all =
      at::empty({communicator->world_size() * k}, at::kDouble);
  RETURN_IF_ERROR(Annotate(communicator->AllGather(mine, all),
                           absl::StrCat(who, ": gathering scalars")));
  const double* data = all.data_ptr<double>();
  return std::vector<double>(data, data + all.numel());
}

}  // namespace mtb
