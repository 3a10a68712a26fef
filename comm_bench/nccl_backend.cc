#include "comm_bench/nccl_backend.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "cuda_runtime_api.h"
#include "glog/logging.h"
#include "nccl.h"

namespace mtb::comm_bench {
namespace {

static_assert(sizeof(ncclUniqueId) == kNcclIdBytes, "ncclUniqueId size");

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const absl::StatusCode code =
      error == cudaErrorInsufficientDriver || error == cudaErrorNoDevice
          ? absl::StatusCode::kFailedPrecondition
          : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

absl::Status NcclStatus(ncclResult_t result, absl::string_view what) {
  if (result == ncclSuccess) return absl::OkStatus();
  const absl::StatusCode code = result == ncclInvalidArgument ||
                                        result == ncclInvalidUsage
                                    ? absl::StatusCode::kInvalidArgument
                                    : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(what, ": ", ncclGetErrorString(result)));
}

ncclDataType_t NcclType(DType dtype) {
  return dtype == DType::kFloat32 ? ncclFloat32 : ncclBfloat16;
}

ncclRedOp_t NcclOp(RedOp op) { return op == RedOp::kSum ? ncclSum : ncclMax; }

class CudaBuffer : public DeviceBuffer {
 public:
  CudaBuffer(void* data, int64_t bytes) : data_(data), bytes_(bytes) {}
  ~CudaBuffer() override {
    const cudaError_t error = cudaFree(data_);
    if (error != cudaSuccess) LOG(ERROR) << "cudaFree: " << cudaGetErrorString(error);
  }
  void* data() const override { return data_; }
  int64_t bytes() const override { return bytes_; }

 private:
  void* data_;
  int64_t bytes_;
};

class NcclBackend : public Backend {
 public:
  NcclBackend(int rank, int world_size) : rank_(rank), world_size_(world_size) {}

  ~NcclBackend() override {
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init(const NcclBackendOptions& options) {
    int devices = 0;
    RETURN_IF_ERROR(Annotate(CudaStatus(cudaGetDeviceCount(&devices), "cudaGetDeviceCount"),
                             absl::StrCat("rank ", rank_)));
    if (devices == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", rank_, ": no CUDA device is visible"));
    }
    device_ = options.local_rank % devices;
    const std::string where = absl::StrCat("rank ", rank_, " on GPU ", device_);
    RETURN_IF_ERROR(Annotate(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"), where));
    RETURN_IF_ERROR(Annotate(
        CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                   "cudaStreamCreate"),
        where));
    RETURN_IF_ERROR(Annotate(CudaStatus(cudaEventCreate(&start_), "cudaEventCreate"), where));
    RETURN_IF_ERROR(Annotate(CudaStatus(cudaEventCreate(&stop_), "cudaEventCreate"), where));
    ncclUniqueId id;
    if (options.nccl_id.size() != sizeof(id)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": NCCL id of ", options.nccl_id.size(), " bytes, expected ",
          sizeof(id)));
    }
    std::memcpy(&id, options.nccl_id.data(), sizeof(id));
    RETURN_IF_ERROR(Annotate(
        NcclStatus(ncclCommInitRank(&comm_, world_size_, id, rank_), "ncclCommInitRank"),
        where));
    return Annotate(CudaStatus(cudaMalloc(&scratch_, kScratchBytes), "cudaMalloc"), where);
  }

  std::string name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  absl::StatusOr<Support> Supports(OpKind op, DType dtype,
                                   RedOp redop) const override {
    return NcclSupports(op, dtype, redop);
  }

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int64_t bytes) override {
    void* data = nullptr;
    RETURN_IF_ERROR(CudaStatus(cudaMalloc(&data, bytes),
                               absl::StrCat("cudaMalloc of ", bytes, " bytes")));
    return std::unique_ptr<DeviceBuffer>(std::make_unique<CudaBuffer>(data, bytes));
  }

  absl::Status CopyFromHost(void* destination, const void* source,
                            int64_t bytes) override {
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(destination, source, bytes, cudaMemcpyHostToDevice, stream_),
        "cudaMemcpy to the GPU"));
    return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  absl::Status CopyToHost(void* destination, const void* source,
                          int64_t bytes) override {
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpy from the GPU"));
    return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  absl::Status AllReduce(const void* send, void* recv, int64_t count,
                         DType dtype, RedOp op) override {
    last_ = "ncclAllReduce";
    return NcclStatus(ncclAllReduce(send, recv, count, NcclType(dtype), NcclOp(op),
                                    comm_, stream_),
                      "ncclAllReduce");
  }

  absl::Status Broadcast(const void* send, void* recv, int64_t count,
                         DType dtype, int root) override {
    last_ = "ncclBroadcast";
    return NcclStatus(ncclBroadcast(send, recv, count, NcclType(dtype), root,
                                    comm_, stream_),
                      "ncclBroadcast");
  }

  absl::Status AllGather(const void* send, void* recv, int64_t send_count,
                         DType dtype) override {
    last_ = "ncclAllGather";
    return NcclStatus(
        ncclAllGather(send, recv, send_count, NcclType(dtype), comm_, stream_),
        "ncclAllGather");
  }

  absl::Status ReduceScatter(const void* send, void* recv, int64_t recv_count,
                             DType dtype, RedOp op) override {
    last_ = "ncclReduceScatter";
    return NcclStatus(ncclReduceScatter(send, recv, recv_count, NcclType(dtype),
                                        NcclOp(op), comm_, stream_),
                      "ncclReduceScatter");
  }

  absl::Status AllToAll(const void* send, void* recv, int64_t count_per_peer,
                        DType dtype) override {
    const std::vector<int64_t> counts(world_size_, count_per_peer);
    return AllToAllV(send, counts, recv, counts, dtype);
  }

  absl::Status AllToAllV(const void* send, const std::vector<int64_t>& send_counts,
                         void* recv, const std::vector<int64_t>& recv_counts,
                         DType dtype) override {
    last_ = "ncclSend/ncclRecv group";
    const int64_t element_size = ElementSize(dtype);
    RETURN_IF_ERROR(NcclStatus(ncclGroupStart(), "ncclGroupStart"));
    int64_t send_offset = 0;
    int64_t recv_offset = 0;
    absl::Status status;
    for (int peer = 0; peer < world_size_ && status.ok(); ++peer) {
      if (send_counts[peer] > 0) {
        status = NcclStatus(
            ncclSend(static_cast<const char*>(send) + send_offset * element_size,
                     send_counts[peer], NcclType(dtype), peer, comm_, stream_),
            absl::StrCat("ncclSend to rank ", peer));
      }
      if (status.ok() && recv_counts[peer] > 0) {
        status = NcclStatus(
            ncclRecv(static_cast<char*>(recv) + recv_offset * element_size,
                     recv_counts[peer], NcclType(dtype), peer, comm_, stream_),
            absl::StrCat("ncclRecv from rank ", peer));
      }
      send_offset += send_counts[peer];
      recv_offset += recv_counts[peer];
    }
    const absl::Status ended = NcclStatus(ncclGroupEnd(), "ncclGroupEnd");
    return status.ok() ? ended : status;
  }

  absl::Status Synchronize() override {
    RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
    ncclResult_t async_error = ncclSuccess;
    RETURN_IF_ERROR(NcclStatus(ncclCommGetAsyncError(comm_, &async_error),
                               "ncclCommGetAsyncError"));
    return NcclStatus(async_error, "NCCL asynchronous error");
  }

  // A one-element all-reduce on the scratch buffer, waited for: every rank
  // has reached it when it completes.
  absl::Status Barrier() override {
    RETURN_IF_ERROR(Synchronize());
    RETURN_IF_ERROR(NcclStatus(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32,
                                             ncclSum, comm_, stream_),
                               "barrier (ncclAllReduce)"));
    return Synchronize();
  }

  absl::Status BeginInterval() override {
    return CudaStatus(cudaEventRecord(start_, stream_), "cudaEventRecord");
  }

  absl::StatusOr<double> EndInterval() override {
    RETURN_IF_ERROR(CudaStatus(cudaEventRecord(stop_, stream_), "cudaEventRecord"));
    RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(stop_), "cudaEventSynchronize"));
    float milliseconds = 0;
    RETURN_IF_ERROR(CudaStatus(cudaEventElapsedTime(&milliseconds, start_, stop_),
                               "cudaEventElapsedTime"));
    return milliseconds / 1e3;
  }

  absl::StatusOr<std::string> AllGatherHostBytes(absl::string_view local) override {
    const int64_t bytes = static_cast<int64_t>(local.size());
    if (bytes * (world_size_ + 1) > kScratchBytes) {
      return absl::InternalError(absl::StrCat(
          "AllGatherHostBytes: ", bytes, " bytes per rank exceed the scratch buffer"));
    }
    char* input = static_cast<char*>(scratch_);
    char* output = input + bytes;
    RETURN_IF_ERROR(CopyFromHost(input, local.data(), bytes));
    RETURN_IF_ERROR(NcclStatus(
        ncclAllGather(input, output, bytes, ncclUint8, comm_, stream_),
        "ncclAllGather of results"));
    RETURN_IF_ERROR(Synchronize());
    std::string all(bytes * world_size_, '\0');
    RETURN_IF_ERROR(CopyToHost(all.data(), output, all.size()));
    return all;
  }

  std::string LastAlgorithm() const override { return last_; }

 private:
  // Results exchange and barrier space: (iters + 2) doubles per rank.
  static constexpr int64_t kScratchBytes = 16 << 20;

  const int rank_;
  const int world_size_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  ncclComm_t comm_ = nullptr;
  void* scratch_ = nullptr;
  std::string last_;
};

}  // namespace

absl::StatusOr<Support> NcclSupports(OpKind, DType dtype, RedOp) {
  if (dtype != DType::kBFloat16) return Support{};
  int version = 0;
  RETURN_IF_ERROR(NcclStatus(ncclGetVersion(&version), "ncclGetVersion"));
  // NCCL >= 2.9 encodes 10000 * major + 100 * minor + patch; 2.10 = 21000.
  if (version < 21000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dtype=bfloat16 needs NCCL >= 2.10; this machine's NCCL reports "
        "version code ", version));
  }
  return Support{};
}

absl::StatusOr<std::string> NewNcclId() {
  ncclUniqueId id;
  RETURN_IF_ERROR(NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"));
  return std::string(reinterpret_cast<const char*>(&id), sizeof(id));
}

absl::StatusOr<std::unique_ptr<Backend>> NewNcclBackend(
    const NcclBackendOptions& options) {
  auto backend = std::make_unique<NcclBackend>(options.rank, options.world_size);
  RETURN_IF_ERROR(backend->Init(options));
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace mtb::comm_bench
