// Internal to common/collective: the argument checks every collective runs before
// it communicates, and the tensors handed to Gloo in place of the caller's.
//
// Vocabulary: the *caller tensor* is what the tool passed; the *transport
// tensor* is what c10d/Gloo sees: the caller tensor itself, a same-size bit
// view for dtypes Gloo rejects in copy-only collectives (bfloat16, int16 ->
// float16 bits; bool -> uint8), or a float32 copy for bfloat16 reductions
// (emulated). Messages have the form "<what>: <problem>" where <what> names the
// collective and the rank ("all_gather on rank 1 of 3").
#ifndef MTB_COMMON_COLLECTIVE_TENSOR_CHECKS_H_
#define MTB_COMMON_COLLECTIVE_TENSOR_CHECKS_H_

#include <cstdint>
#include <string>

#include "ATen/core/Tensor.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace mtb::collective {

enum class TensorUse {
  kCopy,    // bits are moved, never combined
  kReduce,  // values are combined (sum, max, min, avg)
};

// Defined, strided, CPU, contiguous, and a dtype `use` supports.
absl::Status CheckTensor(absl::string_view what, absl::string_view name,
                         const at::Tensor& tensor, TensorUse use);
// `other` has `reference`'s dtype.
absl::Status CheckSameDtype(absl::string_view what, absl::string_view name,
                            const at::Tensor& other,
                            absl::string_view reference_name,
                            const at::Tensor& reference);
// At least one dimension (V collectives count rows along dim 0).
absl::Status CheckHasRows(absl::string_view what, absl::string_view name,
                          const at::Tensor& tensor);
// Dims 1.. of `other` equal those of `reference`.
absl::Status CheckSameRowShape(absl::string_view what, absl::string_view name,
                               const at::Tensor& other,
                               absl::string_view reference_name,
                               const at::Tensor& reference);
// world_size entries, none negative.
absl::Status CheckCounts(absl::string_view what, absl::string_view name,
                         absl::Span<const int64_t> counts, int world_size);
// The two tensors' bytes do not overlap.
absl::Status CheckNoOverlap(absl::string_view what, const at::Tensor& input,
                            const at::Tensor& output);
// input does not overlap output, or is exactly output's flat elements
// [offset, offset + input.numel()) (an in-place all-gather).
absl::Status CheckNoOverlapExceptSlot(absl::string_view what,
                                      const at::Tensor& input,
                                      const at::Tensor& output, int64_t offset);

// Elements of one row: the product of dims 1.. (1 for a 1-D tensor).
int64_t RowNumel(const at::Tensor& tensor);
int64_t Sum(absl::Span<const int64_t> counts);

struct TransportTensor {
  at::Tensor tensor;
  // tensor is a float32 copy of a bfloat16 caller tensor.
  bool emulated = false;
};

// A same-size view Gloo accepts for moving `tensor`'s bits (the tensor itself
// when Gloo takes its dtype).
at::Tensor BitsView(const at::Tensor& tensor);
// For reductions: the tensor itself, or a float32 copy of a bfloat16 one.
TransportTensor ForReduction(const at::Tensor& tensor);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_TENSOR_CHECKS_H_
