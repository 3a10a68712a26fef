// Internal to common/collective: the element-wise reductions of the
// shared-memory transport (shm_transport.h), torch-free and built with -O3;
// each kernel is compiled for AVX-512 (x86-64-v4), AVX2 (x86-64-v3) and the
// baseline and picked at load time by the CPU it runs on (GCC target_clones).
#ifndef MTB_COMMON_COLLECTIVE_SHM_REDUCE_H_
#define MTB_COMMON_COLLECTIVE_SHM_REDUCE_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace mtb::collective {

// float16 is reduced in float32 (each element rounded once, after the last
// input).
enum class ShmDtype { kFloat32, kFloat64, kFloat16, kInt32, kInt64, kInt8, kUint8 };
enum class ShmReduceOp { kSum, kMax, kMin };

int64_t ShmDtypeSize(ShmDtype dtype);
absl::string_view ShmDtypeName(ShmDtype dtype);

// out[i] = ((inputs[0][i] op inputs[1][i]) op inputs[2][i]) ... for i in
// [0, count): rank order, so every rank that reduces the same inputs gets the
// same bits. `out` may be one of the inputs (each element is read from every
// input before it is written). n_inputs >= 1.
void ShmReduce(void* out, const void* const* inputs, int n_inputs, int64_t count, ShmDtype dtype,
               ShmReduceOp op);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_SHM_REDUCE_H_
