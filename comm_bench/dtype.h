// Element types and reduction operators comm_bench sweeps, and how their
// values are written to and read from host memory (bf16 by hand: no LibTorch
// here, the harness also serves the NCCL binary).
#ifndef MTB_COMM_BENCH_DTYPE_H_
#define MTB_COMM_BENCH_DTYPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb::comm_bench {

enum class DType { kFloat32, kBFloat16 };
enum class RedOp { kSum, kMax };

// "float32", "bfloat16": the flag spelling, used in JSON.
absl::string_view DTypeName(DType dtype);
// nccl-tests' spelling for the stdout table: "float", "bfloat16".
absl::string_view NcclTestsTypeName(DType dtype);
int64_t ElementSize(DType dtype);
// The largest L such that every integer in [-L, L] is exact in `dtype`:
// 2^24 for float32 (24-bit significand), 2^8 for bfloat16 (8-bit).
int64_t ExactIntegerLimit(DType dtype);
absl::StatusOr<DType> ParseDType(absl::string_view flag, absl::string_view text);

absl::string_view RedOpName(RedOp op);  // "sum", "max"
absl::StatusOr<RedOp> ParseRedOp(absl::string_view flag, absl::string_view text);

// bf16 <-> float: round to nearest even (NaN stays NaN); exact for the small
// integers the check pass uses.
uint16_t FloatToBFloat16(float value);
float BFloat16ToFloat(uint16_t bits);

// Host memory holding `size` elements of `dtype`.
class HostArray {
 public:
  HostArray(DType dtype, int64_t size);
  DType dtype() const { return dtype_; }
  int64_t size() const { return size_; }
  int64_t bytes() const { return static_cast<int64_t>(storage_.size()); }
  void* data() { return storage_.data(); }
  const void* data() const { return storage_.data(); }
  void Set(int64_t index, float value);
  float Get(int64_t index) const;
  void Fill(float value);

 private:
  DType dtype_;
  int64_t size_;
  std::vector<unsigned char> storage_;
};

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_DTYPE_H_
