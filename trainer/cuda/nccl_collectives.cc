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

class NcclCollectives : public SyncCollectives {
 public:
  NcclCollectives(ncclComm_t comm, cudaStream_t stream, int rank)
      : comm_(comm), stream_(stream), rank_(rank) {}
  ~NcclCollectives() override {
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }

  absl::Status AllReduceAverage(float* data, int64_t numel) override {
    if (ncclResult_t r = ncclAllReduce(data, data, static_cast<size_t>(numel), ncclFloat32,
                                       ncclAvg, comm_, stream_);
        r != ncclSuccess) {
      return NcclError(r, "ncclAllReduce");
    }
    if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess) {
      return CudaError(e, "cudaStreamSynchronize after ncclAllReduce");
    }
    return absl::OkStatus();
  }

  absl::Status ReduceScatterAverage(const float*, float*, const std::vector<int64_t>&) override {
    return absl::UnimplementedError("zero1 over NCCL is not written yet (ddp only)");
  }

  absl::Status AllGatherInPlace(float*, const std::vector<int64_t>&) override {
    return absl::UnimplementedError("zero1 over NCCL is not written yet (ddp only)");
  }

 private:
  ncclComm_t comm_;
  cudaStream_t stream_;
  int rank_;
};

}  // namespace

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
    all.push_back(std::make_unique<NcclCollectives>(comms[rank], stream, rank));
  }
  cudaSetDevice(0);
  return all;
}

}  // namespace cuda
}  // namespace mtb
