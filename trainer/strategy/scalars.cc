#include "trainer/strategy/scalars.h"

#include <algorithm>
#include <string>

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

absl::StatusOr<std::vector<std::string>> AllGatherBytesOverRanks(
    collective::Communicator* communicator, const std::string& bytes,
    const std::string& who) {
  if (!Communicating(communicator)) return std::vector<std::string>{bytes};
  const int n = communicator->world_size();
  const at::Tensor size =
      at::full({1}, static_cast<int64_t>(bytes.size()), at::kLong);
  const at::Tensor sizes = at::empty({n}, at::kLong);
  RETURN_IF_ERROR(Annotate(communicator->AllGather(size, sizes),
                           absl::StrCat(who, ": gathering byte counts")));
  std::vector<int64_t> counts(sizes.data_ptr<int64_t>(),
                              sizes.data_ptr<int64_t>() + n);
  int64_t total = 0;
  for (int64_t count : counts) total += count;
  if (total == 0) return std::vector<std::string>(n);
  const at::Tensor mine = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(mine.data_ptr()));
  const at::Tensor all = at::empty({total}, at::kByte);
  RETURN_IF_ERROR(Annotate(communicator->AllGatherV(mine, all, counts),
                           absl::StrCat(who, ": gathering bytes")));
  std::vector<std::string> out;
  const char* data = reinterpret_cast<const char*>(all.data_ptr());
  for (int64_t count : counts) {
    out.emplace_back(data, static_cast<size_t>(count));
    data += count;
  }
  return out;
}

}  // namespace mtb
