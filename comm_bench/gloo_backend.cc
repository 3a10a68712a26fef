#include "comm_bench/gloo_backend.h"

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "ATen/core/Tensor.h"
#include "ATen/ops/from_blob.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm_bench/host_buffer.h"
#include "common/collective/communicator.h"
#include "common/collective/shared_region.h"
#include "common/base/status.h"
#include "glog/logging.h"

namespace mtb::comm_bench {
namespace {

c10::ScalarType TorchType(DType dtype) {
  return dtype == DType::kFloat32 ? c10::kFloat : c10::kBFloat16;
}

collective::ReduceOp DistOp(RedOp op) {
  return op == RedOp::kSum ? collective::ReduceOp::kSum : collective::ReduceOp::kMax;
}

class SharedRegionBuffer : public DeviceBuffer {
 public:
  explicit SharedRegionBuffer(std::unique_ptr<collective::SharedMemoryRegion> region)
      : region_(std::move(region)) {}
  void* data() const override { return region_->data(); }
  int64_t bytes() const override { return region_->bytes(); }

 private:
  std::unique_ptr<collective::SharedMemoryRegion> region_;
};

class GlooBackend : public Backend {
 public:
  explicit GlooBackend(collective::Communicator& communicator)
      : communicator_(communicator) {
    // The algorithm of the collective that just completed (blocking calls
    // complete on this thread, so it is ours).
    observer_id_ = communicator_.log().AddObserver(
        [this](collective::CollectiveEvent event, const collective::CollectiveRecord& record) {
          if (event == collective::CollectiveEvent::kCompleted) last_ = record.algorithm;
        });
  }
  ~GlooBackend() override { communicator_.log().RemoveObserver(observer_id_); }

  std::string name() const override { return "gloo"; }
  int rank() const override { return communicator_.rank(); }
  int world_size() const override { return communicator_.world_size(); }

  absl::StatusOr<Support> Supports(OpKind op, DType dtype,
                                   RedOp redop) const override {
    return GlooSupports(op, dtype, redop);
  }

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int64_t bytes) override {
    return AllocateHostBuffer(bytes);
  }

  // A region of the communicator's (its transport must be "shm").
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> AllocateShared(int64_t bytes) override {
    if (communicator_.transport() != "shm") {
      return absl::UnimplementedError(absl::StrCat("gloo: the transport is ",
                                                   communicator_.transport(),
                                                   "; no memory shared by every rank"));
    }
    ASSIGN_OR_RETURN(
        std::unique_ptr<collective::SharedMemoryRegion> region,
        collective::MapSharedRegion(communicator_,
                                    absl::StrCat("comm_bench_", shared_regions_++), bytes));
    return std::unique_ptr<DeviceBuffer>(new SharedRegionBuffer(std::move(region)));
  }

  absl::Status CopyFromHost(void* destination, const void* source,
                            int64_t bytes) override {
    std::memcpy(destination, source, bytes);
    return absl::OkStatus();
  }

  absl::Status CopyToHost(void* destination, const void* source,
                          int64_t bytes) override {
    std::memcpy(destination, source, bytes);
    return absl::OkStatus();
  }

  absl::Status AllReduce(const void* send, void* recv, int64_t count,
                         DType dtype, RedOp op) override {
    const bool copied = CopyIfDistinct(send, recv, count, dtype);
    RETURN_IF_ERROR(communicator_.AllReduce(Tensor(recv, count, dtype), DistOp(op)));
    if (copied) last_ = "copy+" + last_;
    return absl::OkStatus();
  }

  absl::Status Broadcast(const void* send, void* recv, int64_t count,
                         DType dtype, int root) override {
    const bool copied = rank() == root && CopyIfDistinct(send, recv, count, dtype);
    RETURN_IF_ERROR(communicator_.Broadcast(Tensor(recv, count, dtype), root));
    if (copied) last_ = "copy+" + last_;
    return absl::OkStatus();
  }

  absl::Status AllGather(const void* send, void* recv, int64_t send_count,
                         DType dtype) override {
    return communicator_.AllGather(Tensor(send, send_count, dtype),
                                   Tensor(recv, send_count * world_size(), dtype));
  }

  absl::Status ReduceScatter(const void* send, void* recv, int64_t recv_count,
                             DType dtype, RedOp op) override {
    return communicator_.ReduceScatter(
        Tensor(send, recv_count * world_size(), dtype),
        Tensor(recv, recv_count, dtype), DistOp(op));
  }

  absl::Status AllToAll(const void* send, void* recv, int64_t count_per_peer,
                        DType dtype) override {
    const int64_t count = count_per_peer * world_size();
    return communicator_.AllToAll(Tensor(send, count, dtype),
                                  Tensor(recv, count, dtype));
  }

  absl::Status AllToAllV(const void* send, const std::vector<int64_t>& send_counts,
                         void* recv, const std::vector<int64_t>& recv_counts,
                         DType dtype) override {
    int64_t send_total = 0;
    int64_t recv_total = 0;
    for (int64_t count : send_counts) send_total += count;
    for (int64_t count : recv_counts) recv_total += count;
    return communicator_.AllToAllV(Tensor(send, send_total, dtype),
                                   Tensor(recv, recv_total, dtype), send_counts,
                                   recv_counts);
  }

  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::Status Barrier() override { return communicator_.Barrier(); }

  absl::Status BeginInterval() override {
    interval_start_ = std::chrono::steady_clock::now();
    return absl::OkStatus();
  }

  absl::StatusOr<double> EndInterval() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         interval_start_)
        .count();
  }

  absl::StatusOr<std::string> AllGatherHostBytes(absl::string_view local) override {
    const int64_t bytes = static_cast<int64_t>(local.size());
    std::string input(local);
    std::string all(bytes * world_size(), '\0');
    const auto options = at::TensorOptions().dtype(c10::kByte);
    RETURN_IF_ERROR(communicator_.AllGather(
        at::from_blob(input.data(), {bytes}, options),
        at::from_blob(all.data(), {bytes * world_size()}, options)));
    return all;
  }

  std::string LastAlgorithm() const override { return last_; }

 private:
  // A tensor viewing `count` elements at `data` (no copy). Cached: from_blob
  // costs about a microsecond, which would show in small sizes' times.
  at::Tensor Tensor(const void* data, int64_t count, DType dtype) {
    const auto key = std::make_tuple(data, count, dtype);
    auto found = tensors_.find(key);
    if (found != tensors_.end()) return found->second;
    if (tensors_.size() > 64) tensors_.clear();
    at::Tensor tensor = at::from_blob(const_cast<void*>(data), {count},
                                      at::TensorOptions().dtype(TorchType(dtype)));
    tensors_.emplace(key, tensor);
    return tensor;
  }

  bool CopyIfDistinct(const void* send, void* recv, int64_t count, DType dtype) {
    if (send == recv) return false;
    std::memcpy(recv, send, count * ElementSize(dtype));
    return true;
  }

  collective::Communicator& communicator_;
  collective::CollectiveLog::ObserverId observer_id_ = -1;
  std::map<std::tuple<const void*, int64_t, DType>, at::Tensor> tensors_;
  std::chrono::steady_clock::time_point interval_start_;
  std::string last_;
  int shared_regions_ = 0;  // AllocateShared calls: each region's store name
};

}  // namespace

absl::StatusOr<Support> GlooSupports(OpKind, DType dtype, RedOp) {
  Support support;
  support.emulated = dtype == DType::kBFloat16;
  return support;
}

std::unique_ptr<Backend> NewGlooBackend(collective::Communicator& communicator) {
  return std::make_unique<GlooBackend>(communicator);
}

}  // namespace mtb::comm_bench
