// reduce_scatter: every rank contributes n blocks of count elements; rank r
// ends with the reduction of every rank's block r. S = the whole input,
// count x n x element size (count per rank, rounded as ShardedCount says).
// busbw factor (n-1)/n: each rank sends the n-1 blocks it does not keep.
// In place (nccl-tests): the output is block `rank` of the input buffer.
#include "comm_bench/collective.h"
#include "common/collective/traffic.h"

namespace mtb::comm_bench {
namespace {

class ReduceScatter : public Collective {
 public:
  absl::string_view name() const override { return "reduce_scatter"; }
  OpKind kind() const override { return OpKind::kReduceScatter; }
  bool reduces() const override { return true; }
  double BusBandwidthFactor(int n) const override {
    return collective::BusBandwidthFactor(collective::CollectiveOp::kReduceScatter, n);
  }

  CallShape Shape(int64_t requested_bytes,
                  const CallContext& context) const override {
    const int n = context.world_size;
    CallShape shape;
    shape.count = ShardedCount(requested_bytes, ElementSize(context.dtype), n);
    shape.bytes = shape.count * n * ElementSize(context.dtype);
    shape.send_elements = shape.count * n;
    shape.recv_elements = shape.count;
    shape.in_place_elements = shape.count * n;
    shape.in_place_output_offset = shape.count * context.rank;
    shape.bandwidth_bytes = shape.bytes;
    return shape;
  }

  void FillExpected(const CallContext& context, const CallShape& shape,
                    int seed, HostArray* expected) const override {
    const int64_t block = shape.count * context.rank;
    const PatternRange range = pattern_range(context);
    for (int64_t i = 0; i < shape.count; ++i) {
      float value = PatternValue(range, seed, 0, block + i);
      for (int rank = 1; rank < context.world_size; ++rank) {
        value = Reduce(context.redop, value,
                       PatternValue(range, seed, rank, block + i));
      }
      expected->Set(i, value);
    }
  }

  absl::Status Run(Backend& backend, const CallContext& context,
                   const CallShape& shape, const void* send,
                   void* recv) const override {
    return backend.ReduceScatter(send, recv, shape.count, context.dtype,
                                 context.redop);
  }
};

}  // namespace

std::unique_ptr<Collective> NewReduceScatter() {
  return std::make_unique<ReduceScatter>();
}

}  // namespace mtb::comm_bench
