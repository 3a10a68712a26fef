// all_to_allv: rank r sends split[r][p] elements to rank p (packed in rank
// order) and receives split[p][r] from each p. The split matrix comes from a
// skew of each rank's total (--imbalance) or from a file in bytes
// (--split_matrix, one size only).
//
// Sizes and bandwidth follow nccl-tests' alltoallv_perf (first released in
// nccl-tests 2.19.0; older releases have no alltoallv figure): with a
// generated skew the requested size is rounded like all_to_all (per-peer
// count x n, 16-byte aligned blocks) and becomes each rank's send total; the
// *bottleneck* is the rank with the most bytes sent or received (self
// included), S ("size") is that rank's max(send, recv) bytes, algbw = S /
// time and busbw = algbw x (n-1)/n. For a uniform skew this equals
// all_to_all's figures.
// Out of place only, as all_to_all.
#include <algorithm>

#include "comm_bench/collective.h"
#include "common/collective/traffic.h"

namespace mtb::comm_bench {
namespace {

// Offset of rank `destination`'s block in `source`'s packed send buffer.
int64_t SendOffset(const SplitMatrix& split, int source, int destination) {
  int64_t offset = 0;
  for (int p = 0; p < destination; ++p) offset += split[source][p];
  return offset;
}

class AllToAllv : public Collective {
 public:
  explicit AllToAllv(AllToAllvPattern pattern) : pattern_(std::move(pattern)) {}

  absl::string_view name() const override { return "all_to_allv"; }
  OpKind kind() const override { return OpKind::kAllToAllV; }
  bool supports_in_place() const override { return false; }
  double BusBandwidthFactor(int n) const override {
    return collective::BusBandwidthFactor(collective::CollectiveOp::kAllToAllV, n);
  }

  std::vector<int64_t> SweepSizes(int64_t min_bytes, int64_t max_bytes,
                                  int64_t step_factor) const override {
    if (pattern_.matrix_bytes.has_value()) return {min_bytes};
    return Collective::SweepSizes(min_bytes, max_bytes, step_factor);
  }

  CallShape Shape(int64_t requested_bytes,
                  const CallContext& context) const override {
    const int n = context.world_size;
    const int64_t element_size = ElementSize(context.dtype);
    CallShape shape;
    if (pattern_.matrix_bytes.has_value()) {
      shape.split = *pattern_.matrix_bytes;
      for (auto& row : shape.split) {
        for (int64_t& cell : row) cell /= element_size;
      }
      shape.count = 0;  // as nccl-tests in matrix mode
    } else {
      shape.count = ShardedCount(requested_bytes, element_size, n);
      shape.split = SkewedSplitMatrix(pattern_.skew, n, shape.count * n);
    }
    const std::vector<int64_t> sent = RowSums(shape.split);
    const std::vector<int64_t> received = ColumnSums(shape.split);
    int64_t bottleneck = -1;
    for (int rank = 0; rank < n; ++rank) {
      shape.send_bytes_per_rank.push_back(sent[rank] * element_size);
      shape.recv_bytes_per_rank.push_back(received[rank] * element_size);
      const int64_t busiest = std::max(sent[rank], received[rank]);
      if (busiest > bottleneck) {
        bottleneck = busiest;
        shape.bottleneck_rank = rank;
      }
    }
    shape.bytes = bottleneck * element_size;
    shape.bandwidth_bytes = shape.bytes;
    shape.send_counts = shape.split[context.rank];
    for (int source = 0; source < n; ++source) {
      shape.recv_counts.push_back(shape.split[source][context.rank]);
    }
    shape.send_elements = sent[context.rank];
    shape.recv_elements = received[context.rank];
    return shape;
  }

  void FillExpected(const CallContext& context, const CallShape& shape,
                    int seed, HostArray* expected) const override {
    const PatternRange range = pattern_range(context);
    int64_t offset = 0;
    for (int source = 0; source < context.world_size; ++source) {
      const int64_t from = SendOffset(shape.split, source, context.rank);
      for (int64_t i = 0; i < shape.recv_counts[source]; ++i) {
        expected->Set(offset + i, PatternValue(range, seed, source, from + i));
      }
      offset += shape.recv_counts[source];
    }
  }

  absl::Status Run(Backend& backend, const CallContext& context,
                   const CallShape& shape, const void* send,
                   void* recv) const override {
    return backend.AllToAllV(send, shape.send_counts, recv, shape.recv_counts,
                             context.dtype);
  }

 private:
  const AllToAllvPattern pattern_;
};

}  // namespace

std::unique_ptr<Collective> NewAllToAllv(const AllToAllvPattern& pattern) {
  return std::make_unique<AllToAllv>(pattern);
}

}  // namespace mtb::comm_bench
