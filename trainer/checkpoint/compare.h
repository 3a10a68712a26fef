// Two checkpoints compared offline over their logical global tensors
// (`ckpt_tool compare`, docs/checkpoint.md): each tensor is assembled from
// whichever shards hold it (the manifest's placements), so checkpoints of
// different world sizes or strategies compare. Single process, one tensor of
// each side in memory at a time. No LibTorch.
#ifndef MTB_TRAINER_CHECKPOINT_COMPARE_H_
#define MTB_TRAINER_CHECKPOINT_COMPARE_H_

#include <string>

#include "absl/status/statusor.h"
#include "trainer/checkpoint/checkpoint.pb.h"

namespace mtb::checkpoint {

// The elements [0, numel) of tensor `entry` of checkpoint `dir` as raw
// bytes (ReadTensorRanges over the whole tensor).
absl::StatusOr<std::string> ReadGlobalTensor(const std::string& dir,
                                             const CheckpointManifest& manifest,
                                             const TensorEntry& entry);

// Compares checkpoint directories `left` and `right` (each verified first:
// an error when one does not verify). Every tensor: the same name, dtype
// and shape, and every element within `tolerance` (|left - right| <=
// tolerance; 0: bit for bit, NaN equal only to the same NaN bits); the
// part digests (PartDigest) and the non-tensor state (step, tokens seen,
// seed, next dropout keys, data position, last rate, schedule). `equal`
// says whether all of it matched; differences name what did not.
absl::StatusOr<CheckpointComparison> Compare(const std::string& left, const std::string& right,
                                             double tolerance);

// One line per difference ("model/wte: element 17 [0, 17]: left 0.5, right
// 0.25, max |difference| 0.25 over 1 element(s)"), and the digests.
std::string RenderComparison(const CheckpointComparison& comparison);

}  // namespace mtb::checkpoint

#endif  // MTB_TRAINER_CHECKPOINT_COMPARE_H_
