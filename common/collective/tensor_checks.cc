#include "common/collective/tensor_checks.h"

#include <cstdint>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "c10/util/StringUtil.h"
#include "common/libtorch/dtype.h"

namespace mtb::collective {
namespace {

// What c10d's ProcessGroupGloo (1.13) accepts in every collective.
bool GlooTakes(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kChar:
    case at::kByte:
    case at::kInt:
    case at::kLong:
      return true;
    default:
      return false;
  }
}

bool Supported(at::ScalarType dtype, TensorUse use) {
  if (GlooTakes(dtype) || dtype == at::kBFloat16) return true;
  return use == TensorUse::kCopy && (dtype == at::kShort || dtype == at::kBool);
}

const char* SupportedList(TensorUse use) {
  return use == TensorUse::kCopy
             ? "float32, float64, float16, bfloat16, int8, uint8, int16, "
               "int32, int64, bool"
             : "float32, float64, float16, bfloat16, int8, uint8, int32, int64";
}

struct ByteRange {
  uintptr_t begin;
  uintptr_t end;
};

ByteRange Bytes(const at::Tensor& tensor) {
  const auto begin = reinterpret_cast<uintptr_t>(tensor.data_ptr());
  return {begin, begin + static_cast<uintptr_t>(tensor.nbytes())};
}

bool Overlap(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const ByteRange x = Bytes(a);
  const ByteRange y = Bytes(b);
  return x.begin < y.end && y.begin < x.end;
}

}  // namespace

absl::Status CheckTensor(absl::string_view what, absl::string_view name,
                         const at::Tensor& tensor, TensorUse use) {
  if (!tensor.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", name, " is an undefined tensor"));
  }
  if (tensor.layout() != at::kStrided) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", name, " has layout ", c10::toString(tensor.layout()),
        "; collectives take dense (strided) tensors"));
  }
  if (!tensor.device().is_cpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", name, " is on ", tensor.device().str(),
                     "; the Gloo backend takes CPU tensors"));
  }
  if (!tensor.is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", name, " is not contiguous (shape ",
        c10::str(tensor.sizes()), ", strides ", c10::str(tensor.strides()),
        "); pass tensor.contiguous()"));
  }
  if (!Supported(tensor.scalar_type(), use)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", name, " has dtype ", DtypeName(tensor.scalar_type()),
        ", which it cannot ", use == TensorUse::kCopy ? "move" : "reduce",
        "; supported: ", SupportedList(use)));
  }
  return absl::OkStatus();
}

absl::Status CheckSameDtype(absl::string_view what, absl::string_view name,
                            const at::Tensor& other,
                            absl::string_view reference_name,
                            const at::Tensor& reference) {
  if (other.scalar_type() == reference.scalar_type()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": ", name, " has dtype ", DtypeName(other.scalar_type()), " but ",
      reference_name, " has ", DtypeName(reference.scalar_type()),
      "; they must match"));
}

absl::Status CheckHasRows(absl::string_view what, absl::string_view name,
                          const at::Tensor& tensor) {
  if (tensor.dim() >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": ", name,
                   " is a 0-dim tensor; counts are rows along dim 0, so it "
                   "needs at least one dimension"));
}

absl::Status CheckSameRowShape(absl::string_view what, absl::string_view name,
                               const at::Tensor& other,
                               absl::string_view reference_name,
                               const at::Tensor& reference) {
  if (other.sizes().slice(1) == reference.sizes().slice(1)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": ", name, " has shape ", c10::str(other.sizes()), " and ",
      reference_name, " has shape ", c10::str(reference.sizes()),
      "; all dims after dim 0 must match"));
}

absl::Status CheckCounts(absl::string_view what, absl::string_view name,
                         absl::Span<const int64_t> counts, int world_size) {
  if (static_cast<int64_t>(counts.size()) != world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", name, " has ", counts.size(),
        " entries, expected one per rank: world_size ", world_size));
  }
  for (int p = 0; p < world_size; ++p) {
    if (counts[p] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", name, "[", p,
                                                     "] is ", counts[p],
                                                     "; counts must be >= 0"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckNoOverlap(absl::string_view what, const at::Tensor& input,
                            const at::Tensor& output) {
  if (!Overlap(input, output)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what,
      ": input and output share memory; this collective needs separate "
      "buffers"));
}

absl::Status CheckNoOverlapExceptSlot(absl::string_view what,
                                      const at::Tensor& input,
                                      const at::Tensor& output,
                                      int64_t offset) {
  if (!Overlap(input, output)) return absl::OkStatus();
  const auto slot = reinterpret_cast<uintptr_t>(output.data_ptr()) +
                    static_cast<uintptr_t>(offset * output.element_size());
  if (reinterpret_cast<uintptr_t>(input.data_ptr()) == slot) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what,
      ": input overlaps output other than as this rank's own block "
      "(output elements [",
      offset, ", ", offset + input.numel(),
      ")); pass separate buffers or exactly that block"));
}

int64_t RowNumel(const at::Tensor& tensor) {
  int64_t numel = 1;
  for (int64_t size : tensor.sizes().slice(1)) numel *= size;
  return numel;
}

int64_t Sum(absl::Span<const int64_t> counts) {
  int64_t sum = 0;
  for (int64_t count : counts) sum += count;
  return sum;
}

at::Tensor BitsView(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kBFloat16:
    case at::kShort:
      return tensor.view(at::kHalf);
    case at::kBool:
      return tensor.view(at::kByte);
    default:
      return tensor;
  }
}

TransportTensor ForReduction(const at::Tensor& tensor) {
  if (tensor.scalar_type() == at::kBFloat16) {
    return {tensor.to(at::kFloat), /*emulated=*/true};
  }
  return {tensor, /*emulated=*/false};
}

}  // namespace mtb::collective
