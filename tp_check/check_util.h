// What tp_check adds to the shared "equals the reference" harness
// (common/equivalence/equivalence.h, where the vocabulary is defined): each
// check's word in its tensors' keys, and the harness's names in this
// namespace so that the checks read as before.
#ifndef MTB_TP_CHECK_CHECK_UTIL_H_
#define MTB_TP_CHECK_CHECK_UTIL_H_

#include <cstdint>

#include "common/equivalence/equivalence.h"
#include "common/equivalence/equivalence.pb.h"
#include "tp_check/tp_check.pb.h"

namespace mtb::tp_check {

using equivalence::AllReduceEachWay;
using equivalence::CheckHooks;
using equivalence::CheckRecorder;
using equivalence::CheckResult;
using equivalence::CollectiveCheck;
using equivalence::CollectiveCounter;
using equivalence::CompareCollectives;
using equivalence::ExpectedCollective;
using equivalence::kBackward;
using equivalence::kForward;
using equivalence::Leaf;
using equivalence::SeededTensors;
using equivalence::Shard;
using equivalence::ShardLeaf;
using equivalence::ShardQkv;
using equivalence::TensorCheck;
using equivalence::TensorKind;
using equivalence::TensorKindName;
using equivalence::TensorSpec;
using equivalence::Tolerance;

// The word of each check in its tensors' keys: never reuse one (results
// pinned by a seed change when a word does).
enum class CheckKey : uint64_t {
  kColumnLinear = 1,
  kRowLinear = 2,
  kMlp = 3,
  kAttention = 4,
  kSequenceParallel = 5,
  kVocabParallelCe = 6,
};

// The tensors of `check` under `seed` (--seed).
inline SeededTensors SeededFor(uint64_t seed, CheckKey check) {
  return SeededTensors(seed, static_cast<uint64_t>(check));
}

// --rtol and --atol.
inline Tolerance ToleranceOf(const CheckOptions& options) {
  return Tolerance{options.rtol(), options.atol()};
}

}  // namespace mtb::tp_check

#endif  // MTB_TP_CHECK_CHECK_UTIL_H_
