#include "comm_bench/dtype.h"

#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace mtb::comm_bench {

absl::string_view DTypeName(DType dtype) {
  return dtype == DType::kFloat32 ? "float32" : "bfloat16";
}

absl::string_view NcclTestsTypeName(DType dtype) {
  return dtype == DType::kFloat32 ? "float" : "bfloat16";
}

int64_t ElementSize(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

int64_t ExactIntegerLimit(DType dtype) {
  return dtype == DType::kFloat32 ? int64_t{1} << 24 : int64_t{1} << 8;
}

absl::StatusOr<DType> ParseDType(absl::string_view flag, absl::string_view text) {
  if (text == "float32") return DType::kFloat32;
  if (text == "bfloat16") return DType::kBFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", text, ": expected float32 or bfloat16"));
}

absl::string_view RedOpName(RedOp op) { return op == RedOp::kSum ? "sum" : "max"; }

absl::StatusOr<RedOp> ParseRedOp(absl::string_view flag, absl::string_view text) {
  if (text == "sum") return RedOp::kSum;
  if (text == "max") return RedOp::kMax;
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", text, ": expected sum or max"));
}

uint16_t FloatToBFloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float BFloat16ToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

HostArray::HostArray(DType dtype, int64_t size)
    : dtype_(dtype), size_(size), storage_(size * ElementSize(dtype)) {
  CHECK_GE(size, 0);
}

void HostArray::Set(int64_t index, float value) {
  DCHECK(index >= 0 && index < size_);
  if (dtype_ == DType::kFloat32) {
    std::memcpy(storage_.data() + index * 4, &value, 4);
  } else {
    const uint16_t bits = FloatToBFloat16(value);
    std::memcpy(storage_.data() + index * 2, &bits, 2);
  }
}

float HostArray::Get(int64_t index) const {
  DCHECK(index >= 0 && index < size_);
  if (dtype_ == DType::kFloat32) {
    float value;
    std::memcpy(&value, storage_.data() + index * 4, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, storage_.data() + index * 2, 2);
  return BFloat16ToFloat(bits);
}

void HostArray::Fill(float value) {
  for (int64_t i = 0; i < size_; ++i) Set(i, value);
}

}  // namespace mtb::comm_bench
