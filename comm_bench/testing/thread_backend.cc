#include "comm_bench/testing/thread_backend.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "comm_bench/host_buffer.h"
#include "absl/synchronization/mutex.h"
#include "common/base/logging.h"
#include "glog/logging.h"

namespace mtb::comm_bench::testing {

class ThreadGroup {
 public:
  explicit ThreadGroup(int world_size)
      : world_size_(world_size), snapshots_(world_size), counts_(world_size) {}

  int world_size() const { return world_size_; }

  void Barrier() {
    absl::MutexLock lock(&mutex_);
    const int64_t generation = generation_;
    if (++arrived_ == world_size_) {
      arrived_ = 0;
      ++generation_;
      released_.SignalAll();
      return;
    }
    while (generation_ == generation) released_.Wait(&mutex_);
  }

  std::string& snapshot(int rank) { return snapshots_[rank]; }

  // One region for the group, made by the first rank to ask (grown, never
  // moved while in use: every rank asks between two barriers).
  char* Shared(int64_t bytes) {
    absl::MutexLock lock(&mutex_);
    if (static_cast<int64_t>(shared_.size()) < bytes) shared_.assign(bytes, 0);
    return shared_.data();
  }
  std::vector<int64_t>& counts(int rank) { return counts_[rank]; }

 private:
  const int world_size_;
  absl::Mutex mutex_;
  absl::CondVar released_;
  int arrived_ = 0;
  int64_t generation_ = 0;
  std::vector<std::string> snapshots_;
  std::vector<std::vector<int64_t>> counts_;
  std::vector<char> shared_;
};

namespace {

float Load(DType dtype, const void* base, int64_t index) {
  if (dtype == DType::kFloat32) {
    float value;
    std::memcpy(&value, static_cast<const char*>(base) + index * 4, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, static_cast<const char*>(base) + index * 2, 2);
  return BFloat16ToFloat(bits);
}

void Store(DType dtype, void* base, int64_t index, float value) {
  if (dtype == DType::kFloat32) {
    std::memcpy(static_cast<char*>(base) + index * 4, &value, 4);
  } else {
    const uint16_t bits = FloatToBFloat16(value);
    std::memcpy(static_cast<char*>(base) + index * 2, &bits, 2);
  }
}

float Apply(RedOp op, float a, float b) {
  return op == RedOp::kSum ? a + b : (a > b ? a : b);
}

double Now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::shared_ptr<ThreadGroup> NewThreadGroup(int world_size) {
  return std::make_shared<ThreadGroup>(world_size);
}

ThreadBackend::ThreadBackend(std::shared_ptr<ThreadGroup> group, int rank,
                             ThreadBackendOptions options)
    : group_(std::move(group)), rank_(rank), options_(options) {}

ThreadBackend::~ThreadBackend() = default;

int ThreadBackend::world_size() const { return group_->world_size(); }

absl::StatusOr<Support> ThreadBackend::Supports(OpKind, DType dtype,
                                                RedOp) const {
  if (options_.refuse_bfloat16 && dtype == DType::kBFloat16) {
    return absl::InvalidArgumentError("threads: bfloat16 refused for the test");
  }
  return Support{};
}

absl::StatusOr<std::unique_ptr<DeviceBuffer>> ThreadBackend::Allocate(
    int64_t bytes) {
  return AllocateHostBuffer(bytes);
}

absl::Status ThreadBackend::CopyFromHost(void* destination, const void* source,
                                         int64_t bytes) {
  std::memcpy(destination, source, bytes);
  return absl::OkStatus();
}

absl::Status ThreadBackend::CopyToHost(void* destination, const void* source,
                                       int64_t bytes) {
  std::memcpy(destination, source, bytes);
  return absl::OkStatus();
}

void ThreadBackend::Publish(const void* data, int64_t bytes,
                            const std::vector<int64_t>& counts) {
  group_->snapshot(rank_).assign(static_cast<const char*>(data), bytes);
  group_->counts(rank_) = counts;
  group_->Barrier();
}

const std::string& ThreadBackend::Snapshot(int rank) const {
  return group_->snapshot(rank);
}

const std::vector<int64_t>& ThreadBackend::Counts(int rank) const {
  return group_->counts(rank);
}

void ThreadBackend::Done() { group_->Barrier(); }

absl::Status ThreadBackend::AllReduce(const void* send, void* recv,
                                      int64_t count, DType dtype, RedOp op) {
  Publish(send, count * ElementSize(dtype));
  for (int64_t i = 0; i < count; ++i) {
    float value = Load(dtype, Snapshot(0).data(), i);
    for (int rank = 1; rank < world_size(); ++rank) {
      value = Apply(op, value, Load(dtype, Snapshot(rank).data(), i));
    }
    if (options_.misroute && i == 0) value += 1;
    Store(dtype, recv, i, value);
  }
  Done();
  return absl::OkStatus();
}

absl::Status ThreadBackend::Broadcast(const void* send, void* recv,
                                      int64_t count, DType dtype, int root) {
  const int64_t bytes = count * ElementSize(dtype);
  const int source = options_.misroute ? (root + 1) % world_size() : root;
  Publish(send, rank_ == source ? bytes : 0);
  std::memcpy(recv, Snapshot(source).data(), bytes);
  Done();
  return absl::OkStatus();
}

absl::Status ThreadBackend::AllGather(const void* send, void* recv,
                                      int64_t send_count, DType dtype) {
  const int64_t bytes = send_count * ElementSize(dtype);
  Publish(send, bytes);
  for (int block = 0; block < world_size(); ++block) {
    const int source = options_.misroute ? (block + 1) % world_size() : block;
    std::memcpy(static_cast<char*>(recv) + block * bytes,
                Snapshot(source).data(), bytes);
  }
  Done();
  return absl::OkStatus();
}

absl::Status ThreadBackend::ReduceScatter(const void* send, void* recv,
                                          int64_t recv_count, DType dtype,
                                          RedOp op) {
  Publish(send, recv_count * world_size() * ElementSize(dtype));
  const int64_t offset = recv_count * rank_;
  for (int64_t i = 0; i < recv_count; ++i) {
    float value = Load(dtype, Snapshot(0).data(), offset + i);
    for (int rank = 1; rank < world_size(); ++rank) {
      value = Apply(op, value, Load(dtype, Snapshot(rank).data(), offset + i));
    }
    if (options_.misroute && i == 0) value += 1;
    Store(dtype, recv, i, value);
  }
  Done();
  return absl::OkStatus();
}

absl::Status ThreadBackend::AllToAll(const void* send, void* recv,
                                     int64_t count_per_peer, DType dtype) {
  const int64_t bytes = count_per_peer * ElementSize(dtype);
  Publish(send, bytes * world_size());
  for (int block = 0; block < world_size(); ++block) {
    const int source = options_.misroute ? (block + 1) % world_size() : block;
    std::memcpy(static_cast<char*>(recv) + block * bytes,
                Snapshot(source).data() + rank_ * bytes, bytes);
  }
  Done();
  return absl::OkStatus();
}

absl::Status ThreadBackend::AllToAllV(const void* send,
                                      const std::vector<int64_t>& send_counts,
                                      void* recv,
                                      const std::vector<int64_t>& recv_counts,
                                      DType dtype) {
  const int64_t element_size = ElementSize(dtype);
  int64_t send_total = 0;
  for (int64_t count : send_counts) send_total += count;
  Publish(send, send_total * element_size, send_counts);
  absl::Status status;
  int64_t offset = 0;
  for (int source = 0; source < world_size(); ++source) {
    const std::vector<int64_t>& theirs = Counts(source);
    if (theirs[rank_] != recv_counts[source]) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "all_to_allv: rank ", rank_, " expects ", recv_counts[source],
          " elements from rank ", source, ", which sends ", theirs[rank_]));
      break;
    }
    const int block = options_.misroute ? (rank_ + 1) % world_size() : rank_;
    int64_t from = 0;
    int64_t source_total = 0;
    for (int p = 0; p < world_size(); ++p) {
      if (p < block) from += theirs[p];
      source_total += theirs[p];
    }
    const int64_t copied = std::min(recv_counts[source], source_total - from);
    std::memcpy(static_cast<char*>(recv) + offset * element_size,
                Snapshot(source).data() + from * element_size,
                copied * element_size);
    offset += recv_counts[source];
  }
  Done();
  return status;
}

namespace {

class SharedView : public DeviceBuffer {
 public:
  SharedView(char* data, int64_t bytes) : data_(data), bytes_(bytes) {}
  void* data() const override { return data_; }
  int64_t bytes() const override { return bytes_; }

 private:
  char* data_;
  int64_t bytes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceBuffer>> ThreadBackend::AllocateShared(int64_t bytes) {
  group_->Barrier();
  char* data = group_->Shared(bytes);
  group_->Barrier();
  return std::make_unique<SharedView>(data, bytes);
}

absl::Status ThreadBackend::Barrier() {
  group_->Barrier();
  return absl::OkStatus();
}

absl::Status ThreadBackend::BeginInterval() {
  interval_start_ = Now();
  return absl::OkStatus();
}

absl::StatusOr<double> ThreadBackend::EndInterval() {
  return Now() - interval_start_;
}

absl::StatusOr<std::string> ThreadBackend::AllGatherHostBytes(
    absl::string_view local) {
  Publish(local.data(), local.size());
  std::string all;
  for (int rank = 0; rank < world_size(); ++rank) all += Snapshot(rank);
  Done();
  return all;
}

std::vector<absl::Status> RunRanks(int world_size,
                                   const std::function<absl::Status(int)>& body) {
  std::vector<absl::Status> statuses(world_size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      ScopedThreadLogRank log_rank(rank);
      statuses[rank] = body(rank);
    });
  }
  for (std::thread& thread : threads) thread.join();
  return statuses;
}

}  // namespace mtb::comm_bench::testing
