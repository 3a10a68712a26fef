#include "trainer/strategy/bucket_engine.h"

#include <algorithm>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "torch/csrc/autograd/function.h"
#include "torch/csrc/autograd/utils/lambda_post_hook.h"
#include "torch/csrc/autograd/variable.h"
#include "trainer/strategy/buckets.h"

namespace mtb {

GradSync GradSyncFromName(const std::string& name) {
  CHECK(name == "every" || name == "last") << name;
  return name == "every" ? GradSync::kEvery : GradSync::kLast;
}

std::vector<GradientBucket> AssignGradientBuckets(const ParameterStore& store,
                                                  int64_t first_cap_bytes,
                                                  int64_t cap_bytes) {
  const std::vector<int>& layout = store.layout();
  std::vector<int> ready(layout.rbegin(), layout.rend());
  std::vector<int64_t> bytes;
  for (int index : ready) {
    bytes.push_back(store.parameters()[index].tensor.numel() * 4);
  }
  std::vector<GradientBucket> buckets;
  for (const std::vector<int>& members :
       AssignBuckets(bytes, {first_cap_bytes, cap_bytes})) {
    GradientBucket bucket;
    for (int ready_index : members) {
      const int index = ready[ready_index];
      bucket.parameters.push_back(index);
      bucket.numel += store.parameters()[index].tensor.numel();
    }
    // Reverse layout order: the last member is the lowest in memory.
    bucket.offset = store.offset(bucket.parameters.back());
    buckets.push_back(std::move(bucket));
  }
  return buckets;
}

BucketEngine::~BucketEngine() { RemoveHooks(); }

void BucketEngine::RemoveHooks() {
  for (size_t i = 0; i < accumulators_.size(); ++i) {
    accumulators_[i]->del_post_hook(hook_keys_[i]);
  }
  accumulators_.clear();
  hook_keys_.clear();
}

void BucketEngine::Setup(const ParameterStore& store,
                         std::vector<GradientBucket> buckets, LaunchFn launch) {
  RemoveHooks();
  store_ = &store;
  buckets_ = std::move(buckets);
  launch_ = std::move(launch);
  const int count = static_cast<int>(store.parameters().size());
  bucket_of_.assign(count, -1);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (int index : buckets_[b].parameters) {
      CHECK_EQ(bucket_of_[index], -1) << "parameter " << index << " twice";
      bucket_of_[index] = static_cast<int>(b);
    }
  }
  for (int i = 0; i < count; ++i) {
    const NamedParameter& parameter = store.parameters()[i];
    CHECK_GE(bucket_of_[i], 0) << parameter.name << " is in no bucket";
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(parameter.tensor);
    CHECK(accumulator != nullptr)
        << parameter.name << " is not a leaf that requires grad";
    hook_keys_.push_back(accumulator->add_post_hook(
        std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, i](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list&) {
              OnGradientReady(i);
              return outputs;
            })));
    accumulators_.push_back(std::move(accumulator));
  }
  armed_ = false;
  ready_.assign(count, false);
  pending_.assign(buckets_.size(), 0);
}

void BucketEngine::Arm() {
  CHECK(store_ != nullptr) << "Setup first";
  for (size_t b = 0; b < buckets_.size(); ++b) {
    pending_[b] = static_cast<int>(buckets_[b].parameters.size());
  }
  std::fill(ready_.begin(), ready_.end(), false);
  next_bucket_ = 0;
  armed_ = true;
}

void BucketEngine::OnGradientReady(int index) {
  if (on_gradient_) on_gradient_(index);
  if (!armed_ || ready_[index]) return;
  ready_[index] = true;
  if (--pending_[bucket_of_[index]] != 0) return;
  if (!deferred_) LaunchCompleteBuckets();
}

void BucketEngine::LaunchCompleteBuckets() {
  while (next_bucket_ < buckets_.size() && pending_[next_bucket_] == 0) {
    const int bucket = static_cast<int>(next_bucket_++);
    launch_(bucket);
  }
}

void BucketEngine::LaunchDeferred() {
  if (armed_ && deferred_) LaunchCompleteBuckets();
}

absl::Status BucketEngine::CheckAllLaunched(absl::string_view who) const {
  if (next_bucket_ >= buckets_.size()) return absl::OkStatus();
  // A bucket never became ready: some parameter got no gradient. Its peers
  // are blocked in this bucket's collective; failing here ends the run.
  for (int index : buckets_[next_bucket_].parameters) {
    if (!ready_[index]) {
      return absl::FailedPreconditionError(absl::StrCat(
          who, ": parameter ", store_->parameters()[index].name,
          " got no gradient in a synchronised backward (bucket ", next_bucket_,
          "); every parameter must take part in the loss"));
    }
  }
  LOG(FATAL) << "bucket " << next_bucket_ << " not launched but complete";
}

std::vector<BucketSummary> BucketEngine::Summaries() const {
  std::vector<BucketSummary> summaries;
  for (const GradientBucket& bucket : buckets_) {
    BucketSummary summary;
    summary.parameters = static_cast<int>(bucket.parameters.size());
    summary.bytes = bucket.numel * 4;
    summary.first_parameter =
        store_->parameters()[bucket.parameters.front()].name;
    summary.last_parameter = store_->parameters()[bucket.parameters.back()].name;
    summaries.push_back(std::move(summary));
  }
  return summaries;
}

}  // namespace mtb
