#include "trainer/checkpoint/protocol.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status.h"
#include "common/results/json_io.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "trainer/checkpoint/data_identity.h"
#include "trainer/config/config.h"
#include "trainer/model/lr_schedule.h"

namespace mtb::checkpoint {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "shard files hold little-endian bytes: this host writes its own");

double SecondsSince(absl::Time start) {
  return absl::ToDoubleSeconds(absl::Now() - start);
}

}  // namespace

Exchange SingleRankExchange() {
  return [](const std::string&, const std::string& bytes) {
    return absl::StatusOr<std::vector<std::string>>(std::vector<std::string>{bytes});
  };
}

absl::Status AgreedVerdict(const std::vector<std::string>& errors,
                           const std::string& what) {
  std::vector<std::string> failed;
  for (size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r].empty()) failed.push_back(absl::StrCat("rank ", r, ": ", errors[r]));
  }
  if (failed.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", absl::StrJoin(failed, "; ")));
}

absl::StatusOr<CheckpointSave> WriteAndPublish(const SaveTarget& target, int64_t step,
                                               const std::vector<TensorShard>& shards,
                                               const RankState& state,
                                               const Exchange& exchange,
                                               trace::TraceRecorder* trace,
                                               const FaultPoint& fault_point,
                                               const PublishHooks& test_hooks) {
  const std::string& root = target.root;
  const int rank = target.rank;
  const std::string what = absl::StrCat("checkpoint of step ", step);
  CheckpointSave save;
  save.set_step(static_cast<int32_t>(step));
  save.set_name(StepDirName(step));

  SaveExchange mine;
  {
    const trace::ScopedSpan span(trace, "checkpoint write", "checkpoint");
    // Nothing a crashed save of this step left may end up in this one.
    std::string staging = absl::StrCat(root, "/", StagingDirName(step));
    absl::Status prepared = absl::OkStatus();
    if (rank == 0) prepared = PrepareStaging(root, step).status();
    ASSIGN_OR_RETURN(const std::vector<std::string> verdicts,
                     exchange(kSaveExchanges[0], std::string(prepared.message())));
    RETURN_IF_ERROR(AgreedVerdict({verdicts[0]}, what));
    if (test_hooks.hold_before_write) test_hooks.hold_before_write(step);

    const absl::Time write_start = absl::Now();
    Hooks hooks;
    hooks.mid_shard_write = [&] { fault_point("checkpoint_write"); };
    absl::StatusOr<RankReport> report = WriteRankFiles(staging, rank, shards, state, hooks);
    if (report.ok()) {
      *mine.mutable_report() = *std::move(report);
      mine.set_write_seconds(SecondsSince(write_start));
    } else {
      mine.set_error(std::string(report.status().message()));
    }
    if (rank != 0) fault_point("checkpoint_before_ready");
  }

  const trace::ScopedSpan span(trace, "checkpoint publish", "checkpoint");
  const absl::Time publish_start = absl::Now();
  ASSIGN_OR_RETURN(const std::vector<std::string> exchanged,
                   exchange(kSaveExchanges[1], mine.SerializeAsString()));
  std::vector<RankReport> reports;
  std::vector<std::string> errors;
  double write_seconds = 0;
  int64_t bytes = 0;
  for (const std::string& payload : exchanged) {
    SaveExchange other;
    if (!other.ParseFromString(payload)) {
      errors.push_back("an unreadable report");
      continue;
    }
    errors.push_back(other.error());
    write_seconds = std::max(write_seconds, other.write_seconds());
    for (const FileEntry& file : other.report().files()) bytes += file.size();
    reports.push_back(other.report());
  }
  if (absl::Status agreed = AgreedVerdict(errors, what); !agreed.ok()) {
    // Every rank has reported: nobody writes into staging any more.
    if (rank == 0) (void)DiscardStaging(root, step);
    return agreed;
  }
  save.set_write_seconds(write_seconds);
  save.set_bytes(bytes);

  PublishOutcome outcome;
  if (rank == 0) {
    CheckpointManifest manifest;
    manifest.set_run_id(target.run_id);
    manifest.set_step(step);
    manifest.set_strategy(target.strategy);
    manifest.set_world_size(target.world_size);
    manifest.set_config_json(ToJson(target.config));
    manifest.set_config_fingerprint(ConfigFingerprint(target.config));
    *manifest.mutable_data() = target.data;
    Hooks hooks;
    hooks.before_ready = [&] { fault_point("checkpoint_before_ready"); };
    hooks.before_latest = [&] { fault_point("checkpoint_before_latest"); };
    absl::Status published = Publish(root, manifest, reports, hooks);
    // A publish that failed before its rename leaves staging: remove it
    // (after the rename there is none).
    if (!published.ok()) (void)DiscardStaging(root, step);
    if (published.ok()) {
      if (test_hooks.after_publish) test_hooks.after_publish(step);
      absl::StatusOr<std::vector<std::string>> pruned =
          Prune(root, target.run_id, static_cast<int>(target.keep_last));
      if (pruned.ok()) {
        for (const std::string& name : *pruned) outcome.add_pruned(name);
      } else {
        published = Annotate(pruned.status(), "pruning");
      }
    }
    outcome.set_error(std::string(published.message()));
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> outcomes,
                   exchange(kSaveExchanges[2], outcome.SerializeAsString()));
  if (!outcome.ParseFromString(outcomes[0])) {
    return absl::InternalError(absl::StrCat(what, ": rank 0's outcome is unreadable"));
  }
  RETURN_IF_ERROR(AgreedVerdict({outcome.error()}, what));
  for (const std::string& name : outcome.pruned()) save.add_pruned(name);
  save.set_publish_seconds(SecondsSince(publish_start));
  return save;
}

absl::Status ReadRankState(const CheckpointPlan& plan, int rank,
                           const std::vector<RangeRequest>& requests,
                           const RankState& expected, int64_t* hashed_bytes) {
  const std::string& dir = plan.resume_dir;
  // The state file this rank checks its position against: its own, or
  // rank 0's on another layout.
  const std::string meta = absl::StrFormat("rank_%05d.meta", plan.resharding() ? 0 : rank);
  if (plan.hash_on_load) {
    // Verified for structure only: what this rank reads is hashed first.
    ASSIGN_OR_RETURN(*hashed_bytes,
                     HashCheckpointReads(dir, plan.resume_manifest, requests, {meta}));
  }
  RETURN_IF_ERROR(ReadTensorRanges(dir, plan.resume_manifest, requests));
  RankState recorded;
  RETURN_IF_ERROR(ReadJsonFile(absl::StrCat(dir, "/", meta), &recorded));
  if (!plan.resharding()) return CheckRankState(recorded, expected);
  // Another layout: this rank may have had no counterpart. The position is
  // global (data and dropout keys count global samples and steps), so rank
  // 0's record must be where this run is at that step: the same step, global
  // tokens, data position (the next global sample), seed, next keys and
  // rate. Only the micro-step count is the checkpoint's layout's.
  RankState global = expected;
  global.set_rank(0);
  global.set_micro_step(plan.start_step * plan.saved_config.grad_accum());
  return CheckRankState(recorded, global);
}

absl::Status CheckRankState(const RankState& recorded, const RankState& expected) {
  std::vector<std::string> differences;
  const google::protobuf::Descriptor* descriptor = RankState::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    if (field->is_map()) continue;  // strategy extras: the strategy's to check
    std::string saved, now;
    google::protobuf::TextFormat::PrintFieldValueToString(recorded, field, -1, &saved);
    google::protobuf::TextFormat::PrintFieldValueToString(expected, field, -1, &now);
    if (saved != now) {
      differences.push_back(absl::StrCat(field->name(), " ", saved, " (this run: ", now, ")"));
    }
  }
  if (differences.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "rank ", recorded.rank(), "'s checkpoint state is not where this run would be at step ",
      recorded.step(), ": ", absl::StrJoin(differences, ", ")));
}

CheckpointInfo CheckpointInfoOf(const CheckpointPlan& plan, const std::string& run_id,
                                int64_t load_hashed_bytes) {
  CheckpointInfo info;
  info.set_dir(plan.options.dir);
  info.set_save_every(plan.options.save_every);
  info.set_keep_last(plan.options.keep_last);
  info.set_run_id(run_id);
  info.set_resumed_from(plan.resume_dir);
  info.set_resumed_step(plan.start_step);
  for (const std::string& note : plan.notes) info.add_notes(note);
  if (plan.resuming()) {
    info.set_resume_exact(plan.resume_exact);
    info.set_resume_inexact_reason(plan.inexact_reason);
    for (const std::string& change : plan.layout_changes) info.add_layout_changes(change);
  }
  info.set_async_save(plan.options.async_save);
  if (!plan.data_identity.kind().empty()) info.set_data(DescribeData(plan.data_identity));
  for (const std::string& change : plan.data_changes) info.add_data_changes(change);
  info.set_load_hashed_bytes(load_hashed_bytes);
  return info;
}

RankState ProgressStateOf(const TrainConfig& config, int rank, int data_ranks,
                          int64_t step) {
  const int64_t samples_per_step =
      static_cast<int64_t>(data_ranks) * config.grad_accum() * config.batch_size();
  RankState state;
  state.set_rank(rank);
  state.set_step(step);
  state.set_micro_step(step * config.grad_accum());
  state.set_tokens_seen(step * samples_per_step * config.seq_len());
  state.set_data_position(step * samples_per_step);
  state.set_seed(config.seed());
  state.set_rng_step(step + 1);
  state.set_last_lr(step > 0 ? LearningRateAt(LrScheduleOf(config), step) : 0.0);
  return state;
}

}  // namespace mtb::checkpoint
