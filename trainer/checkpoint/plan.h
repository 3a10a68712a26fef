// What a training run does with checkpoints, decided from the flags and the
// files before any rank starts (docs/checkpoint.md "The trainer"): the flag
// rules, whether the checkpoint directory may be written and whose
// checkpoints it holds, which checkpoint a resume starts from (with the
// fallbacks `latest` may take), and whether that checkpoint's configuration
// fits this run's, field by field. Torch-free: the plan is files and protos.
#ifndef MTB_TRAINER_CHECKPOINT_PLAN_H_
#define MTB_TRAINER_CHECKPOINT_PLAN_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/faults/fault_spec.h"
#include "common/results/output_path.h"
#include "trainer/checkpoint/checkpoint.pb.h"
#include "trainer/checkpoint/data_identity.h"
#include "trainer/train_result.pb.h"

namespace mtb::checkpoint {

// The checkpoint flags, paths resolved (ResolveUserPath).
struct CheckpointOptions {
  std::string dir;         // --checkpoint_dir; "" none
  int64_t save_every = 0;  // --save_every; 0 never saves
  // --keep_last: this run's newest checkpoints kept; 0 keeps every one.
  int64_t keep_last = 3;
  // Whether --keep_last was given (its default applies silently).
  bool keep_last_given = false;
  std::string resume;      // --resume: "", "latest" or a checkpoint directory
  bool overwrite = false;  // --overwrite_checkpoints
  // --async_checkpoint: snapshot at the step boundary, write and publish in
  // the background (checkpointer.h, SaveAsync).
  bool async_save = false;
  // --allow_data_change: resume on a data source other than the
  // checkpoint's, deliberately (recorded in the result).
  bool allow_data_change = false;
  // --data_fingerprint=full: hash the whole token file whatever its size.
  bool data_fingerprint_full = false;
  // --data_fingerprint as given: "auto" or "full".
  std::string data_fingerprint = "auto";
};

// The flag rules alone (no files): kInvalidArgument, one line naming the
// flag. --resume needs --checkpoint_dir (the run saves there and owns what
// it saves); --save_every and --keep_last are >= 0; --overwrite_checkpoints
// starts a new run, so it cannot go with --resume; checkpoints hold one run,
// so --repeat must be 1; --async_checkpoint needs saves (--save_every > 0);
// --keep_last given without --checkpoint_dir is refused (the run saves
// nothing, so retention would do nothing); with --checkpoint_dir and no
// --save_every it applies to the checkpoints a preemption notice saves.
absl::Status ValidateCheckpointOptions(const CheckpointOptions& options,
                                       const TrainConfig& config);

// The run's plan. A fresh run has an empty resume_dir and run_id (rank 0
// makes a run id when the workers start); a resumed run inherits the run id
// of the checkpoint it starts from, and with it the ownership of that run's
// checkpoints (retention prunes only those).
struct CheckpointPlan {
  CheckpointOptions options;
  std::string resume_dir;
  CheckpointManifest resume_manifest;
  // The SHA-256 of the resume checkpoint's manifest (its READY records it).
  std::string resume_manifest_sha256;
  // Whether each rank hashes the files it reads when it loads: the resume
  // checkpoint was verified for structure only, by a rank that no launcher
  // of ours started (see kVerifiedCheckpointEnv).
  bool hash_on_load = false;
  int64_t start_step = 0;
  std::string run_id;
  // What planning decided that the user should read (rank 0 prints them):
  // the fallback `latest` took, orphans ignored, a saved schedule kept.
  std::vector<std::string> notes;
  // On resume: the checkpoint's resolved configuration and world size, and
  // whether this run continues it exactly (ResumeExactness): false when it
  // loads onto another layout (a reshard), with the reason.
  TrainConfig saved_config;
  int saved_world_size = 0;
  // The run's data source (every manifest records it) and, on a resume
  // with --allow_data_change, what differs from the checkpoint's.
  DataIdentity data_identity;
  std::vector<std::string> data_changes;
  // What differs from the checkpoint's layout ("world size 2 -> 3",
  // "--strategy zero2 -> ddp", ...); empty: the same layout.
  std::vector<std::string> layout_changes;
  bool resume_exact = true;
  std::string inexact_reason;

  bool enabled() const { return !options.dir.empty(); }
  bool resuming() const { return !resume_dir.empty(); }
  // A resume onto another world size, strategy or per-rank batch split.
  bool resharding() const { return resuming() && !layout_changes.empty(); }
  // A resume at the run's last step (--steps equals the checkpoint's):
  // nothing is trained; with --save_every > 0 the loaded state is saved at
  // once, in this run's layout (an offline reshard).
  bool trains_nothing(int64_t steps) const {
    return resuming() && start_step == steps;
  }
  // Saves after step `step` of a run of `steps`: every save_every steps and
  // always the last step (when save_every > 0).
  bool SavesAt(int64_t step, int64_t steps) const;
};

// Verify once. A resume checkpoint is verified in full (every file hashed)
// by the process that plans before any rank starts: the launcher, which
// then puts the manifest's digest into its environment under this name
// (empty when it verified none: a fresh run), so the ranks it starts
// inherit it. A rank (RANK set) planning with that digest checks the same
// checkpoint's READY, manifest, sizes, headers and layout but hashes no
// shard again (VerifyCheckpoint's trusted digest); one of our launcher's
// ranks planning another checkpoint (a restart resolving a newer `latest`)
// hashes it in full, so that `latest` can still fall back past a rotten
// file. A rank without the variable (started by torchrun or by hand: no
// launcher of ours verified anything) checks the same structure and hashes,
// when it loads, only the bytes it reads (CheckpointPlan::hash_on_load,
// HashCheckpointReads): each tensor range by its own digest, once per rank
// that reads it, not every file on every rank; a rotten range then fails
// the resume on every rank, naming the file and the tensor (no fallback).
// The bytes a rank loads are read once more, unhashed.
inline constexpr char kVerifiedCheckpointEnv[] = "MTB_VERIFIED_CHECKPOINT_SHA256";

// Whether the user gave a flag (by name, without dashes) on the command line.
using FlagGiven = std::function<bool(absl::string_view)>;

// Plans the run. `config` is this run's resolved, valid configuration for
// `world_size` ranks; on resume it is reconciled with the checkpoint's:
//   - the schedule (--lr_warmup_steps, --lr_decay_steps, --min_lr) is the
//     checkpoint's resolved one unless the user gave the flag, so that a
//     larger --steps never silently changes the rate of steps already
//     trained (a note says so; a flag given with another value refuses);
//   - every other field must be equal except those a resume may change
//     (ConfigMismatches) and the layout (LayoutFields: world size,
//     strategy, per-rank batch, gradient accumulation and sync, buckets),
//     which may change when the global batch (world size x --batch_size x
//     --grad_accum) stays: a reshard, reported as not exact
//     (ResumeExactness);
//   - --steps stays the run's total: start_step <= --steps (equal: nothing
//     is trained and a --save_every > 0 saves the loaded state at once,
//     never over the checkpoint it resumes from), and a timing warm-up left
//     at its default shrinks to fit the steps this process runs (a note says
//     so).
// kInvalidArgument (nothing may start), one line: an unwritable directory;
// READY checkpoints of another run in a fresh run's directory without
// --overwrite_checkpoints, or, with it, at a step this run would save; a
// --resume that finds nothing usable; the mismatches, listed.
absl::StatusOr<CheckpointPlan> PlanCheckpoints(const CheckpointOptions& options,
                                               TrainConfig* config,
                                               int world_size,
                                               const FlagGiven& given);

// One "--flag: checkpoint A, this run B" per field of TrainConfig that
// differs, except those a resume may change: --steps, the timing warm-up,
// --repeat, --intra_op_threads, --log_every, --peak_flops,
// --activation_checkpointing and --ddp_overlap (proven not to change a
// number); --fault is no TrainConfig field. Everything else (model shape,
// data, batch, precision, optimizer, schedule, seed, strategy, buckets)
// changes the numbers of an exact resume.
std::vector<std::string> ConfigMismatches(const TrainConfig& saved,
                                          const TrainConfig& now);

// The TrainConfig fields that only say how the global batch and its
// gradients are laid out over ranks: strategy, batch_size, grad_accum,
// grad_sync, bucket_cap_mb (with the world size, the layout). A resume may
// change them when the global batch stays the same.
const std::set<std::string>& LayoutFields();

// Whether a resume from a checkpoint with `layout_changes` (empty: the
// same layout) continues the run bit for bit, and if not, why. `exact_mode`
// (--reduction=exact, trainer/exact/exact.h: the checkpoint's run and this one
// alike): every layout gives the same bits, so any reshard is exact.
struct Exactness {
  bool exact = true;
  std::string reason;
};
Exactness ResumeExactness(const std::vector<std::string>& layout_changes,
                          bool exact_mode = false);

// The files a run's checkpoints read and write, for the check that no
// output overwrites an input (CheckOutputsAgainstInputs,
// common/results/output_path.h): inputs are the resume checkpoint's
// manifest, READY and rank files (and the root's `latest` when the run does
// not save); the output is `latest` when the run saves (it rewrites it).
std::vector<NamedPath> CheckpointInputs(const CheckpointPlan& plan);
std::vector<NamedPath> CheckpointOutputs(const CheckpointPlan& plan);

// Disk before work: kInvalidArgument naming both sizes when `free_bytes`
// (the checkpoint directory's file system) cannot hold one save of this run
// (the resumed checkpoint's size, else 12 bytes per parameter: fp32 weights
// and Adam's two moments); a warning in the plan's notes when it cannot
// hold the checkpoints retention keeps at once (--keep_last, plus the save
// being written). PlanCheckpoints applies it with the directory's free
// space; nothing to check when the run saves nothing.
absl::Status CheckCheckpointSpace(CheckpointPlan* plan, const TrainConfig& config,
                                  int64_t free_bytes);

// --fault= checkpoint phases (checkpoint_write, checkpoint_before_ready,
// checkpoint_before_latest) must name a step the run saves after and runs;
// checkpoint_before_latest happens on rank 0 only (it alone publishes).
absl::Status ValidateCheckpointFaults(const std::vector<Fault>& faults,
                                      const CheckpointPlan& plan,
                                      int64_t steps);

}  // namespace mtb::checkpoint

#endif  // MTB_TRAINER_CHECKPOINT_PLAN_H_
