#include "trainer/tp/options.h"
#include "trainer/checkpoint/plan.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/data_identity.h"
#include "trainer/config/config.h"
#include "trainer/memory/memory_estimate.h"

namespace mtb::checkpoint {
namespace {

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

// TrainConfig fields a resume may change: they change no number of the run
// (or only which steps it runs and how it reports).
const std::set<std::string>& MayChangeOnResume() {
  static const auto* fields = new std::set<std::string>{
      "steps",          "timing_warmup_steps",      "repeat",
      "intra_op_threads", "log_every",              "peak_flops",
      "activation_checkpointing", "ddp_launch_after_backward"};
  return *fields;
}

std::string FieldValue(const TrainConfig& config,
                       const google::protobuf::FieldDescriptor* field) {
  std::string value;
  google::protobuf::TextFormat::PrintFieldValueToString(config, field, -1, &value);
  return value;
}

bool FieldEqual(const TrainConfig& a, const TrainConfig& b,
                const google::protobuf::FieldDescriptor* field) {
  return FieldValue(a, field) == FieldValue(b, field);
}

// The steps a fresh run of `plan` would save after, up to `steps`.
std::set<int64_t> SaveSteps(const CheckpointPlan& plan, int64_t steps) {
  std::set<int64_t> saved;
  if (plan.options.save_every <= 0) return saved;
  for (int64_t step = plan.options.save_every; step <= steps;
       step += plan.options.save_every) {
    saved.insert(step);
  }
  saved.insert(steps);
  return saved;
}

// A fresh run (no --resume): another run's READY checkpoints refuse it,
// unless --overwrite_checkpoints, which never replaces one either.
absl::Status CheckOwnership(const CheckpointPlan& plan, int64_t steps) {
  std::vector<std::string> ready;
  std::set<std::string> runs;
  std::map<int64_t, std::string> by_step;
  for (const CheckpointListing& entry : ListCheckpoints(plan.options.dir)) {
    if (!entry.ready) continue;
    ready.push_back(entry.name);
    runs.insert(entry.run_id.empty() ? "(unreadable manifest)" : entry.run_id);
    by_step[entry.step] = entry.name;
  }
  if (ready.empty()) return absl::OkStatus();
  const std::string dir = plan.options.dir;
  if (!plan.options.overwrite) {
    return Invalid(absl::StrCat(
        "--checkpoint_dir=", dir, " holds READY checkpoints of another run (run ",
        absl::StrJoin(runs, ", "), ": ", absl::StrJoin(ready, ", "),
        "): pass --resume=latest to continue it, --overwrite_checkpoints to start "
        "a new run beside it (nothing is deleted), or another --checkpoint_dir"));
  }
  std::vector<std::string> collisions;
  for (int64_t step : SaveSteps(plan, steps)) {
    if (auto found = by_step.find(step); found != by_step.end()) {
      collisions.push_back(found->second);
    }
  }
  if (!collisions.empty()) {
    return Invalid(absl::StrCat(
        "--overwrite_checkpoints: this run would save ", absl::StrJoin(collisions, ", "),
        " in --checkpoint_dir=", dir,
        ", which another run's checkpoint already is; it deletes nothing, so choose "
        "another --checkpoint_dir or --save_every, or move them away"));
  }
  return absl::OkStatus();
}

// --resume=PATH names one checkpoint directory: a path that does not exist
// or a checkpoint root (it holds `latest` or step directories) is refused
// saying so, before any verification message could mislead.
// The manifest digest the launcher verified in full, when this process is
// one of its ranks; "" otherwise.
std::string TrustedManifestDigest() {
  const char* rank = std::getenv("RANK");
  const char* digest = std::getenv(kVerifiedCheckpointEnv);
  if (rank == nullptr || digest == nullptr) return "";
  return digest;
}

// A rank no launcher of ours started (torchrun, by hand): it has RANK but
// not the variable our launcher always hands down.
bool RankWithoutLauncherVerdict() {
  return std::getenv("RANK") != nullptr && std::getenv(kVerifiedCheckpointEnv) == nullptr;
}

// The launcher (no RANK) hands its verdict to the ranks it starts: the
// digest it verified in full, "" when it verified none.
void HandDownVerdict(const std::string& manifest_sha256) {
  if (std::getenv("RANK") == nullptr) {
    ::setenv(kVerifiedCheckpointEnv, manifest_sha256.c_str(), /*overwrite=*/1);
  }
}

absl::Status CheckResumePath(const std::string& path) {
  const std::string flag = absl::StrCat("--resume=", path);
  if (!PathExists(path)) {
    return Invalid(absl::StrCat(flag, ": not found (give a checkpoint directory "
                                      "ROOT/step_NNNNNNNN, or --resume=latest)"));
  }
  const bool root = PathExists(absl::StrCat(path, "/latest")) || !ListCheckpoints(path).empty();
  if (root && !PathExists(absl::StrCat(path, "/READY"))) {
    return Invalid(absl::StrCat(
        flag, ": is a checkpoint root (it holds `latest` or step_NNNNNNNN directories), not "
              "one checkpoint: give --checkpoint_dir=",
        path, " --resume=latest, or --resume=", path, "/step_NNNNNNNN"));
  }
  return absl::OkStatus();
}

// The tp ranks of a group train the same samples (docs/tp.md), as do the
// stages of a pipeline (docs/pipeline.md): the data is split over
// world_size / (tp x pp) replicas.
int ModelParallelSize(const TrainConfig& config) {
  return tp::TensorParallelSize(config) * std::max(1, config.pp());
}

int64_t GlobalBatch(const TrainConfig& config, int world_size) {
  return static_cast<int64_t>(world_size / ModelParallelSize(config)) *
         config.batch_size() * config.grad_accum();
}

std::string GlobalBatchArithmetic(const TrainConfig& config, int world_size) {
  const int tp = ModelParallelSize(config);
  const char* divisor = config.pp() > 1
                            ? (tp::TensorParallelSize(config) > 1 ? " / --tp x --pp=" : " / --pp=")
                            : " / --tp=";
  return absl::StrCat(world_size / tp,
                      tp > 1 ? absl::StrCat(" (", world_size, divisor, tp, ")") : "",
                      " x ", config.batch_size(), " x ", config.grad_accum(),
                      " = ", GlobalBatch(config, world_size));
}

// "world size 2 -> 3", "--strategy zero2 -> ddp", ... for each layout
// field that differs.
std::vector<std::string> LayoutChanges(const TrainConfig& saved_config, int saved_world_size,
                                       const TrainConfig& now_config, int world_size) {
  // An unset --tp (0) is one tp rank: said as 1, equal to an explicit 1.
  TrainConfig saved = saved_config;
  TrainConfig now = now_config;
  saved.set_tp(tp::TensorParallelSize(saved));
  now.set_tp(tp::TensorParallelSize(now));
  std::vector<std::string> changes;
  if (saved_world_size != world_size) {
    changes.push_back(absl::StrCat("world size ", saved_world_size, " -> ", world_size));
  }
  const google::protobuf::Descriptor* descriptor = TrainConfig::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    if (LayoutFields().count(field->name()) == 0 || FieldEqual(saved, now, field)) continue;
    changes.push_back(absl::StrCat("--", field->name(), " ", FieldValue(saved, field), " -> ",
                                   FieldValue(now, field)));
  }
  return changes;
}

// Bytes one save writes: the resumed checkpoint's own size when resuming
// (the same state, whatever the layout), else the closed form: the model's
// fp32 parameters and Adam's two fp32 moments (rank files' headers and state
// are a few KiB).
int64_t SaveBytes(const CheckpointPlan& plan, const TrainConfig& config) {
  if (plan.resuming()) {
    int64_t bytes = 0;
    for (const FileEntry& file : plan.resume_manifest.files()) bytes += file.size();
    return bytes;
  }
  return 3 * 4 * GptParameterCount(config);
}

}  // namespace

std::vector<NamedPath> CheckpointInputs(const CheckpointPlan& plan) {
  std::vector<NamedPath> inputs;
  if (!plan.resuming()) return inputs;
  const std::string what = absl::StrCat("the resume checkpoint ", plan.resume_dir, "'s ");
  inputs.push_back({what + "manifest.json", plan.resume_dir + "/manifest.json"});
  inputs.push_back({what + "READY", plan.resume_dir + "/READY"});
  for (const FileEntry& file : plan.resume_manifest.files()) {
    inputs.push_back({what + file.name(), absl::StrCat(plan.resume_dir, "/", file.name())});
  }
  // A run that saves rewrites `latest` itself: it is one of its outputs.
  if (plan.options.save_every <= 0) {
    inputs.push_back({"--checkpoint_dir's `latest`", plan.options.dir + "/latest"});
  }
  return inputs;
}

std::vector<NamedPath> CheckpointOutputs(const CheckpointPlan& plan) {
  std::vector<NamedPath> outputs;
  if (!plan.enabled() || plan.options.save_every <= 0) return outputs;
  outputs.push_back({"--checkpoint_dir's `latest`", plan.options.dir + "/latest"});
  return outputs;
}

absl::Status CheckCheckpointSpace(CheckpointPlan* plan, const TrainConfig& config,
                                  int64_t free_bytes) {
  if (!plan->enabled() || plan->options.save_every <= 0) return absl::OkStatus();
  const int64_t save_bytes = SaveBytes(*plan, config);
  // A save is written into staging and renamed: one save's bytes.
  if (free_bytes < save_bytes) {
    return Invalid(absl::StrCat(
        "--checkpoint_dir=", plan->options.dir, ": not enough free space for one save: a "
        "checkpoint of this run takes ", Mebibytes(save_bytes), ", the file system has ",
        Mebibytes(free_bytes), " free (free some, or give another --checkpoint_dir)"));
  }
  int64_t saves = 0;
  for (int64_t step : SaveSteps(*plan, config.steps())) saves += step > plan->start_step;
  // Retention keeps --keep_last; a new save exists beside them until the
  // oldest is pruned.
  const int64_t held = plan->options.keep_last > 0
                           ? std::min<int64_t>(saves, plan->options.keep_last + 1)
                           : saves;
  if (free_bytes < held * save_bytes) {
    plan->notes.push_back(absl::StrCat(
        "warning: --checkpoint_dir=", plan->options.dir, " has ", Mebibytes(free_bytes),
        " free, less than the ", held, " checkpoints of ", Mebibytes(save_bytes),
        " this run keeps at once (--keep_last=", plan->options.keep_last,
        "): a later save may fail for space"));
  }
  return absl::OkStatus();
}

namespace {

absl::Status CheckSpace(CheckpointPlan* plan, const TrainConfig& config) {
  if (!plan->enabled() || plan->options.save_every <= 0) return absl::OkStatus();
  absl::StatusOr<int64_t> free_bytes = FreeBytesAt(plan->options.dir);
  if (!free_bytes.ok()) return absl::OkStatus();  // unknown: a failing save says why
  return CheckCheckpointSpace(plan, config, *free_bytes);
}

}  // namespace

const std::set<std::string>& LayoutFields() {
  static const auto* fields = new std::set<std::string>{
      "strategy", "batch_size", "grad_accum", "grad_sync", "bucket_cap_mb", "tp",
      "sequence_parallel", "pp", "pp_schedule", "pp_microbatches", "pp_split"};
  return *fields;
}

Exactness ResumeExactness(const std::vector<std::string>& layout_changes,
                          bool exact_mode) {
  Exactness exactness;
  // Exact mode sums in no layout's order (int64 on a fixed grid, chunks of
  // global samples, the intra-op threads pinned and checked above).
  if (layout_changes.empty() || exact_mode) return exactness;
  exactness.exact = false;
  exactness.reason = absl::StrCat(
      "resumed onto another layout (", absl::StrJoin(layout_changes, ", "),
      "): the data position, model, optimizer state and schedule are continued, but "
      "gradients are summed in another order, so later steps may differ in the last "
      "bits from a run that kept its layout");
  return exactness;
}

bool CheckpointPlan::SavesAt(int64_t step, int64_t steps) const {
  if (!enabled() || options.save_every <= 0) return false;
  return step % options.save_every == 0 || step == steps;
}

absl::Status ValidateCheckpointOptions(const CheckpointOptions& options,
                                       const TrainConfig& config) {
  if (options.data_fingerprint != "auto" && options.data_fingerprint != "full") {
    return Invalid(absl::StrCat("--data_fingerprint=", options.data_fingerprint,
                                ": expected auto or full"));
  }
  if (options.allow_data_change && options.resume.empty()) {
    return Invalid("--allow_data_change needs --resume (it lets a resume continue on other "
                   "data; a fresh run has no checkpoint data to differ from)");
  }
  if (options.save_every < 0) {
    return Invalid(absl::StrCat("--save_every=", options.save_every,
                                " must be >= 0 (0: never save)"));
  }
  if (options.keep_last < 0) {
    return Invalid(absl::StrCat("--keep_last=", options.keep_last,
                                " must be >= 0 (0: keep every checkpoint)"));
  }
  if (options.dir.empty()) {
    if (!options.resume.empty()) {
      return Invalid(absl::StrCat(
          "--resume=", options.resume,
          " needs --checkpoint_dir (where the resumed run saves; it owns that "
          "run's checkpoints there)"));
    }
    if (options.save_every > 0) {
      return Invalid(absl::StrCat("--save_every=", options.save_every,
                                  " needs --checkpoint_dir"));
    }
    if (options.overwrite) {
      return Invalid("--overwrite_checkpoints needs --checkpoint_dir");
    }
    if (options.keep_last_given) {
      return Invalid(absl::StrCat("--keep_last=", options.keep_last,
                                  " needs --checkpoint_dir: this run saves no checkpoint, so "
                                  "there is none to keep or prune"));
    }
    if (options.async_save) {
      return Invalid("--async_checkpoint needs --checkpoint_dir and --save_every");
    }
    return absl::OkStatus();
  }
  if (options.async_save && options.save_every == 0) {
    return Invalid("--async_checkpoint needs --save_every > 0 (it says how saves are "
                   "written; this run saves none)");
  }
  if (options.overwrite && !options.resume.empty()) {
    return Invalid(absl::StrCat(
        "--overwrite_checkpoints starts a new run, --resume=", options.resume,
        " continues one: give one of them"));
  }
  if (config.repeat() != 1) {
    return Invalid(absl::StrCat("--repeat=", config.repeat(),
                                " cannot be used with --checkpoint_dir: a "
                                "checkpointed run is one run"));
  }
  return absl::OkStatus();
}

std::vector<std::string> ConfigMismatches(const TrainConfig& saved,
                                          const TrainConfig& now) {
  std::vector<std::string> mismatches;
  const google::protobuf::Descriptor* descriptor = TrainConfig::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    // Exact mode's bits depend on the intra-op (OpenBLAS) thread count.
    const bool pinned = field->name() == "intra_op_threads" &&
                        (IsExact(saved) || IsExact(now));
    if (MayChangeOnResume().count(field->name()) > 0 && !pinned) continue;
    if (FieldEqual(saved, now, field)) continue;
    mismatches.push_back(absl::StrCat("--", field->name(), ": checkpoint ",
                                      FieldValue(saved, field), ", this run ",
                                      FieldValue(now, field)));
  }
  return mismatches;
}

absl::StatusOr<CheckpointPlan> PlanCheckpoints(const CheckpointOptions& options,
                                               TrainConfig* config,
                                               int world_size,
                                               const FlagGiven& given) {
  CheckpointPlan plan;
  plan.options = options;
  if (!plan.enabled()) return plan;
  if (options.save_every > 0) {
    RETURN_IF_ERROR(CheckDirectoryWritable("checkpoint_dir", options.dir));
  }
  absl::StatusOr<DataIdentity> data = IdentifyData(*config, options.data_fingerprint_full);
  if (!data.ok()) return Invalid(absl::StrCat("--data=", config->data(), ": ", data.status().message()));
  plan.data_identity = *std::move(data);
  if (options.resume.empty()) {
    if (options.save_every == 0) {
      // Saving only when preempted is a schedule of its own (a SIGTERM's
      // checkpoint), not a flag without effect: said at start, not refused.
      plan.notes.push_back(absl::StrCat(
          "--checkpoint_dir=", options.dir,
          " without --save_every: a checkpoint is saved only on a preemption notice "
          "(SIGTERM); give --save_every=N to save every N steps and after the last"));
    }
    RETURN_IF_ERROR(CheckOwnership(plan, config->steps()));
    RETURN_IF_ERROR(CheckSpace(&plan, *config));
    HandDownVerdict("");
    return plan;
  }

  const std::string flag = absl::StrCat("--resume=", options.resume);
  const std::string trusted = TrustedManifestDigest();
  // Such a rank hashes only the files it reads, when it loads (plan.h).
  const bool defer_hashing = RankWithoutLauncherVerdict();
  if (options.resume == "latest") {
    bool any_ready = false;
    for (const CheckpointListing& entry : ListCheckpoints(options.dir)) {
      any_ready |= entry.ready;
    }
    if (!any_ready) {
      // A restart before the first save lands here: nothing to resume yet.
      plan.notes.push_back(absl::StrCat(flag, ": ", options.dir,
                                        " holds no checkpoint yet: this run starts "
                                        "from step 0"));
      HandDownVerdict("");
      return plan;
    }
    absl::StatusOr<Resolved> resolved = ResolveLatest(options.dir, trusted, defer_hashing);
    if (!resolved.ok()) return Invalid(absl::StrCat(flag, ": ", resolved.status().message()));
    plan.resume_dir = resolved->dir;
    plan.resume_manifest = resolved->manifest;
    plan.resume_manifest_sha256 = resolved->manifest_sha256;
    for (const std::string& note : resolved->notes) {
      plan.notes.push_back(absl::StrCat(flag, ": ", note));
    }
  } else {
    RETURN_IF_ERROR(CheckResumePath(options.resume));
    absl::StatusOr<VerifiedCheckpoint> verified = VerifyCheckpoint(options.resume, trusted,
                                                                 defer_hashing);
    if (!verified.ok()) {
      return Invalid(absl::StrCat(flag, ": ", verified.status().message(),
                                  " (--resume=latest picks the newest checkpoint that "
                                  "verifies)"));
    }
    plan.resume_manifest = verified->manifest;
    plan.resume_manifest_sha256 = verified->manifest_sha256;
    plan.resume_dir = options.resume;
  }
  plan.hash_on_load = defer_hashing;
  // The ranks this process starts inherit the verdict (see plan.h).
  HandDownVerdict(plan.resume_manifest_sha256);
  const CheckpointManifest& manifest = plan.resume_manifest;
  plan.start_step = manifest.step();
  plan.run_id = manifest.run_id();
  const std::string from = absl::StrCat(flag, ": ", plan.resume_dir);

  TrainConfig saved;
  if (absl::Status parsed = FromJson(manifest.config_json(), &saved); !parsed.ok()) {
    return Invalid(absl::StrCat(from, ": the manifest's configuration does not parse (",
                                parsed.message(), ")"));
  }
  // The schedule of the steps already trained is the checkpoint's.
  std::vector<std::string> kept;
  auto keep = [&](const char* name, bool differs, const std::string& saved_value,
                  const std::string& value, const std::function<void()>& adopt) {
    if (given(name) || !differs) return;
    kept.push_back(absl::StrCat("--", name, "=", saved_value, " (not ", value, ")"));
    adopt();
  };
  keep("lr_warmup_steps", saved.lr_warmup_steps() != config->lr_warmup_steps(),
       absl::StrCat(saved.lr_warmup_steps()), absl::StrCat(config->lr_warmup_steps()),
       [&] { config->set_lr_warmup_steps(saved.lr_warmup_steps()); });
  keep("lr_decay_steps", saved.lr_decay_steps() != config->lr_decay_steps(),
       absl::StrCat(saved.lr_decay_steps()), absl::StrCat(config->lr_decay_steps()),
       [&] { config->set_lr_decay_steps(saved.lr_decay_steps()); });
  keep("min_lr", saved.min_lr() != config->min_lr(), absl::StrCat(saved.min_lr()),
       absl::StrCat(config->min_lr()), [&] { config->set_min_lr(saved.min_lr()); });
  // The layout (world size, strategy, per-rank batch split) may change when
  // the global batch stays: the data position and the schedule count global
  // samples and steps.
  // The data: its identity, not its path (a moved file is the same data).
  const std::vector<std::string> data_changes =
      manifest.has_data() ? DataDifferences(manifest.data(), plan.data_identity)
                          : std::vector<std::string>{};
  if (!data_changes.empty()) {
    if (!options.allow_data_change) {
      return Invalid(absl::StrCat(
          from, " was trained on other data: ", absl::StrJoin(data_changes, "; "),
          " (the checkpoint's: ", DescribeData(manifest.data()),
          "; give --allow_data_change to continue on this data deliberately: the result "
          "records it)"));
    }
    plan.data_changes = data_changes;
    plan.notes.push_back(absl::StrCat(from, ": --allow_data_change: continuing on other data (",
                                      absl::StrJoin(data_changes, "; "), ")"));
  }
  const bool data_path_may_differ = manifest.has_data() || options.allow_data_change;
  std::vector<std::string> mismatches;
  for (const std::string& mismatch : ConfigMismatches(saved, *config)) {
    bool layout = false;
    for (const std::string& field : LayoutFields()) {
      layout |= absl::StartsWith(mismatch, absl::StrCat("--", field, ":"));
    }
    if (data_path_may_differ && absl::StartsWith(mismatch, "--data:")) continue;
    if (!layout) mismatches.push_back(mismatch);
  }
  if (GlobalBatch(saved, manifest.world_size()) != GlobalBatch(*config, world_size)) {
    mismatches.push_back(absl::StrCat(
        "global batch (world size x --batch_size x --grad_accum): checkpoint ",
        GlobalBatchArithmetic(saved, manifest.world_size()), ", this run ",
        GlobalBatchArithmetic(*config, world_size)));
  }
  if (!mismatches.empty()) {
    return Invalid(absl::StrCat(
        from, " does not fit this run: ", absl::StrJoin(mismatches, "; "),
        " (a resume may change --steps, --save_every, --keep_last, logging, timeouts "
        "and outputs, and the world size, --strategy, --batch_size, --grad_accum, "
        "--grad_sync, --bucket_cap_mb, --tp, --sequence_parallel and the --pp flags when "
        "the global "
        "batch stays the same)"));
  }
  plan.saved_config = saved;
  plan.saved_world_size = manifest.world_size();
  plan.layout_changes = LayoutChanges(saved, manifest.world_size(), *config, world_size);
  // --reduction and --exact_chunk are not layout: they must be the
  // checkpoint's (ConfigMismatches), so this run's mode is both runs'.
  const Exactness exactness =
      ResumeExactness(plan.layout_changes, IsExact(*config));
  plan.resume_exact = exactness.exact;
  plan.inexact_reason = exactness.reason;
  if (!exactness.exact) plan.notes.push_back(absl::StrCat(from, ": not exact: ", exactness.reason));
  if (!kept.empty()) {
    plan.notes.push_back(absl::StrCat(
        from, ": the learning-rate schedule stays the checkpoint's (",
        absl::StrJoin(kept, ", "), "), so the rate of steps already trained does "
        "not change with --steps=", config->steps(), "; give the flag to silence this"));
  }
  if (plan.start_step > config->steps()) {
    return Invalid(absl::StrCat(from, " is at step ", plan.start_step, ", beyond --steps=",
                                config->steps(), ", the run's total (give --steps=",
                                plan.start_step, " to load it and train nothing, or more "
                                "to continue)"));
  }
  const int64_t left = config->steps() - plan.start_step;
  if (left == 0) {
    // An offline reshard: load, and with --save_every save at once in this
    // run's layout, which must not replace the checkpoint being read.
    const std::string target = absl::StrCat(options.dir, "/", StepDirName(plan.start_step));
    if (options.save_every > 0 && SameFile(target, plan.resume_dir)) {
      return Invalid(absl::StrCat(
          from, ": --steps=", config->steps(), " equals its step, so this run trains "
          "nothing and would save ", StepDirName(plan.start_step), " over the checkpoint "
          "it loads; give another --checkpoint_dir for the copy in this run's layout"));
    }
    plan.notes.push_back(absl::StrCat(
        from, ": --steps=", config->steps(), " equals its step: this run trains nothing",
        options.save_every > 0
            ? absl::StrCat(" and saves it at once in this run's layout under ", options.dir)
            : " (give --save_every=1 to save it in this run's layout)"));
  } else if (config->timing_warmup_steps() >= left) {
    if (given("timing_warmup_steps")) {
      return Invalid(absl::StrCat("--timing_warmup_steps=", config->timing_warmup_steps(),
                                  " must be < the ", left, " step(s) this process runs (",
                                  "resuming at step ", plan.start_step, " of ",
                                  config->steps(), ") so that some step is timed"));
    }
    plan.notes.push_back(absl::StrCat(
        "the timing warm-up shrinks from ", config->timing_warmup_steps(), " to ",
        left - 1, " steps: it counts the ", left, " step(s) this process runs"));
    config->set_timing_warmup_steps(static_cast<int32_t>(left - 1));
  }
  if (saved.steps() != config->steps() && left > 0) {
    plan.notes.push_back(absl::StrCat(from, ": the checkpoint's run had --steps=",
                                      saved.steps(), "; this run trains steps ",
                                      plan.start_step + 1, "..", config->steps()));
  }
  RETURN_IF_ERROR(CheckSpace(&plan, *config));
  return plan;
}

absl::Status ValidateCheckpointFaults(const std::vector<Fault>& faults,
                                      const CheckpointPlan& plan,
                                      int64_t steps) {
  for (const Fault& fault : faults) {
    const bool corrupt = fault.kind == FaultKind::kCorrupt;
    if (!corrupt && !absl::StartsWith(fault.phase, "checkpoint")) continue;
    const std::string spec = absl::StrCat("--fault=", FaultToString(fault));
    if (!plan.enabled() || plan.options.save_every <= 0) {
      return Invalid(absl::StrCat(spec, ": the run saves no checkpoint (give "
                                        "--checkpoint_dir and --save_every), so ",
                                  corrupt ? "there is none to corrupt"
                                          : absl::StrCat("phase ", fault.phase, " never comes")));
    }
    if (!plan.SavesAt(fault.step, steps) || fault.step <= plan.start_step) {
      return Invalid(absl::StrCat(spec, ": the run does not save after step ", fault.step,
                                  " (it saves every --save_every=", plan.options.save_every,
                                  " steps and after the last, ", steps,
                                  plan.start_step > 0
                                      ? absl::StrCat(", from step ", plan.start_step + 1)
                                      : "",
                                  ")"));
    }
    if (fault.phase == "checkpoint_before_latest" && fault.rank != 0) {
      return Invalid(absl::StrCat(spec, ": only rank 0 publishes a checkpoint, so only "
                                        "rank 0 has phase checkpoint_before_latest"));
    }
  }
  return absl::OkStatus();
}

}  // namespace mtb::checkpoint
