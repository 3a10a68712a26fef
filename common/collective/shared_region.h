// Memory shared by every rank of a group on one host, for benchmarks that
// measure what shared memory itself moves (comm_bench's ceiling,
// docs/comm_bench.md "Ceiling"). Like the shared-memory transport's segment
// (shm_transport.h), it is an anonymous memory file created by rank 0 and
// handed to the others over an abstract Unix socket: never named in
// /dev/shm, freed by the kernel with the last mapping, whatever kills a rank.
#ifndef MTB_COMMON_COLLECTIVE_SHARED_REGION_H_
#define MTB_COMMON_COLLECTIVE_SHARED_REGION_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/collective/communicator.h"

namespace mtb::collective {

// Unmapped by the destructor.
class SharedMemoryRegion {
 public:
  SharedMemoryRegion(void* data, int64_t bytes) : data_(data), bytes_(bytes) {}
  ~SharedMemoryRegion();
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;
  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }

 private:
  void* const data_;
  const int64_t bytes_;
};

// `bytes` of zero-filled memory mapped by every rank of `communicator`.
// Collective: every rank calls it at the same point with the same `name`
// (its store keys: one region per name per group) and `bytes`.
// kFailedPrecondition unless communicator.transport() is "shm" (every rank
// on this host); waits up to the communicator's timeout for the peers.
absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> MapSharedRegion(
    const Communicator& communicator, absl::string_view name, int64_t bytes);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_SHARED_REGION_H_
