// Names of tensor dtypes as torch spells them in Python ("float32",
// "bfloat16", "int64"), for flags, records and messages.
#ifndef MTB_COMMON_LIBTORCH_DTYPE_H_
#define MTB_COMMON_LIBTORCH_DTYPE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "c10/core/ScalarType.h"

namespace mtb {

// "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16",
// "int32", "int64", "bool"; c10's own name for anything else.
absl::string_view DtypeName(c10::ScalarType dtype);

// The inverse of DtypeName for the names above, plus the aliases "float",
// "double", "half", "long", "int"; kInvalidArgument listing the accepted names
// otherwise.
absl::StatusOr<c10::ScalarType> ParseDtype(absl::string_view name);

}  // namespace mtb

#endif  // MTB_COMMON_LIBTORCH_DTYPE_H_
