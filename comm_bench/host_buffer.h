// Host memory as a DeviceBuffer: what the Gloo backend and the test thread
// backend allocate. Torch-free, CUDA-free (part of :harness).
#ifndef MTB_COMM_BENCH_HOST_BUFFER_H_
#define MTB_COMM_BENCH_HOST_BUFFER_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "comm_bench/backend.h"

namespace mtb::comm_bench {

// `bytes` of 64-byte aligned host memory (a cache line; what c10's allocator
// gives), freed with the buffer. kResourceExhausted when there is none.
absl::StatusOr<std::unique_ptr<DeviceBuffer>> AllocateHostBuffer(int64_t bytes);

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_HOST_BUFFER_H_
