// The gradient bucket engine every bucketed strategy shares (ddp, zero1,
// zero2): buckets are contiguous slices of the parameter store's flat layout
// (trainer/model/parameter_store.h), assigned in reverse layout order by PyTorch's
// rule (buckets.h), and launched from gradient-accumulator hooks strictly in
// bucket index order as soon as each is complete, so communication overlaps
// the rest of backward. What "launch" does is the strategy's (an all-reduce
// for ddp, a reduce-scatter for zero); the engine only decides when.
//
// Vocabulary (as ddp.cc): ready order = reverse layout order; a bucket is
// pending while some of its parameters' gradients have not been accumulated
// in this backward; armed = this backward launches buckets (a no_sync
// micro-batch is not armed).
//
// Collective contract: every rank builds the same buckets (same store, same
// caps) and calls Arm/Disarm at the same points, so the launches (and the
// collectives they issue) come in the same order on every rank.
//
// Threading: hooks run on the thread that calls backward(); every call must
// come from that one thread.
#ifndef MTB_TRAINER_STRATEGY_BUCKET_ENGINE_H_
#define MTB_TRAINER_STRATEGY_BUCKET_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "trainer/model/parameter_store.h"
#include "trainer/run/strategy.h"

namespace torch::autograd {
struct Node;
}  // namespace torch::autograd

namespace mtb {

enum class GradSync {
  kLast,   // no_sync for micro-batches 0..K-2: one synchronisation per step
  kEvery,  // a synchronisation after every micro-batch: K per step
};
// "every" / "last" -> GradSync (the config is validated: CHECKs).
GradSync GradSyncFromName(const std::string& name);

struct GradientBucket {
  std::vector<int> parameters;  // store indices, in ready order
  int64_t offset = 0;           // first flat element (the lowest)
  int64_t numel = 0;
};

// Buckets over `store` in reverse layout order, limits {first_cap_bytes,
// cap_bytes} (buckets.h); each bucket is flat elements
// [offset, offset + numel).
std::vector<GradientBucket> AssignGradientBuckets(const ParameterStore& store,
                                                  int64_t first_cap_bytes,
                                                  int64_t cap_bytes);

class BucketEngine {
 public:
  // Called with each bucket's index, in index order, from inside backward.
  using LaunchFn = std::function<void(int bucket)>;
  // Called with a parameter's index each time backward has accumulated its
  // gradient, armed or not, before any launch that completes.
  using GradientFn = std::function<void(int parameter)>;

  BucketEngine() = default;
  ~BucketEngine();
  BucketEngine(const BucketEngine&) = delete;
  BucketEngine& operator=(const BucketEngine&) = delete;

  // Registers a hook on every parameter's gradient accumulator (replacing
  // earlier ones). `store` must outlive the engine's use of it.
  void Setup(const ParameterStore& store, std::vector<GradientBucket> buckets,
             LaunchFn launch);
  // E.g. a memory mark where autograd allocates .grad (strategies whose
  // gradients are not views of the flat buffer). Empty: nothing.
  void set_on_gradient(GradientFn on_gradient) {
    on_gradient_ = std::move(on_gradient);
  }
  // The next backward launches every bucket.
  void Arm();
  // Deferred: complete buckets are not launched from backward but by
  // LaunchDeferred (DDP's --ddp_overlap=false baseline).
  void set_deferred(bool deferred) { deferred_ = deferred; }
  // Launches, in index order, every complete bucket not launched yet.
  void LaunchDeferred();
  // Stops launching (after the armed backward, or for a no_sync one).
  void Disarm() { armed_ = false; }
  bool armed() const { return armed_; }
  // After an armed backward: OK when every bucket was launched, else
  // kFailedPrecondition naming the first parameter that got no gradient
  // (`who` prefixes the message).
  absl::Status CheckAllLaunched(absl::string_view who) const;

  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  std::vector<BucketSummary> Summaries() const;
  // The bucket of parameter `index`.
  int bucket_of(int index) const { return bucket_of_[index]; }

 private:
  void RemoveHooks();
  void OnGradientReady(int index);

  void LaunchCompleteBuckets();

  bool deferred_ = false;
  const ParameterStore* store_ = nullptr;
  std::vector<GradientBucket> buckets_;
  std::vector<int> bucket_of_;  // per parameter
  LaunchFn launch_;
  GradientFn on_gradient_;
  // Kept alive: a parameter holds its accumulator only weakly, and the hooks
  // live on it.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  bool armed_ = false;
  std::vector<int> pending_;   // per bucket
  std::vector<bool> ready_;    // per parameter, this backward
  size_t next_bucket_ = 0;
};

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_BUCKET_ENGINE_H_
