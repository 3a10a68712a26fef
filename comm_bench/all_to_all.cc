// all_to_all: block p (count elements) of rank r's input goes to rank p and
// lands in block r of p's output. S = the whole input, count x n x element
// size (count per peer, rounded as ShardedCount says). busbw factor (n-1)/n:
// each rank sends and receives the n-1 blocks that are not its own.
// Out of place only: nccl-tests times an in-place alltoall but cannot check it
// (its #wrong reads N/A); comm_bench does not run one.
#include "comm_bench/collective.h"
#include "common/collective/traffic.h"

namespace mtb::comm_bench {
namespace {

class AllToAll : public Collective {
 public:
  absl::string_view name() const override { return "all_to_all"; }
  OpKind kind() const override { return OpKind::kAllToAll; }
  bool supports_in_place() const override { return false; }
  double BusBandwidthFactor(int n) const override {
    return collective::BusBandwidthFactor(collective::CollectiveOp::kAllToAll, n);
  }

  CallShape Shape(int64_t requested_bytes,
                  const CallContext& context) const override {
    const int n = context.world_size;
    CallShape shape;
    shape.count = ShardedCount(requested_bytes, ElementSize(context.dtype), n);
    shape.bytes = shape.count * n * ElementSize(context.dtype);
    shape.send_elements = shape.recv_elements = shape.count * n;
    shape.bandwidth_bytes = shape.bytes;
    return shape;
  }

  void FillExpected(const CallContext& context, const CallShape& shape,
                    int seed, HostArray* expected) const override {
    const int64_t block = shape.count * context.rank;  // ours, in their input
    const PatternRange range = pattern_range(context);
    for (int source = 0; source < context.world_size; ++source) {
      for (int64_t i = 0; i < shape.count; ++i) {
        expected->Set(source * shape.count + i,
                      PatternValue(range, seed, source, block + i));
      }
    }
  }

  absl::Status Run(Backend& backend, const CallContext& context,
                   const CallShape& shape, const void* send,
                   void* recv) const override {
    return backend.AllToAll(send, recv, shape.count, context.dtype);
  }
};

}  // namespace

std::unique_ptr<Collective> NewAllToAll() {
  return std::make_unique<AllToAll>();
}

}  // namespace mtb::comm_bench
