#include "common/collective/traffic.h"

#include "glog/logging.h"

namespace mtb::collective {
namespace {

Traffic Symmetric(int64_t bytes) { return Traffic{bytes, bytes}; }

int64_t SumExcept(const std::vector<int64_t>& counts, int rank) {
  int64_t sum = 0;
  for (int p = 0; p < static_cast<int>(counts.size()); ++p) {
    if (p != rank) sum += counts[p];
  }
  return sum;
}

}  // namespace

absl::string_view CollectiveOpName(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return "all_reduce";
    case CollectiveOp::kBroadcast:
      return "broadcast";
    case CollectiveOp::kAllGather:
      return "all_gather";
    case CollectiveOp::kAllGatherV:
      return "all_gather_v";
    case CollectiveOp::kReduceScatter:
      return "reduce_scatter";
    case CollectiveOp::kReduceScatterV:
      return "reduce_scatter_v";
    case CollectiveOp::kAllToAll:
      return "all_to_all";
    case CollectiveOp::kAllToAllV:
      return "all_to_allv";
    case CollectiveOp::kBarrier:
      return "barrier";
    case CollectiveOp::kSend:
      return "send";
    case CollectiveOp::kRecv:
      return "recv";
  }
  LOG(FATAL) << "unknown CollectiveOp " << static_cast<int>(op);
  return "";
}

double BusBandwidthFactor(CollectiveOp op, int world_size) {
  CHECK_GE(world_size, 1);
  const double n = world_size;
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2.0 * (n - 1) / n;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kAllGatherV:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kReduceScatterV:
    case CollectiveOp::kAllToAll:
    case CollectiveOp::kAllToAllV:
      return (n - 1) / n;
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kSend:
    case CollectiveOp::kRecv:
      return 1.0;
    case CollectiveOp::kBarrier:
      return 0.0;
  }
  LOG(FATAL) << "unknown CollectiveOp " << static_cast<int>(op);
  return 0;
}

Traffic AllReduceTraffic(int64_t bytes, int world_size) {
  CHECK_GE(world_size, 1);
  return Symmetric(2 * (world_size - 1) * bytes / world_size);
}

Traffic AllGatherTraffic(int64_t output_bytes, int world_size) {
  CHECK_GE(world_size, 1);
  return Symmetric((world_size - 1) * output_bytes / world_size);
}

Traffic ReduceScatterTraffic(int64_t input_bytes, int world_size) {
  CHECK_GE(world_size, 1);
  return Symmetric((world_size - 1) * input_bytes / world_size);
}

Traffic AllToAllTraffic(int64_t input_bytes, int world_size) {
  CHECK_GE(world_size, 1);
  return Symmetric((world_size - 1) * input_bytes / world_size);
}

Traffic BroadcastTraffic(int64_t bytes, int world_size, int rank, int root) {
  if (world_size == 1) return Traffic{};
  return rank == root ? Traffic{bytes, 0} : Traffic{0, bytes};
}

Traffic AllToAllVTraffic(const std::vector<int64_t>& send_counts,
                         const std::vector<int64_t>& recv_counts,
                         int64_t row_bytes, int rank) {
  return Traffic{SumExcept(send_counts, rank) * row_bytes,
                 SumExcept(recv_counts, rank) * row_bytes};
}

Traffic AllGatherVTraffic(const std::vector<int64_t>& counts, int64_t row_bytes,
                          int rank) {
  const int64_t others = static_cast<int64_t>(counts.size()) - 1;
  return Traffic{others * counts.at(rank) * row_bytes,
                 SumExcept(counts, rank) * row_bytes};
}

Traffic ReduceScatterVTraffic(const std::vector<int64_t>& counts,
                              int64_t row_bytes, int rank) {
  const int64_t others = static_cast<int64_t>(counts.size()) - 1;
  return Traffic{SumExcept(counts, rank) * row_bytes,
                 others * counts.at(rank) * row_bytes};
}

Traffic SendTraffic(int64_t bytes) { return Traffic{bytes, 0}; }
Traffic RecvTraffic(int64_t bytes) { return Traffic{0, bytes}; }

}  // namespace mtb::collective
