// The "sharded code equals the reference" harness: seeded tensors, shards,
// the test hook that perturbs one shard, collective counting between two
// points, and the comparison of named tensors that ends in a CheckResult
// (equivalence.proto). tp_check's checks are built on it; moe_comm's and the
// trainer strategies' "equals one rank" tests can use it the same way.
//
// Vocabulary. The *reference* is the unsharded computation run on every rank
// (cheap at test sizes); the *sharded* run is the distributed version, whose
// forward and backward are the only code whose collectives are counted. Each
// rank compares the tensors it holds (its shard, or a replicated tensor)
// against the matching slice of the reference; the *verdict* combines the
// ranks' comparisons with one all-gather after counting has stopped.
#ifndef MTB_COMMON_EQUIVALENCE_EQUIVALENCE_H_
#define MTB_COMMON_EQUIVALENCE_EQUIVALENCE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/collective/communicator.h"
#include "common/equivalence/equivalence.pb.h"
#include "common/libtorch/allclose.h"

namespace mtb::equivalence {

// Test hook: on rank `perturb_rank`, adds `perturb_delta` to the first element
// of this rank's part of the tensor named `perturb_tensor`, where the sharded
// code produces it (an output before it is gathered or reduced, a gradient
// after backward). The check must then fail naming that tensor.
struct CheckHooks {
  int perturb_rank = -1;  // -1: off
  std::string perturb_tensor;
  double perturb_delta = 1e-3;

  bool enabled() const { return perturb_rank >= 0; }
};

enum class TensorKind { kOutput, kGrad };
absl::string_view TensorKindName(TensorKind kind);  // "output", "grad"

// A tensor a check compares, in the order it compares them.
struct TensorSpec {
  std::string name;
  TensorKind kind;
};

// One row of a closed form: `count` calls of `op` in `phase` moving `bytes`
// per rank each way in total.
struct ExpectedCollective {
  std::string phase;  // "forward", "backward"
  collective::CollectiveOp op;
  int count = 0;
  int64_t bytes = 0;
};

// AllClose's tolerances for a check's comparisons (torch.testing's fp32
// defaults unless the caller says why not).
struct Tolerance {
  double rtol = kFp32Rtol;
  double atol = kFp32Atol;
};

// The tensors of one check, the same on every rank: tensor i (in the order
// drawn) is CounterNormalTensor(shape, CounterKey({seed, kInit, check, i})) or,
// for tokens, CounterBelow(CounterKey({seed, kData, check, i}), e, vocab).
// `check` is the caller's word for the check (tp_check's CheckKey): two checks
// never share one, so their tensors are independent.
class SeededTensors {
 public:
  SeededTensors(uint64_t seed, uint64_t check) : seed_(seed), check_(check) {}
  // float32 mean + stddev * N(0, 1), not requiring grad.
  at::Tensor Normal(at::IntArrayRef shape, double stddev, double mean = 0.0);
  // int64 uniform in [0, vocab).
  at::Tensor Tokens(at::IntArrayRef shape, int64_t vocab);

 private:
  uint64_t seed_;
  uint64_t check_;
  uint64_t next_ = 0;
};

// A leaf for the reference run: a copy of `value` that requires grad.
at::Tensor Leaf(const at::Tensor& value);
// A leaf holding this rank's block of `value` along `dim`.
at::Tensor ShardLeaf(const at::Tensor& value, int64_t dim,
                     const collective::Communicator& comm);
// This rank's block of `value` along `dim` (nn::ShardAlongDim).
at::Tensor Shard(const at::Tensor& value, int64_t dim,
                 const collective::Communicator& comm);
// This rank's rows of a fused (3D, ...) QKV tensor: its block of each of the
// query, key and value parts, concatenated (heads split across ranks).
at::Tensor ShardQkv(const at::Tensor& qkv, const collective::Communicator& comm);

// Counts the collectives issued between marks, by phase and op, from the
// communicator's totals (so the records kept or not make no difference).
class CollectiveCounter {
 public:
  struct Count {
    int count = 0;
    int64_t bytes_sent = 0;
    int64_t bytes_received = 0;
  };
  using Key = std::pair<std::string, collective::CollectiveOp>;  // (phase, op)

  // Starts counting now.
  explicit CollectiveCounter(const collective::Communicator& comm);
  // Attributes everything since the previous mark to `phase`.
  void EndPhase(const std::string& phase);
  const std::map<Key, Count>& counts() const { return counts_; }

 private:
  const collective::Communicator& comm_;
  std::map<collective::CollectiveOp, collective::CollectiveTotals> last_;
  std::map<Key, Count> counts_;
};

// Collects one check's comparisons on this rank and, in Finish, the verdict
// of all ranks. Every rank must create one per check, compare the same names
// in the same order, and call Finish (collective).
class CheckRecorder {
 public:
  // `hooks` and `comm` must outlive the recorder.
  CheckRecorder(std::string name, std::vector<TensorSpec> tensors,
                Tolerance tolerance, const CheckHooks& hooks,
                collective::Communicator& comm);

  // `x`, plus the hook's delta on its first element when the hook names this
  // rank and `tensor` (CHECKs that `tensor` is one of the check's). Keeps x's
  // autograd history.
  at::Tensor Perturb(absl::string_view tensor, const at::Tensor& x);

  // Starts counting collectives; call right before the sharded forward.
  void StartCounting();
  // Ends the current phase ("forward", then "backward").
  void EndPhase(const std::string& phase);

  // Compares the next tensor of the spec (CHECKs the name and order) with
  // AllClose(actual, expected, tolerance.rtol, tolerance.atol).
  void Compare(absl::string_view name, const at::Tensor& actual,
               const at::Tensor& expected);

  // vocab_parallel_ce: the widest vocabulary-sized tensor seen on this rank.
  void SetLogitsColumns(int64_t largest, int64_t allowed);

  // Collective over all ranks (one all-gather, not counted): combines every
  // rank's comparisons and collective counts against `expected` into the
  // result. Every rank returns the same verdict; messages carry rank 0's
  // detail.
  absl::StatusOr<CheckResult> Finish(
      const std::vector<ExpectedCollective>& expected);

 private:
  struct Row {
    std::string name;
    TensorKind kind;
    std::vector<int64_t> shape;
    bool ok = false;
    int64_t mismatched = 0;
    int64_t numel = 0;
    double max_abs = 0;
    double max_rel = 0;
    std::string message;
  };

  std::string name_;
  std::vector<TensorSpec> tensors_;
  Tolerance tolerance_;
  const CheckHooks& hooks_;
  collective::Communicator& comm_;
  std::vector<Row> rows_;
  std::unique_ptr<CollectiveCounter> counter_;
  int64_t largest_logits_columns_ = -1;  // -1: not a vocabulary check
  int64_t allowed_logits_columns_ = -1;
  absl::Time start_;
};

// The collectives' rows for the result: measured on this rank against the
// closed form, one row per (phase, op) in either; all ok when they match.
std::vector<CollectiveCheck> CompareCollectives(
    const std::map<CollectiveCounter::Key, CollectiveCounter::Count>& measured,
    const std::vector<ExpectedCollective>& expected);

// "phase" names used by every check.
inline constexpr char kForward[] = "forward";
inline constexpr char kBackward[] = "backward";

// A layer between f and g (mlp, attention): one all-reduce of the
// `activation_bytes` output forward (g) and one of the input gradient, the
// same size, backward (f), in the layer's byte model (collective::AllReduceTraffic).
std::vector<ExpectedCollective> AllReduceEachWay(int64_t activation_bytes,
                                                 int world_size);

}  // namespace mtb::equivalence

#endif  // MTB_COMMON_EQUIVALENCE_EQUIVALENCE_H_
