// all_reduce: every rank ends with the element-wise reduction of every rank's
// buffer. S = the buffer (count x element size; nccl-tests does not round it
// to the world size). busbw factor 2(n-1)/n: a bandwidth-optimal all_reduce
// moves every byte out and back once (reduce-scatter + all-gather).
#include "comm_bench/collective.h"
#include "common/collective/traffic.h"

namespace mtb::comm_bench {
namespace {

class AllReduce : public Collective {
 public:
  absl::string_view name() const override { return "all_reduce"; }
  OpKind kind() const override { return OpKind::kAllReduce; }
  bool reduces() const override { return true; }
  double BusBandwidthFactor(int n) const override {
    return collective::BusBandwidthFactor(collective::CollectiveOp::kAllReduce, n);
  }

  CallShape Shape(int64_t requested_bytes,
                  const CallContext& context) const override {
    return WholeBufferShape(requested_bytes, context.dtype);
  }

  void FillExpected(const CallContext& context, const CallShape& shape,
                    int seed, HostArray* expected) const override {
    const PatternRange range = pattern_range(context);
    for (int64_t i = 0; i < shape.count; ++i) {
      float value = PatternValue(range, seed, 0, i);
      for (int rank = 1; rank < context.world_size; ++rank) {
        value = Reduce(context.redop, value,
                       PatternValue(range, seed, rank, i));
      }
      expected->Set(i, value);
    }
  }

  absl::Status Run(Backend& backend, const CallContext& context,
                   const CallShape& shape, const void* send,
                   void* recv) const override {
    return backend.AllReduce(send, recv, shape.count, context.dtype,
                             context.redop);
  }
};

}  // namespace

std::unique_ptr<Collective> NewAllReduce() {
  return std::make_unique<AllReduce>();
}

}  // namespace mtb::comm_bench
