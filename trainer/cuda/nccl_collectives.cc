#include "trainer/cuda/nccl_collectives.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mtb {
namespace cuda {
namespace {

absl::Status NcclError(ncclResult_t result, const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", ncclGetErrorString(result)));
}

absl::Status CudaError(cudaError_t result, const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(result)));
}

// Each call runs on this rank's own stream. Outside a LaunchAfter..Drain
// window it returns once the collective is complete; inside, once it is
// enqueued behind the model's event (the overlap with backward).
class NcclCollectives : public SyncCollectives, public CollectiveStream {
 public:
  NcclCollectives(ncclComm_t comm, cudaStream_t stream, int rank, int world_size)
      : comm_(comm), stream_(stream), rank_(rank), world_size_(world_size) {}
  ~NcclCollectives() override {
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }

  void LaunchAfter(void* ready) override {
    deferred_ = true;
    if (const cudaError_t e = cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(ready), 0);
        e != cudaSuccess && pending_.ok()) {
      pending_ = CudaError(e, "cudaStreamWaitEvent before a bucket");
    }
  }

  absl::Status Drain() override {
    deferred_ = false;
    absl::Status status = pending_;
    pending_ = absl::OkStatus();
    if (const cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess && status.ok()) {
      status = CudaError(e, "cudaStreamSynchronize after the buckets");
    }
    return status;
  }

  absl::Status AllReduceAverage(float* data, int64_t numel) override {
    if (ncclResult_t r = ncclAllReduce(data, data, static_cast<size_t>(numel), ncclFloat32,
                                       ncclAvg, comm_, stream_);
        r != ncclSuccess) {
      return NcclError(r, "ncclAllReduce");
    }
    return Complete("ncclAllReduce");
  }

  // NCCL's reduce-scatter takes equal counts; ShardCounts makes the first
  // numel % n ranks one longer (the CPU trainer's split, which the
  // checkpoints' placements record). Equal counts: ncclReduceScatter;
  // otherwise one ncclReduce per rank to that rank (its count), grouped:
  // the same bytes per rank as a reduce-scatter, not an all-reduce's twice.
  absl::Status ReduceScatterAverage(const float* bucket, float* shard,
                                    const std::vector<int64_t>& counts) override {
    if (Equal(counts)) {
      if (ncclResult_t r = ncclReduceScatter(bucket, shard, static_cast<size_t>(counts[0]),
                                             ncclFloat32, ncclAvg, comm_, stream_);
          r != ncclSuccess) {
        return NcclError(r, "ncclReduceScatter");
      }
      return Complete("ncclReduceScatter");
    }
    ncclGroupStart();
    int64_t start = 0;
    for (int root = 0; root < world_size_; ++root) {
      float* out = root == rank_ ? shard : nullptr;
      if (ncclResult_t r = ncclReduce(bucket + start, out, static_cast<size_t>(counts[root]),
                                      ncclFloat32, ncclAvg, root, comm_, stream_);
          r != ncclSuccess) {
        ncclGroupEnd();
        return NcclError(r, "ncclReduce (an uneven reduce-scatter)");
      }
      start += counts[root];
    }
    if (ncclResult_t r = ncclGroupEnd(); r != ncclSuccess) {
      return NcclError(r, "ncclGroupEnd (an uneven reduce-scatter)");
    }
    return Complete("ncclReduce");
  }

  // In place: equal counts, ncclAllGather from this rank's slot (NCCL's
  // in-place form); otherwise one ncclBroadcast per rank of its slot,
  // grouped.
  absl::Status AllGatherInPlace(float* bucket, const std::vector<int64_t>& counts) override {
    int64_t start = 0;
    for (int p = 0; p < rank_; ++p) start += counts[p];
    if (Equal(counts)) {
      if (ncclResult_t r = ncclAllGather(bucket + start, bucket, static_cast<size_t>(counts[0]),
                                         ncclFloat32, comm_, stream_);
          r != ncclSuccess) {
        return NcclError(r, "ncclAllGather");
      }
      return Complete("ncclAllGather");
    }
    ncclGroupStart();
    start = 0;
    for (int root = 0; root < world_size_; ++root) {
      if (ncclResult_t r = ncclBroadcast(bucket + start, bucket + start,
                                         static_cast<size_t>(counts[root]), ncclFloat32, root,
                                         comm_, stream_);
          r != ncclSuccess) {
        ncclGroupEnd();
        return NcclError(r, "ncclBroadcast (an uneven all-gather)");
      }
      start += counts[root];
    }
    if (ncclResult_t r = ncclGroupEnd(); r != ncclSuccess) {
      return NcclError(r, "ncclGroupEnd (an uneven all-gather)");
    }
    return Complete("ncclBroadcast");
  }

 private:
  static bool Equal(const std::vector<int64_t>& counts) {
    for (int64_t c : counts) {
      if (c != counts[0]) return false;
    }
    return true;
  }
  // Outside an overlap window: wait for the collective.
  absl::Status Complete(const char* what) {
    if (deferred_) return absl::OkStatus();
    if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess) {
      return CudaError(e, what);
    }
    return absl::OkStatus();
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  int rank_;
  int world_size_;
  bool deferred_ = false;
  absl::Status pending_;
};

}  // namespace

CollectiveStream* StreamOf(SyncCollectives* collectives) {
  return dynamic_cast<NcclCollectives*>(collectives);
}

std::vector<std::unique_ptr<SyncCollectives>> MakeNcclCollectives(int n, std::string* error) {
  std::vector<std::unique_ptr<SyncCollectives>> all;
  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess) {
    *error = absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorString(e));
    return all;
  }
  if (devices < n) {
    *error = absl::StrCat(n, " ranks need ", n, " GPUs; ", devices,
                          " visible (NCCL does not run two ranks on one GPU)");
    return all;
  }
  std::vector<ncclComm_t> comms(n);
  std::vector<int> list(n);
  std::iota(list.begin(), list.end(), 0);
  if (ncclResult_t r = ncclCommInitAll(comms.data(), n, list.data()); r != ncclSuccess) {
    *error = absl::StrCat("ncclCommInitAll: ", ncclGetErrorString(r));
    return all;
  }
  for (int rank = 0; rank < n; ++rank) {
    cudaStream_t stream = nullptr;
    cudaError_t e = cudaSetDevice(rank);
    if (e == cudaSuccess) e = cudaStreamCreate(&stream);
    if (e != cudaSuccess) {
      *error = absl::StrCat("a stream on GPU ", rank, ": ", cudaGetErrorString(e));
      for (int r = rank; r < n; ++r) ncclCommDestroy(comms[r]);
      all.clear();
      return all;
    }
    all.push_back(std::make_unique<NcclCollectives>(comms[rank], stream, rank, n));
  }
  cudaSetDevice(0);
  return all;
}

}  // namespace cuda
}  // namespace mtb
