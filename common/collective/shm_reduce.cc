// Reductions in blocks: each block of kBlock elements is accumulated in a
// local array over every input, then stored, so `out` may alias an input and
// the inner loops are plain, alias-free loops the compiler vectorises.
#include "common/collective/shm_reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "glog/logging.h"

namespace mtb::collective {
namespace {

constexpr int64_t kBlock = 1024;

template <typename T, ShmReduceOp kOp>
inline T Combine(T a, T b) {
  if constexpr (kOp == ShmReduceOp::kSum) {
    return static_cast<T>(a + b);
  } else if constexpr (kOp == ShmReduceOp::kMax) {
    return a < b ? b : a;
  } else {
    return b < a ? b : a;
  }
}

// AVX-512 (x86-64-v4: 512-bit loads, adds and stores), AVX2 (x86-64-v3) and
// the baseline, picked at load time.
#define MTB_SHM_REDUCE_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

template <typename T, ShmReduceOp kOp>
MTB_SHM_REDUCE_CLONES void ReduceTyped(T* out,
                                                                   const void* const* inputs,
                                                                   int n_inputs, int64_t count) {
  alignas(64) T acc[kBlock];
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t n = std::min(kBlock, count - begin);
    const T* first = static_cast<const T*>(inputs[0]) + begin;
    for (int64_t i = 0; i < n; ++i) acc[i] = first[i];
    for (int p = 1; p < n_inputs; ++p) {
      const T* in = static_cast<const T*>(inputs[p]) + begin;
      for (int64_t i = 0; i < n; ++i) acc[i] = Combine<T, kOp>(acc[i], in[i]);
    }
    std::memcpy(out + begin, acc, n * sizeof(T));
  }
}

template <typename T>
void ReduceForOp(void* out, const void* const* inputs, int n_inputs, int64_t count,
                 ShmReduceOp op) {
  T* typed = static_cast<T*>(out);
  switch (op) {
    case ShmReduceOp::kSum:
      return ReduceTyped<T, ShmReduceOp::kSum>(typed, inputs, n_inputs, count);
    case ShmReduceOp::kMax:
      return ReduceTyped<T, ShmReduceOp::kMax>(typed, inputs, n_inputs, count);
    case ShmReduceOp::kMin:
      return ReduceTyped<T, ShmReduceOp::kMin>(typed, inputs, n_inputs, count);
  }
}

// IEEE half <-> single, round to nearest even (what c10::Half does).
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline uint16_t FloatToHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // inf or nan
    return sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u);
  }
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;    // rounds past 65504
  if (magnitude < 0x38800000u) {                          // subnormal or zero
    const float scaled = std::fabs(value) * 16777216.0f;  // 2^24
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
}

template <ShmReduceOp kOp>
MTB_SHM_REDUCE_CLONES void ReduceHalf(uint16_t* out, const void* const* inputs, int n_inputs, int64_t count) {
  alignas(64) float acc[kBlock];
  for (int64_t begin = 0; begin < count; begin += kBlock) {
    const int64_t n = std::min(kBlock, count - begin);
    const uint16_t* first = static_cast<const uint16_t*>(inputs[0]) + begin;
    for (int64_t i = 0; i < n; ++i) acc[i] = HalfToFloat(first[i]);
    for (int p = 1; p < n_inputs; ++p) {
      const uint16_t* in = static_cast<const uint16_t*>(inputs[p]) + begin;
      for (int64_t i = 0; i < n; ++i) acc[i] = Combine<float, kOp>(acc[i], HalfToFloat(in[i]));
    }
    for (int64_t i = 0; i < n; ++i) out[begin + i] = FloatToHalf(acc[i]);
  }
}

}  // namespace

int64_t ShmDtypeSize(ShmDtype dtype) {
  switch (dtype) {
    case ShmDtype::kFloat32:
    case ShmDtype::kInt32:
      return 4;
    case ShmDtype::kFloat64:
    case ShmDtype::kInt64:
      return 8;
    case ShmDtype::kFloat16:
      return 2;
    case ShmDtype::kInt8:
    case ShmDtype::kUint8:
      return 1;
  }
  return 1;
}

absl::string_view ShmDtypeName(ShmDtype dtype) {
  switch (dtype) {
    case ShmDtype::kFloat32:
      return "float32";
    case ShmDtype::kFloat64:
      return "float64";
    case ShmDtype::kFloat16:
      return "float16";
    case ShmDtype::kInt32:
      return "int32";
    case ShmDtype::kInt64:
      return "int64";
    case ShmDtype::kInt8:
      return "int8";
    case ShmDtype::kUint8:
      return "uint8";
  }
  return "unknown";
}

void ShmReduce(void* out, const void* const* inputs, int n_inputs, int64_t count, ShmDtype dtype,
               ShmReduceOp op) {
  CHECK_GE(n_inputs, 1);
  switch (dtype) {
    case ShmDtype::kFloat32:
      return ReduceForOp<float>(out, inputs, n_inputs, count, op);
    case ShmDtype::kFloat64:
      return ReduceForOp<double>(out, inputs, n_inputs, count, op);
    case ShmDtype::kFloat16: {
      uint16_t* typed = static_cast<uint16_t*>(out);
      switch (op) {
        case ShmReduceOp::kSum:
          return ReduceHalf<ShmReduceOp::kSum>(typed, inputs, n_inputs, count);
        case ShmReduceOp::kMax:
          return ReduceHalf<ShmReduceOp::kMax>(typed, inputs, n_inputs, count);
        case ShmReduceOp::kMin:
          return ReduceHalf<ShmReduceOp::kMin>(typed, inputs, n_inputs, count);
      }
      return;
    }
    case ShmDtype::kInt32:
      return ReduceForOp<int32_t>(out, inputs, n_inputs, count, op);
    case ShmDtype::kInt64:
      return ReduceForOp<int64_t>(out, inputs, n_inputs, count, op);
    case ShmDtype::kInt8:
      return ReduceForOp<int8_t>(out, inputs, n_inputs, count, op);
    case ShmDtype::kUint8:
      return ReduceForOp<uint8_t>(out, inputs, n_inputs, count, op);
  }
}

}  // namespace mtb::collective
