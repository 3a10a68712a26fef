#include "trainer/strategy/replicas.h"

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status.h"

namespace mtb {
namespace {

// FNV-1a over the names and shapes: one number that differs when the
// parameter lists differ.
int64_t LayoutHash(const std::vector<NamedParameter>& parameters) {
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&hash](const std::string& text) {
    for (unsigned char c : text) {
      hash ^= c;
      hash *= 1099511628211ull;
    }
  };
  for (const NamedParameter& p : parameters) {
    mix(p.name);
    for (int64_t size : p.tensor.sizes()) mix(absl::StrCat(":", size));
    mix(";");
  }
  return static_cast<int64_t>(hash);
}

}  // namespace

absl::Status CheckSameParametersOnEveryRank(
    collective::Communicator& communicator, const ParameterStore& store,
    const std::string& who) {
  const std::vector<NamedParameter>& parameters = store.parameters();
  const at::Tensor mine =
      at::tensor({static_cast<int64_t>(parameters.size()), store.numel(),
                  LayoutHash(parameters)},
                 at::kLong);
  const int n = communicator.world_size();
  const at::Tensor all = at::empty({n * 3}, at::kLong);
  RETURN_IF_ERROR(
      Annotate(communicator.AllGather(mine, all),
               absl::StrCat(who, ": comparing parameter lists across ranks")));
  const int64_t* v = all.data_ptr<int64_t>();
  for (int r = 1; r < n; ++r) {
    if (v[3 * r] != v[0] || v[3 * r + 1] != v[1] || v[3 * r + 2] != v[2]) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: rank %d has %d parameters (%d elements, layout hash %016x) "
          "but rank 0 has %d (%d elements, layout hash %016x): every rank "
          "must build the same model (same flags)",
          who, r, v[3 * r], v[3 * r + 1], static_cast<uint64_t>(v[3 * r + 2]),
          v[0], v[1], static_cast<uint64_t>(v[2])));
    }
  }
  return absl::OkStatus();
}

absl::Status BroadcastParametersFromRankZero(
    collective::Communicator& communicator, const ParameterStore& store,
    const std::vector<GradientBucket>& buckets, const std::string& who) {
  at::NoGradGuard no_grad;
  for (size_t b = 0; b < buckets.size(); ++b) {
    RETURN_IF_ERROR(Annotate(
        communicator.Broadcast(
            store.flat_parameters().narrow(0, buckets[b].offset,
                                           buckets[b].numel),
            /*root=*/0),
        absl::StrCat(who, ": broadcasting rank 0's parameters (bucket ", b,
                     ")")));
  }
  return absl::OkStatus();
}

}  // namespace mtb
