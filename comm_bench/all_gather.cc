// all_gather: every rank contributes count elements; every rank ends with all
// n blocks in rank order. S = the gathered output, count x n x element size
// (count per rank, rounded as ShardedCount says). busbw factor (n-1)/n: each
// rank receives the n-1 blocks it does not have.
// In place (nccl-tests): the input is block `rank` of the output buffer.
#include "comm_bench/collective.h"
#include "common/collective/traffic.h"

namespace mtb::comm_bench {
namespace {

class AllGather : public Collective {
 public:
  absl::string_view name() const override { return "all_gather"; }
  OpKind kind() const override { return OpKind::kAllGather; }
  double BusBandwidthFactor(int n) const override {
    return collective::BusBandwidthFactor(collective::CollectiveOp::kAllGather, n);
  }

  CallShape Shape(int64_t requested_bytes,
                  const CallContext& context) const override {
    const int n = context.world_size;
    CallShape shape;
    shape.count = ShardedCount(requested_bytes, ElementSize(context.dtype), n);
    shape.bytes = shape.count * n * ElementSize(context.dtype);
    shape.send_elements = shape.count;
    shape.recv_elements = shape.count * n;
    shape.in_place_elements = shape.count * n;
    shape.in_place_input_offset = shape.count * context.rank;
    shape.bandwidth_bytes = shape.bytes;
    return shape;
  }

  void FillExpected(const CallContext& context, const CallShape& shape,
                    int seed, HostArray* expected) const override {
    const PatternRange range = pattern_range(context);
    for (int rank = 0; rank < context.world_size; ++rank) {
      for (int64_t i = 0; i < shape.count; ++i) {
        expected->Set(rank * shape.count + i,
                      PatternValue(range, seed, rank, i));
      }
    }
  }

  absl::Status Run(Backend& backend, const CallContext& context,
                   const CallShape& shape, const void* send,
                   void* recv) const override {
    return backend.AllGather(send, recv, shape.count, context.dtype);
  }
};

}  // namespace

std::unique_ptr<Collective> NewAllGather() {
  return std::make_unique<AllGather>();
}

}  // namespace mtb::comm_bench
