#include "common/libtorch/dtype.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mtb {
namespace {

constexpr std::pair<absl::string_view, c10::ScalarType> kNames[] = {
    {"float32", c10::ScalarType::Float},
    {"float64", c10::ScalarType::Double},
    {"float16", c10::ScalarType::Half},
    {"bfloat16", c10::ScalarType::BFloat16},
    {"int8", c10::ScalarType::Char},
    {"uint8", c10::ScalarType::Byte},
    {"int16", c10::ScalarType::Short},
    {"int32", c10::ScalarType::Int},
    {"int64", c10::ScalarType::Long},
    {"bool", c10::ScalarType::Bool},
};

constexpr std::pair<absl::string_view, c10::ScalarType> kAliases[] = {
    {"float", c10::ScalarType::Float}, {"double", c10::ScalarType::Double},
    {"half", c10::ScalarType::Half},   {"long", c10::ScalarType::Long},
    {"int", c10::ScalarType::Int},
};

}  // namespace

absl::string_view DtypeName(c10::ScalarType dtype) {
  for (const auto& [name, type] : kNames) {
    if (type == dtype) return name;
  }
  return c10::toString(dtype);
}

absl::StatusOr<c10::ScalarType> ParseDtype(absl::string_view name) {
  for (const auto& [known, type] : kNames) {
    if (known == name) return type;
  }
  for (const auto& [known, type] : kAliases) {
    if (known == name) return type;
  }
  std::string accepted;
  for (const auto& [known, type] : kNames) {
    absl::StrAppend(&accepted, accepted.empty() ? "" : ", ", known);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "'; expected one of ", accepted));
}

}  // namespace mtb
