// Distributed checkpoints on disk (docs/checkpoint.md): each rank
// writes its tensors and state into a staging directory, rank 0 publishes
// (manifest, READY, rename, `latest`), and readers verify, resolve `latest`
// with fallbacks, load a rank's tensors, and prune by retention. Usable
// without the training loop: tensors are named byte ranges here.
#ifndef MTB_TRAINER_CHECKPOINT_CHECKPOINT_H_
#define MTB_TRAINER_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainer/checkpoint/checkpoint.pb.h"

namespace mtb::checkpoint {

// "step_00000040" and its staging name ".step_00000040.tmp".
std::string StepDirName(int64_t step);
std::string StagingDirName(int64_t step);
// The step of a "step_NNNNNNNN" name, or -1.
int64_t StepOfDirName(absl::string_view name);

// Bytes per element of "float32", "bfloat16", "float16", "int64", "int32",
// "uint8"; 0 for anything else.
int64_t ElementBytes(absl::string_view dtype);

// One rank's piece of a tensor: elements [offset, offset + length) of its
// flattened global shape, as raw little-endian bytes.
struct TensorShard {
  std::string name;
  std::string dtype;
  std::vector<int64_t> global_shape;
  int64_t offset = 0;
  int64_t length = 0;
  absl::string_view bytes;
};

// Test and fault hooks: called with the fraction of a rank's shard bytes
// written so far (0.5: mid-shard) and before READY / `latest` on rank 0.
struct Hooks {
  std::function<void()> mid_shard_write;
  std::function<void()> before_ready;
  std::function<void()> before_latest;
};

// Rank 0, before any rank writes a save of `step` under `root`: removes
// what a crashed save of that step left in its staging directory and
// creates it empty. Returns the staging directory's path.
absl::StatusOr<std::string> PrepareStaging(const std::string& root, int64_t step);

// Rank 0, once a save of `step` failed and no rank writes into it any more:
// removes its staging directory, so a failed save does not keep holding the
// disk space it took. Published checkpoints are not touched.
absl::Status DiscardStaging(const std::string& root, int64_t step);

// Writes rank_<rank>.bin (header + tensors, SHA-256 computed while writing,
// fsynced) and rank_<rank>.meta (RankState JSON, fsynced) into `staging`
// (created if missing). Returns what rank 0 needs for the manifest.
absl::StatusOr<RankReport> WriteRankFiles(const std::string& staging, int rank,
                                          const std::vector<TensorShard>& shards,
                                          const RankState& state,
                                          const Hooks& hooks = {});

// Rank 0, once every rank's report is in: completes `manifest` (tensors and
// files from `reports`), writes manifest.json and READY (each fsynced),
// fsyncs the staging directory, renames it to step_NNNNNNNN under `root`
// (moving aside and then deleting an orphan of the same step that `latest`
// never named), fsyncs `root`, then atomically points `latest` at it.
// kFailedPrecondition, touching nothing outside staging, when that step's
// directory is a READY checkpoint of another run id.
absl::Status Publish(const std::string& root, CheckpointManifest manifest,
                     const std::vector<RankReport>& reports,
                     const Hooks& hooks = {});

// The READY file of a checkpoint whose manifest.json holds `manifest_bytes`:
// the format, the run id and the manifest's SHA-256, so that READY vouches
// for every byte of the manifest (docs/checkpoint.md "Integrity").
std::string ReadyFileContents(const std::string& run_id, absl::string_view manifest_bytes);

// What VerifyCheckpoint found: the manifest READY vouches for and its digest.
struct VerifiedCheckpoint {
  CheckpointManifest manifest;
  std::string manifest_sha256;
  // False when the files' bytes were not hashed (a trusted digest).
  bool content_hashed = true;
};

// Checks a published checkpoint directory, READY first: the directory
// exists (kNotFound "not found"); READY exists (kFailedPrecondition "no
// READY") and records format 2 and the manifest's SHA-256
// (kFailedPrecondition for a format-1 checkpoint: refused, not read); the
// manifest's bytes have that digest and READY is exactly what they give
// (kDataLoss "corrupt", naming the file). Then what the manifest says: one
// rank_NNNNN.bin and .meta per rank of its world size, each with its size
// (kNotFound when missing, kDataLoss "corrupt"), every shard header's
// format, rank and tensor count, byte ranges tiling each shard file, every
// tensor's elements covered exactly once, each state file's rank and step;
// then the content: each tensor range of a shard file against its own
// SHA-256 (the header's every field was checked by value), or the file
// whole against the file's SHA-256 where the manifest has no range digests
// (a checkpoint written before them), and each state file whole.
//
// `trusted_manifest_sha256`: when it equals the digest READY records (a
// launcher verified this very manifest in full and handed the digest to its
// ranks), the files' bytes are not hashed again; everything else is checked.
// `defer_hashing`: no file's bytes are hashed either, because the caller
// hashes the files it reads before it reads them (HashCheckpointFiles): a
// rank with no launcher's verdict (torchrun) hashes only what it loads.
absl::StatusOr<VerifiedCheckpoint> VerifyCheckpoint(
    const std::string& dir, const std::string& trusted_manifest_sha256 = "",
    bool defer_hashing = false);
absl::Status Verify(const std::string& dir);

// The manifest of `dir` (no verification).
absl::StatusOr<CheckpointManifest> ReadManifest(const std::string& dir);

struct Resolved {
  std::string dir;  // the checkpoint to resume from
  CheckpointManifest manifest;
  std::string manifest_sha256;
  // What resolution had to do: "latest names step_00000004, which fails
  // verification (...): falling back to step_00000002", orphans ignored.
  std::vector<std::string> notes;
  // Why `latest` was not used ("" when it was): it names a checkpoint that
  // fails verification, names none or is garbage, or is missing.
  std::string latest_problem;
};

// `latest` under `root` when it names a checkpoint that verifies; else the
// newest READY checkpoint that verifies, saying why. kNotFound when there is
// none. `trusted_manifest_sha256` and `defer_hashing` as for
// VerifyCheckpoint (deferred, a file whose bytes rotted is found when a rank
// hashes it at load, which then fails on every rank: no fallback).
absl::StatusOr<Resolved> ResolveLatest(const std::string& root,
                                       const std::string& trusted_manifest_sha256 = "",
                                       bool defer_hashing = false);

// One rank's tensors (by name: its shard's elements as bytes) and state.
struct RankCheckpoint {
  std::map<std::string, std::string> tensors;
  std::map<std::string, ShardPlacement> placements;
  RankState state;
};
absl::StatusOr<RankCheckpoint> ReadRank(const std::string& dir, int rank);

// Elements [offset, offset + length) of tensor `name` of a checkpoint,
// wanted at `destination` (length * element bytes). `dtype` and
// `global_shape` are what the reader expects; a checkpoint that disagrees is
// refused. The range need not match any one shard: it is assembled from
// whichever shards hold it (the manifest's placements), so a reader may
// hold its state in other pieces than the writer did.
struct RangeRequest {
  std::string name;
  std::string dtype;
  std::vector<int64_t> global_shape;
  int64_t offset = 0;
  int64_t length = 0;
  char* destination = nullptr;
};

// Reads every request from the shard files of checkpoint `dir` (whose
// manifest is `manifest`), each file opened once, its header checked, bytes
// read straight into the destinations. Does not hash (Verify does):
// kFailedPrecondition for a tensor the checkpoint lacks or holds with another
// dtype or shape; kDataLoss for elements no shard holds or a short file.
absl::Status ReadTensorRanges(const std::string& dir,
                              const CheckpointManifest& manifest,
                              const std::vector<RangeRequest>& requests);

// Checks what a reader of `requests` and of the files `whole_files` of
// checkpoint `dir` will read, before it reads it: each placement (by
// `manifest`) holding any requested element is hashed by its range's
// SHA-256, only those bytes (an fsdp rank reading the 8-byte AdamW step from
// rank 0's shard hashes those 8 bytes); a shard file whose placements carry
// no range digest (a checkpoint written before them) is hashed whole against
// its file SHA-256, as is each of `whole_files` (the state file). kDataLoss
// "corrupt" naming the file (and, for a range, the tensor and its bytes);
// kNotFound when a file is missing or the manifest lists no such file.
// Returns the bytes hashed. For a reader whose checkpoint was verified with
// `defer_hashing`: each byte it loads is checked before it is used.
absl::StatusOr<int64_t> HashCheckpointReads(const std::string& dir,
                                            const CheckpointManifest& manifest,
                                            const std::vector<RangeRequest>& requests,
                                            const std::vector<std::string>& whole_files);

// Every step directory under `root` (newest first) with whether it is READY
// and the run id its manifest names ("" when unreadable).
struct CheckpointListing {
  int64_t step = 0;
  std::string name;
  bool ready = false;
  std::string run_id;
};
std::vector<CheckpointListing> ListCheckpoints(const std::string& root);

// What retention does with each step directory under `root` (newest
// first): `remove` for the READY checkpoints of `run_id` beyond the newest
// `keep_last`, except the one `latest` names and the newest; never another
// run's, never one that is not READY. `why` says which rule decided.
// keep_last <= 0 removes nothing.
struct PruneDecision {
  std::string name;
  bool remove = false;
  std::string why;
};
std::vector<PruneDecision> PlanPrune(const std::string& root, const std::string& run_id,
                                     int keep_last);

// The run id of the checkpoint `latest` names under `root`, else of the
// newest READY one; kNotFound when there is none.
absl::StatusOr<std::string> LatestRunId(const std::string& root);

// Deletes the oldest READY checkpoints of `run_id` beyond the newest
// `keep_last` (by step), never the one `latest` names or the newest, never
// another run's (PlanPrune's `remove`). Returns the names deleted.
// keep_last <= 0 keeps all.
absl::StatusOr<std::vector<std::string>> Prune(const std::string& root,
                                               const std::string& run_id,
                                               int keep_last);

// --fault=corrupt: flips (XOR 0xff) the byte in the middle of `rank`'s
// shard file of the published checkpoint `dir`, in place, as a disk would;
// Verify then fails on its SHA-256. Returns the file's path.
absl::StatusOr<std::string> CorruptShardFile(const std::string& dir, int rank);

}  // namespace mtb::checkpoint

#endif  // MTB_TRAINER_CHECKPOINT_CHECKPOINT_H_
