// One collective as comm_bench measures it (the per-op files all_reduce.cc,
// all_gather.cc, ... implement this): nccl-tests' conventions for count, size
// and bus bandwidth, where the data sits in and out of place, deterministic
// inputs whose exact result is known, and the call itself.
//
// Vocabulary (nccl-tests, doc/PERFORMANCE.md): n is the world size; S (bytes)
// is the buffer size, the *total* buffer for all_gather, reduce_scatter and
// all_to_all; count is the element count of the call's argument (per rank for
// those three); algbw = S / time; busbw = algbw x a factor that makes it
// comparable across n.
#ifndef MTB_COMM_BENCH_COLLECTIVE_H_
#define MTB_COMM_BENCH_COLLECTIVE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "comm_bench/backend.h"
#include "comm_bench/dtype.h"
#include "common/base/skew.h"

namespace mtb::comm_bench {

// Who is calling, with which arguments. The same on every rank except `rank`.
struct CallContext {
  int rank = 0;
  int world_size = 1;
  DType dtype = DType::kFloat32;
  RedOp redop = RedOp::kSum;
  int root = 0;
};

// One call's sizes. Element counts are in the call's dtype.
struct CallShape {
  int64_t count = 0;  // nccl-tests' "count" column
  int64_t bytes = 0;  // nccl-tests' "size" column S
  // This rank's buffers out of place.
  int64_t send_elements = 0;
  int64_t recv_elements = 0;
  // In place there is one buffer of in_place_elements; the input starts at
  // in_place_input_offset and the output (recv_elements long) at
  // in_place_output_offset (nccl-tests' send/recvInplaceOffset x rank).
  int64_t in_place_elements = 0;
  int64_t in_place_input_offset = 0;
  int64_t in_place_output_offset = 0;
  // The bytes algbw divides by: S, except all_to_allv (the bottleneck).
  int64_t bandwidth_bytes = 0;

  // all_to_allv only. split[src][dst] elements; this rank's row and column.
  SplitMatrix split;
  std::vector<int64_t> send_counts;
  std::vector<int64_t> recv_counts;
  std::vector<int64_t> send_bytes_per_rank;
  std::vector<int64_t> recv_bytes_per_rank;
  int bottleneck_rank = -1;
};

// The integers a data set's values are drawn from. A copy-only collective
// (broadcast, all_gather, all_to_all(v)) only moves values, so it uses the
// dtype's whole exact range [0, L) (L = ExactIntegerLimit: 2^24 for fp32, 2^8
// for bf16). A reduction must keep every partial sum exact in any order, so
// its range shrinks only as much as that needs: with c ranks adding to an
// element, values in [0, floor(L / c)], every partial sum <= L. Up to L ranks
// every rank adds (c = n): at 256 ranks that is {0, 1} in bf16 and
// [0, 65536] in fp32. Beyond L ranks, element i of rank r is non-zero only
// where (r + i) % stride == 0, stride = ceil(n / L), so c = ceil(n / stride)
// <= L and the range never collapses to {0}.
struct PatternRange {
  int64_t modulus = 1;  // values lie in [0, modulus)
  int stride = 1;       // see above; 1 up to L ranks
};
PatternRange PatternRangeFor(DType dtype, int world_size, bool reduces);

class Collective {
 public:
  virtual ~Collective() = default;

  virtual absl::string_view name() const = 0;  // "all_reduce", ...
  virtual OpKind kind() const = 0;
  virtual bool reduces() const { return false; }
  virtual bool has_root() const { return false; }
  virtual bool supports_in_place() const { return true; }
  // busbw / algbw: nccl-tests' factor, from the collective layer's byte
  // model (common/collective/traffic.h), so comm_bench and the layer's records
  // cannot disagree.
  virtual double BusBandwidthFactor(int world_size) const = 0;

  // The requested sizes of a sweep: nccl-tests' loop, min, min*f, ... <= max.
  // all_to_allv from a split matrix has exactly one size.
  virtual std::vector<int64_t> SweepSizes(int64_t min_bytes, int64_t max_bytes,
                                          int64_t step_factor) const;
  // nccl-tests' count convention for `requested_bytes`. A shape with
  // bytes == 0 means the size rounds to nothing and is skipped.
  virtual CallShape Shape(int64_t requested_bytes,
                          const CallContext& context) const = 0;

  // The values this op's data sets are drawn from (PatternRangeFor).
  PatternRange pattern_range(const CallContext& context) const {
    return PatternRangeFor(context.dtype, context.world_size, reduces());
  }
  // This rank's input: shape.send_elements values of data set `seed`, element
  // i being PatternValue(pattern_range(context), seed, rank, i) for every
  // collective, so each op's FillExpected states its semantics against one
  // input pattern.
  void FillInput(const CallContext& context, const CallShape& shape, int seed,
                 HostArray* input) const;
  // What this rank's output (shape.recv_elements) must hold afterwards.
  virtual void FillExpected(const CallContext& context, const CallShape& shape,
                            int seed, HostArray* expected) const = 0;

  // One call. `send` and `recv` may alias as the in-place layout says.
  virtual absl::Status Run(Backend& backend, const CallContext& context,
                           const CallShape& shape, const void* send,
                           void* recv) const = 0;
};

// How all_to_allv picks its splits: a skew of each rank's total, or a fixed
// matrix in bytes (one size only).
struct AllToAllvPattern {
  Skew skew;
  std::optional<SplitMatrix> matrix_bytes;
};

// The collectives comm_bench knows, in --ops order.
const std::vector<std::string>& CollectiveNames();

// kInvalidArgument naming --ops for an unknown name.
absl::StatusOr<std::unique_ptr<Collective>> MakeCollective(
    absl::string_view name, const AllToAllvPattern& pattern);

// Constructors, one per file.
std::unique_ptr<Collective> NewAllReduce();
std::unique_ptr<Collective> NewAllGather();
std::unique_ptr<Collective> NewReduceScatter();
std::unique_ptr<Collective> NewBroadcast();
std::unique_ptr<Collective> NewAllToAll();
std::unique_ptr<Collective> NewAllToAllv(const AllToAllvPattern& pattern);

// --- Shared by the per-op files. ---

// The shape of an op whose every rank sends and receives one whole buffer
// (all_reduce, broadcast): count = requested_bytes / element size, S = that
// buffer (nccl-tests does not round these to the world size), in place
// possible.
CallShape WholeBufferShape(int64_t requested_bytes, DType dtype);

// nccl-tests' per-rank count for the sharded collectives (all_gather,
// reduce_scatter, all_to_all): (bytes / element_size / n) rounded down to a
// multiple of 16 bytes' worth of elements, so S = count * n * element_size is
// a multiple of n x 16 bytes (hence of n x the element size).
int64_t ShardedCount(int64_t requested_bytes, int64_t element_size,
                     int world_size);

// The value element `index` of `rank`'s input holds in data set `seed`.
float PatternValue(const PatternRange& range, int seed, int rank,
                   int64_t index);

// What no pattern value can be; output buffers start with it in the check pass.
inline constexpr float kSentinel = -1.0f;

// algbw in GB/s (1e9 bytes/s), nccl-tests' definition: bytes / 1e9 / seconds.
inline double AlgorithmBandwidth(int64_t bytes, double seconds) {
  return static_cast<double>(bytes) / 1e9 / seconds;
}

// The reduction the check pass expects.
inline float Reduce(RedOp op, float a, float b) {
  return op == RedOp::kSum ? a + b : (a > b ? a : b);
}

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_COLLECTIVE_H_
