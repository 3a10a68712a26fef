// broadcast: every rank ends with the root's buffer. S = the buffer. busbw
// factor 1: all the data has to leave the root, whose link is the bottleneck
// (nccl-tests, doc/PERFORMANCE.md).
#include "comm_bench/collective.h"
#include "common/collective/traffic.h"

namespace mtb::comm_bench {
namespace {

class Broadcast : public Collective {
 public:
  absl::string_view name() const override { return "broadcast"; }
  OpKind kind() const override { return OpKind::kBroadcast; }
  bool has_root() const override { return true; }
  double BusBandwidthFactor(int n) const override {
    return collective::BusBandwidthFactor(collective::CollectiveOp::kBroadcast, n);
  }

  CallShape Shape(int64_t requested_bytes,
                  const CallContext& context) const override {
    return WholeBufferShape(requested_bytes, context.dtype);
  }

  // Every rank fills its own values; only the root's may arrive anywhere, so a
  // non-root rank whose buffer was not overwritten (in place) is caught.
  void FillExpected(const CallContext& context, const CallShape& shape,
                    int seed, HostArray* expected) const override {
    const PatternRange range = pattern_range(context);
    for (int64_t i = 0; i < shape.count; ++i) {
      expected->Set(i, PatternValue(range, seed, context.root, i));
    }
  }

  absl::Status Run(Backend& backend, const CallContext& context,
                   const CallShape& shape, const void* send,
                   void* recv) const override {
    return backend.Broadcast(send, recv, shape.count, context.dtype,
                             context.root);
  }
};

}  // namespace

std::unique_ptr<Collective> NewBroadcast() {
  return std::make_unique<Broadcast>();
}

}  // namespace mtb::comm_bench
