#include "comm_bench/host_buffer.h"

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mtb::comm_bench {
namespace {

class HostBuffer : public DeviceBuffer {
 public:
  // aligned_alloc wants a multiple of the alignment.
  explicit HostBuffer(int64_t bytes)
      : data_(std::aligned_alloc(64, (bytes + 63) / 64 * 64)), bytes_(bytes) {}
  ~HostBuffer() override { std::free(data_); }
  void* data() const override { return data_; }
  int64_t bytes() const override { return bytes_; }

 private:
  void* data_;
  int64_t bytes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceBuffer>> AllocateHostBuffer(
    int64_t bytes) {
  auto buffer = std::make_unique<HostBuffer>(bytes);
  if (buffer->data() == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes of host memory"));
  }
  return std::unique_ptr<DeviceBuffer>(std::move(buffer));
}

}  // namespace mtb::comm_bench
