// Exact mode (--reduction=exact): training whose bits do not depend
// on the world size, --grad_accum or the strategy.
//
// Floating-point sums depend on their order, and every parallel layout sums
// gradients in another order. Exact mode removes every order-dependent fp32
// sum from the step:
//
//   chunks    the global batch is cut into fixed chunks of --exact_chunk
//             consecutive global samples; every rank runs forward and
//             backward chunk by chunk, so each chunk's fp32 gradient is
//             computed from the same shapes, data and dropout masks (keyed by
//             global sample) with the same intra-op thread count (pinned:
//             trainer/config/config.h) on every layout: the same bits.
//   grid      each chunk's gradient is converted to integers on a
//             fixed-point grid, one power of two per parameter tensor
//             (q = round_half_even(g * 2^shift)), and accumulated in int64.
//             The grid is fixed before the step and stateless: every tensor
//             starts each step on the default grid, which holds chunk values
//             up to 2^kDefaultMaxAbsLog2 in magnitude, so a resumed run uses
//             the grid the uninterrupted one used. With G chunks per step
//             over all ranks, a chunk value is at most 2^L on the grid,
//             L = 62 - ceil(log2 G): the sum of all G never exceeds 2^62.
//   overflow  a chunk value beyond 2^L: every rank's max-abs per tensor is
//             all-reduced (max is exact in fp32), so every rank finds the
//             same tensors overflowed, and the step is redone from its start
//             (same data, same masks, the parameters untouched) with those
//             tensors on the grid their max-abs needs (logged). The redo
//             cannot overflow again: its chunks are bit-identical. A second
//             overflow would be a bug and fails the step.
//   reduce    the strategy's pieces (ExactGroup: ddp buckets all-reduced,
//             zero buckets and fsdp units reduce-scattered) are summed as
//             int64 through the collective layer: exact and independent of
//             the order. Each element is converted back to fp32 once:
//             sum * (2^-shift / G), the mean over the global chunks.
//   norm      the gradient norm squares each reduced fp32 element exactly in
//             fp64, puts the square on one integer grid (2^k, k from the
//             global max-abs) and sums int64 over every element once: the
//             same whatever cuts the shards.
//   loss      every chunk's loss is gathered and summed in global chunk
//             order.
//
// Clipping and AdamW are elementwise, so every shard computes the same bits
// as a whole-model update. A chunk whose gradient is not finite stops the
// step as float mode does (the norm reported is NaN).
#ifndef MTB_TRAINER_EXACT_EXACT_H_
#define MTB_TRAINER_EXACT_EXACT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/model/parameter_store.h"
#include "trainer/run/strategy.h"

namespace mtb {

// SHA-256 (hex) of `parameters` in their order: each tensor's fp32 values,
// row-major, little-endian (this host's order; CHECKed), unpadded. The
// trainer result's parameter_digest.
std::string ParameterDigest(const std::vector<NamedParameter>& parameters);

// `value`'s bits as 16 lowercase hex digits.
std::string DoubleBits(double value);

// The global chunk index of local chunk `index` (0-based, in this rank's
// order: micro-batch by micro-batch) of `rank` among `world_size` ranks with
// micro-batches of `batch_size` samples and chunks of `chunk` samples.
int64_t GlobalChunkOf(int index, int rank, int world_size, int64_t batch_size,
                      int64_t chunk);

struct ExactTraffic {
  int64_t bytes_sent = 0;      // counted by the collective layer
  int64_t expected_bytes = 0;  // the closed form of the layer's byte model
  double wait_ms = 0;
};

class ExactReducer {
 public:
  // Chunk values up to 2^kDefaultMaxAbsLog2 fit the default grid.
  static constexpr int kDefaultMaxAbsLog2 = 8;

  // `store` outlives the reducer. `global_chunks`: chunks per optimizer step
  // over all ranks. `finer_bits` > 0 (tests only): the default grid that
  // many bits finer.
  ExactReducer(const ParameterStore& store, int64_t global_chunks,
               int finer_bits = 0);

  // L: a chunk value on the grid is at most 2^L.
  int limit_log2() const { return limit_log2_; }
  // Tensor p's grid: values are multiples of 2^-shift(p).
  int shift(int parameter) const { return shifts_[parameter]; }

  // Starts an attempt at a step: the accumulator zeroed, every tensor on the
  // default grid, or (`coarsen`, a redo) the tensors that overflowed the last
  // attempt on the grid their global max-abs needs.
  void BeginAttempt(bool coarsen);

  // Local: adds the chunk gradient in every parameter's .grad (undefined:
  // zero) on its grid, and zeroes .grad for the next chunk.
  void AddChunk();

  struct Verdict {
    bool finite = true;            // no chunk value was NaN or infinite
    std::vector<int> overflowed;   // parameters beyond their grid
    std::string Describe(const ParameterStore& store,
                         const std::vector<float>& max_abs) const;
  };
  // Collective (`communicator` nullptr: one rank): every rank's max-abs per
  // tensor and non-finite flag, reduced by max; the same verdict everywhere.
  absl::StatusOr<Verdict> Decide(collective::Communicator* communicator);
  // Per tensor, the largest |chunk value| of the last attempt over all ranks
  // (after Decide).
  const std::vector<float>& global_max_abs() const { return global_max_; }

  // Collective: sums `groups` over ranks as int64 (launched together, then
  // waited in order) and writes each destination in fp32.
  absl::StatusOr<ExactTraffic> Reduce(const std::vector<ExactGroup>& groups,
                                      collective::Communicator* communicator);

  // Collective: the L2 norm of the reduced gradient (the destinations after
  // Reduce; an all-reduced group counted on rank 0 only), squares summed on
  // an integer grid: independent of how the groups are cut.
  absl::StatusOr<double> Norm(const std::vector<ExactGroup>& groups,
                              collective::Communicator* communicator) const;

 private:
  // dest (fp32) <- reduced (int64) holding flat elements [offset, + numel).
  void Dequantize(const at::Tensor& reduced, int64_t offset,
                  const at::Tensor& destination) const;

  const ParameterStore* store_;
  int64_t global_chunks_;
  int limit_log2_;
  int default_shift_;
  std::vector<int> shifts_;       // per parameter
  std::vector<float> local_max_;  // per parameter, this attempt
  std::vector<float> global_max_;
  bool local_finite_ = true;
  at::Tensor accumulator_;  // (numel) int64, flat layout
};

}  // namespace mtb

#endif  // MTB_TRAINER_EXACT_EXACT_H_
