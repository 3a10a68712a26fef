// Saving and resuming a training run. Vocabulary:
//
//   piece      what a strategy lists (trainer/strategy.h): elements
//              [offset, offset + length) of a global tensor, a view of live
//              state. Saved as a TensorShard (bytes of the view, no copy);
//              loaded as a RangeRequest (read straight into the view).
//   exchange   a small all-gather of bytes between ranks
//              (AllGatherBytesOverRanks): a save makes three — rank 0's
//              staging verdict, every rank's report (SaveExchange), rank 0's
//              publish outcome — so that a failure on any rank ends the save
//              with the same error on every rank instead of a hang.
//   fault point where --fault= checkpoint phases act: mid-shard on the rank
//              writing (checkpoint_write); checkpoint_before_ready on rank 0
//              between the manifest and READY, on another rank after its
//              files are durable and before it reports (so READY never
//              comes); checkpoint_before_latest on rank 0 between the rename
//              and `latest`.
#include "trainer/checkpoint/checkpointer.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/base/status.h"
#include "common/results/json_io.h"
#include "common/results/run_context.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config.h"
#include "trainer/strategy/scalars.h"

namespace mtb::checkpoint {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "shard files hold little-endian bytes: this host writes its own");

constexpr char kWho[] = "checkpoint";

std::string DtypeName(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kFloat:
      return "float32";
    case at::kLong:
      return "int64";
    case at::kInt:
      return "int32";
    case at::kBFloat16:
      return "bfloat16";
    default:
      LOG(FATAL) << "checkpoint pieces are float32, int64, int32 or bfloat16, not "
                 << tensor.scalar_type();
  }
  return "";
}

// A piece's place in its global tensor and where its bytes are in memory:
// what a load reads into, and (as a TensorShard) what a save writes.
RangeRequest PlaceOf(const StatePiece& piece) {
  CHECK(piece.values.is_contiguous() && piece.values.device().is_cpu()) << piece.name;
  RangeRequest place;
  place.name = piece.name;
  place.dtype = DtypeName(piece.values);
  place.global_shape = piece.global_shape;
  place.offset = piece.offset;
  place.length = piece.values.numel();
  place.destination = static_cast<char*>(piece.values.data_ptr());
  return place;
}

// Every rank's error ("" for none) -> one status naming the ranks.
absl::Status AgreedVerdict(const std::vector<std::string>& errors,
                           const std::string& what) {
  std::vector<std::string> failed;
  for (size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r].empty()) failed.push_back(absl::StrCat("rank ", r, ": ", errors[r]));
  }
  if (failed.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", absl::StrJoin(failed, "; ")));
}

double SecondsSince(absl::Time start) {
  return absl::ToDoubleSeconds(absl::Now() - start);
}

}  // namespace

Checkpointer::Checkpointer(CheckpointPlan plan, const TrainConfig& config,
                           int rank, int world_size,
                           collective::Communicator* communicator)
    : plan_(std::move(plan)),
      config_(config),
      rank_(rank),
      world_size_(world_size),
      communicator_(communicator),
      run_id_(plan_.run_id) {}

absl::Status Checkpointer::Start() {
  if (rank_ == 0 && run_id_.empty()) run_id_ = NewRunId();
  ASSIGN_OR_RETURN(const std::vector<std::string> all,
                   AllGatherBytesOverRanks(
                       communicator_, absl::StrCat(run_id_, "\n", plan_.resume_dir), kWho));
  const std::vector<std::string> zero = absl::StrSplit(all[0], absl::MaxSplits('\n', 1));
  run_id_ = zero[0];
  for (size_t r = 1; r < all.size(); ++r) {
    const std::vector<std::string> other = absl::StrSplit(all[r], absl::MaxSplits('\n', 1));
    if (other[1] != zero[1]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank 0 resumes from '", zero[1], "' but rank ", r, " from '", other[1],
          "': every rank must see the same --checkpoint_dir"));
    }
  }
  return absl::OkStatus();
}

CheckpointInfo Checkpointer::Info() const {
  CheckpointInfo info;
  info.set_dir(plan_.options.dir);
  info.set_save_every(plan_.options.save_every);
  info.set_keep_last(plan_.options.keep_last);
  info.set_run_id(run_id_);
  info.set_resumed_from(plan_.resume_dir);
  info.set_resumed_step(plan_.start_step);
  for (const std::string& note : plan_.notes) info.add_notes(note);
  return info;
}

absl::Status Checkpointer::Resume(Strategy& strategy, const RankState& expected) {
  CHECK(plan_.resuming());
  const std::string& dir = plan_.resume_dir;
  RankState recorded;
  const absl::Status loaded = [&]() -> absl::Status {
    const std::vector<StatePiece> pieces = strategy.CheckpointPiecesToLoad();
    std::vector<RangeRequest> requests;
    requests.reserve(pieces.size());
    for (const StatePiece& piece : pieces) requests.push_back(PlaceOf(piece));
    RETURN_IF_ERROR(ReadTensorRanges(dir, plan_.resume_manifest, requests));
    RETURN_IF_ERROR(
        ReadJsonFile(absl::StrFormat("%s/rank_%05d.meta", dir, rank_), &recorded));
    return CheckRankState(recorded, expected);
  }();
  // Every rank fails together, before the collective that follows.
  ASSIGN_OR_RETURN(const std::vector<std::string> errors,
                   AllGatherBytesOverRanks(communicator_,
                                           std::string(loaded.message()), kWho));
  RETURN_IF_ERROR(AgreedVerdict(errors, absl::StrCat("resuming from ", dir)));
  return strategy.FinishCheckpointLoad();
}

absl::StatusOr<CheckpointSave> Checkpointer::Save(int64_t step,
                                                  const Strategy& strategy,
                                                  const RankState& state,
                                                  trace::TraceRecorder* trace,
                                                  const FaultPoint& fault_point) {
  const std::string& root = plan_.options.dir;
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
    if (rank_ == 0) prepared = PrepareStaging(root, step).status();
    ASSIGN_OR_RETURN(const std::vector<std::string> verdicts,
                     AllGatherBytesOverRanks(communicator_,
                                             std::string(prepared.message()), kWho));
    RETURN_IF_ERROR(AgreedVerdict({verdicts[0]}, what));

    const absl::Time write_start = absl::Now();
    const std::vector<StatePiece> pieces = strategy.CheckpointPiecesToSave();
    std::vector<TensorShard> shards;
    shards.reserve(pieces.size());
    for (const StatePiece& piece : pieces) {
      RangeRequest place = PlaceOf(piece);
      shards.push_back({std::move(place.name), std::move(place.dtype),
                        std::move(place.global_shape), place.offset, place.length,
                        absl::string_view(place.destination, piece.values.nbytes())});
    }
    Hooks hooks;
    hooks.mid_shard_write = [&] { fault_point("checkpoint_write"); };
    absl::StatusOr<RankReport> report = WriteRankFiles(staging, rank_, shards, state, hooks);
    if (report.ok()) {
      *mine.mutable_report() = *std::move(report);
      mine.set_write_seconds(SecondsSince(write_start));
    } else {
      mine.set_error(std::string(report.status().message()));
    }
    if (rank_ != 0) fault_point("checkpoint_before_ready");
  }

  const trace::ScopedSpan span(trace, "checkpoint publish", "checkpoint");
  const absl::Time publish_start = absl::Now();
  ASSIGN_OR_RETURN(const std::vector<std::string> exchanged,
                   AllGatherBytesOverRanks(communicator_, mine.SerializeAsString(), kWho));
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
  RETURN_IF_ERROR(AgreedVerdict(errors, what));
  save.set_write_seconds(write_seconds);
  save.set_bytes(bytes);

  PublishOutcome outcome;
  if (rank_ == 0) {
    CheckpointManifest manifest;
    manifest.set_run_id(run_id_);
    manifest.set_step(step);
    manifest.set_strategy(strategy.name());
    manifest.set_world_size(world_size_);
    manifest.set_config_json(ToJson(config_));
    manifest.set_config_fingerprint(ConfigFingerprint(config_));
    Hooks hooks;
    hooks.before_ready = [&] { fault_point("checkpoint_before_ready"); };
    hooks.before_latest = [&] { fault_point("checkpoint_before_latest"); };
    absl::Status published = Publish(root, manifest, reports, hooks);
    if (published.ok()) {
      absl::StatusOr<std::vector<std::string>> pruned =
          Prune(root, run_id_, static_cast<int>(plan_.options.keep_last));
      if (pruned.ok()) {
        for (const std::string& name : *pruned) outcome.add_pruned(name);
      } else {
        published = Annotate(pruned.status(), "pruning");
      }
    }
    outcome.set_error(std::string(published.message()));
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> outcomes,
                   AllGatherBytesOverRanks(communicator_, outcome.SerializeAsString(), kWho));
  if (!outcome.ParseFromString(outcomes[0])) {
    return absl::InternalError(absl::StrCat(what, ": rank 0's outcome is unreadable"));
  }
  RETURN_IF_ERROR(AgreedVerdict({outcome.error()}, what));
  for (const std::string& name : outcome.pruned()) save.add_pruned(name);
  save.set_publish_seconds(SecondsSince(publish_start));
  return save;
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

}  // namespace mtb::checkpoint
