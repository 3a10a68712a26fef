// Saving and resuming a training run. Vocabulary:
//
//   piece      what a strategy lists (trainer/run/strategy.h): elements
//              [offset, offset + length) of a global tensor, a view of live
//              state. Saved as a TensorShard (bytes of the view, no copy);
//              loaded as a RangeRequest (read straight into the view).
//   exchange   a small all-gather of bytes between ranks: a save makes
//              three — rank 0's staging verdict, every rank's report
//              (SaveExchange), rank 0's publish outcome — so that a failure
//              on any rank ends the save with the same error on every rank
//              instead of a hang. A synchronous save exchanges through the
//              training communicator (AllGatherBytesOverRanks); an async
//              save's background thread through the group's store (each
//              rank sets its key, then polls for the others'), so that it
//              never issues a collective on the group the training thread
//              uses.
//   snapshot   an async save's copy of this rank's pieces, taken at the
//              step boundary into one buffer reused by every save.
//   fault point where --fault= checkpoint phases act: mid-shard on the rank
//              writing (checkpoint_write); checkpoint_before_ready on rank 0
//              between the manifest and READY, on another rank after its
//              files are durable and before it reports (so READY never
//              comes); checkpoint_before_latest on rank 0 between the rename
//              and `latest`.
#include "trainer/checkpoint/checkpointer.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ATen/core/Tensor.h"
#include "ATen/ops/empty.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "common/results/run_context.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/data_identity.h"
#include "trainer/checkpoint/protocol.h"
#include "trainer/config/config.h"
#include "trainer/strategy/scalars.h"

namespace mtb::checkpoint {
namespace {

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

double SecondsSince(absl::Time start) {
  return absl::ToDoubleSeconds(absl::Now() - start);
}

double MsSince(absl::Time start) { return SecondsSince(start) * 1000; }

// The shard of a piece whose bytes are at `bytes`.
TensorShard ShardOf(const StatePiece& piece, const char* bytes) {
  RangeRequest place = PlaceOf(piece);
  return TensorShard{std::move(place.name), std::move(place.dtype),
                     std::move(place.global_shape), place.offset, place.length,
                     absl::string_view(bytes, piece.values.nbytes())};
}

}  // namespace

struct Checkpointer::Shards {
  std::vector<TensorShard> shards;
};

struct Checkpointer::InFlight {
  int64_t step = 0;
  double blocking_ms = 0;
  double wait_ms = 0;
  absl::Time started;
  std::thread thread;
  // Written by the thread before it ends.
  absl::StatusOr<CheckpointSave> result = absl::UnknownError("unfinished");
  double background_ms = 0;
};

Checkpointer::Checkpointer(CheckpointPlan plan, const TrainConfig& config,
                           int rank, int world_size,
                           collective::Communicator* communicator)
    : plan_(std::move(plan)),
      config_(config),
      rank_(rank),
      world_size_(world_size),
      communicator_(communicator),
      run_id_(plan_.run_id) {}

Checkpointer::~Checkpointer() {
  if (in_flight_ != nullptr && in_flight_->thread.joinable()) {
    cancelled_ = true;
    in_flight_->thread.join();
  }
}

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
  return CheckpointInfoOf(plan_, run_id_, load_hashed_bytes_);
}

absl::Status Checkpointer::LoadOnce(Strategy& strategy, const RankState& expected,
                                    bool* content_failure) {
  const std::string& dir = plan_.resume_dir;
  std::vector<RangeRequest> requests;
  for (const StatePiece& piece : strategy.CheckpointPiecesToLoad()) {
    requests.push_back(PlaceOf(piece));
  }
  const absl::Status loaded =
      ReadRankState(plan_, rank_, requests, expected, &load_hashed_bytes_);
  // Every rank fails together, before the collective that follows. A
  // failure travels as its kind ('c': content, 'o': other) and message.
  const bool content = absl::IsDataLoss(loaded) || absl::IsNotFound(loaded);
  ASSIGN_OR_RETURN(std::vector<std::string> errors,
                   AllGatherBytesOverRanks(
                       communicator_,
                       loaded.ok() ? "" : absl::StrCat(content ? "c" : "o", loaded.message()),
                       kWho));
  *content_failure = false;
  for (std::string& error : errors) {
    if (error.empty()) continue;
    *content_failure |= error[0] == 'c';
    error.erase(0, 1);
  }
  return AgreedVerdict(errors, absl::StrCat("resuming from ", dir));
}

absl::Status Checkpointer::Resume(Strategy& strategy, const RankState& expected) {
  CHECK(plan_.resuming());
  bool content_failure = false;
  RETURN_IF_ERROR(LoadOnce(strategy, expected, &content_failure));
  return strategy.FinishCheckpointLoad();
}

CheckpointPlan Checkpointer::PlanFallback(int64_t below,
                                          std::vector<std::string>* skipped) const {
  for (const CheckpointListing& entry : ListCheckpoints(plan_.options.dir)) {
    if (entry.step >= below || !entry.ready) continue;
    if (entry.run_id != run_id_) {
      skipped->push_back(absl::StrCat(entry.name, " (run ", entry.run_id, ", not this run's)"));
      continue;
    }
    CheckpointOptions options = plan_.options;
    options.resume = absl::StrCat(options.dir, "/", entry.name);
    TrainConfig config = config_;
    absl::StatusOr<CheckpointPlan> plan =
        PlanCheckpoints(options, &config, world_size_, [](absl::string_view) { return false; });
    if (!plan.ok()) {
      skipped->push_back(absl::StrCat(entry.name, " (", plan.status().message(), ")"));
      continue;
    }
    if (ToJson(config) != ToJson(config_)) {
      skipped->push_back(absl::StrCat(entry.name, " (resuming it would change this run's "
                                                  "configuration)"));
      continue;
    }
    plan->options = plan_.options;
    return *std::move(plan);
  }
  return CheckpointPlan();
}

absl::Status Checkpointer::Resume(Strategy& strategy,
                                  const std::function<RankState(int64_t step)>& expected_at) {
  CHECK(plan_.resuming());
  const bool may_fall_back = plan_.hash_on_load && plan_.options.resume == "latest";
  std::vector<std::string> notes = plan_.notes;
  std::vector<std::string> failed_before;  // "step_N (why)", each skipped
  while (true) {
    bool content_failure = false;
    const absl::Status loaded = LoadOnce(strategy, expected_at(plan_.start_step), &content_failure);
    if (loaded.ok()) break;
    if (!may_fall_back || !content_failure) return loaded;
    // Every rank saw the same verdict: each plans the same way, and the
    // ranks compare their choices before any loads it.
    const std::string failed = BaseName(plan_.resume_dir);
    std::vector<std::string> skipped;
    CheckpointPlan next = PlanFallback(plan_.start_step, &skipped);
    ASSIGN_OR_RETURN(const std::vector<std::string> choices,
                     AllGatherBytesOverRanks(
                         communicator_,
                         absl::StrCat(next.resume_dir, "\n", next.resume_manifest_sha256), kWho));
    auto dir_of = [](const std::string& choice) {
      const std::string dir = choice.substr(0, choice.find('\n'));
      return dir.empty() ? std::string("none") : dir;
    };
    for (size_t r = 1; r < choices.size(); ++r) {
      if (choices[r] != choices[0]) {
        return absl::FailedPreconditionError(absl::StrCat(
            loaded.message(), "; the ranks disagree on the checkpoint to fall back to: rank 0 ",
            dir_of(choices[0]), ", rank ", r, " ", dir_of(choices[r]),
            " (every rank must see the same --checkpoint_dir)"));
      }
    }
    if (!next.resuming()) {
      return absl::DataLossError(absl::StrCat(
          loaded.message(), "; --resume=latest: no older checkpoint of this run to fall back to",
          failed_before.empty()
              ? ""
              : absl::StrCat(" (failed at load before: ", absl::StrJoin(failed_before, "; "), ")"),
          skipped.empty() ? "" : absl::StrCat(" (skipped: ", absl::StrJoin(skipped, "; "), ")")));
    }
    failed_before.push_back(absl::StrCat(failed, " (", loaded.message(), ")"));
    const std::string note = absl::StrCat(
        "--resume=latest: skipping ", failed, ", which fails at load (", loaded.message(),
        "): falling back to ", BaseName(next.resume_dir),
        ", the newest older checkpoint of this run that verifies",
        skipped.empty() ? "" : absl::StrCat(" (also skipped: ", absl::StrJoin(skipped, "; "), ")"));
    if (rank_ == 0) LOG(WARNING) << note;
    notes.push_back(note);
    // The notes so far, then what planning the fallback said.
    notes.insert(notes.end(), next.notes.begin(), next.notes.end());
    plan_ = std::move(next);
    plan_.notes = notes;
  }
  return strategy.FinishCheckpointLoad();
}

absl::StatusOr<CheckpointSave> Checkpointer::Save(int64_t step,
                                                  const Strategy& strategy,
                                                  const RankState& state,
                                                  trace::TraceRecorder* trace,
                                                  const FaultPoint& fault_point) {
  const absl::Time start = absl::Now();
  // The shards are views of live state: training waits for the whole save.
  Shards shards;
  for (const StatePiece& piece : strategy.CheckpointPiecesToSave()) {
    shards.shards.push_back(ShardOf(piece, static_cast<const char*>(piece.values.data_ptr())));
  }
  const Exchange over_communicator = [this](const std::string&, const std::string& bytes) {
    return AllGatherBytesOverRanks(communicator_, bytes, kWho);
  };
  ASSIGN_OR_RETURN(CheckpointSave save,
                   WriteAndPublish(Target(strategy.name()), step, shards.shards, state,
                                   over_communicator, trace, fault_point, test_hooks_));
  save.set_blocking_ms(MsSince(start));
  return save;
}

SaveTarget Checkpointer::Target(const std::string& strategy_name) const {
  SaveTarget target;
  target.root = plan_.options.dir;
  target.keep_last = plan_.options.keep_last;
  target.run_id = run_id_;
  target.strategy = strategy_name;
  target.rank = rank_;
  target.world_size = world_size_;
  target.config = config_;
  target.data = plan_.data_identity;
  return target;
}

Exchange Checkpointer::ExchangeOverStore(int64_t step) const {
  if (communicator_ == nullptr || world_size_ == 1) return SingleRankExchange();
  // The store is thread-safe (c10d's TCPStore and HashStore lock each
  // operation); the training thread's collectives never touch these keys.
  return [store = communicator_->store(), timeout = communicator_->timeout(), step,
          rank = rank_, world_size = world_size_, cancelled = &cancelled_](
             const std::string& name, const std::string& bytes) mutable
         -> absl::StatusOr<std::vector<std::string>> {
    const std::string prefix = absl::StrCat("checkpoint/", StepDirName(step), "/", name, "/");
    // Values carry a leading byte: c10d's TCPStore answers a get of an empty
    // value only after ~200 ms (measured; the staging verdict and a clean
    // outcome are empty), a non-empty one in well under 1 ms.
    RETURN_IF_ERROR(store.Set(absl::StrCat(prefix, rank), absl::StrCat("v", bytes)));
    std::vector<std::string> all(world_size);
    all[rank] = bytes;
    const absl::Time deadline = absl::Now() + timeout;
    for (int peer = 0; peer < world_size; ++peer) {
      if (peer == rank) continue;
      const std::string key = absl::StrCat(prefix, peer);
      // Polled (Check never waits), so that a cancelled save ends promptly.
      absl::Duration pause = absl::Milliseconds(1);
      while (true) {
        ASSIGN_OR_RETURN(const bool there, store.Check(key));
        if (there) break;
        if (*cancelled) {
          return absl::CancelledError(absl::StrCat("checkpoint of step ", step,
                                                   ": cancelled while rank ", rank,
                                                   " waited for rank ", peer, "'s ", name));
        }
        if (absl::Now() > deadline) {
          return absl::DeadlineExceededError(absl::StrCat(
              "checkpoint of step ", step, " (background): rank ", rank, " waited ",
              absl::FormatDuration(timeout), " (--collective_timeout) for rank ", peer, "'s ",
              name, " on the store ", store.DebugString()));
        }
        absl::SleepFor(pause);
        pause = std::min(pause * 2, absl::Milliseconds(20));
      }
      ASSIGN_OR_RETURN(std::string value, store.Get(key, timeout));
      if (value.empty() || value[0] != 'v') {
        return absl::InternalError(absl::StrCat("checkpoint of step ", step, ": rank ", peer,
                                                "'s ", name, " on the store is malformed"));
      }
      all[peer] = value.substr(1);
    }
    return all;
  };
}

absl::StatusOr<std::vector<CheckpointSave>> Checkpointer::FinishAsync() {
  std::vector<CheckpointSave> finished;
  if (in_flight_ == nullptr) return finished;
  in_flight_->thread.join();
  std::unique_ptr<InFlight> done = std::move(in_flight_);
  RETURN_IF_ERROR(done->result.status());
  CheckpointSave save = *std::move(done->result);
  save.set_async(true);
  save.set_blocking_ms(done->blocking_ms);
  save.set_wait_ms(done->wait_ms);
  save.set_background_ms(done->background_ms);
  finished.push_back(std::move(save));
  return finished;
}

absl::StatusOr<std::vector<CheckpointSave>> Checkpointer::SaveAsync(
    int64_t step, const Strategy& strategy, const RankState& state,
    trace::TraceRecorder* trace, FaultPoint fault_point) {
  // One save in flight: the previous one must end before its snapshot
  // buffer is reused.
  const absl::Time wait_start = absl::Now();
  ASSIGN_OR_RETURN(std::vector<CheckpointSave> finished, FinishAsync());
  const double wait_ms = MsSince(wait_start);

  auto job = std::make_unique<InFlight>();
  job->step = step;
  job->wait_ms = wait_ms;
  auto shards = std::make_shared<Shards>();
  {
    const trace::ScopedSpan span(trace, "checkpoint snapshot", "checkpoint");
    const absl::Time start = absl::Now();
    const std::vector<StatePiece> pieces = strategy.CheckpointPiecesToSave();
    int64_t total = 0;
    for (const StatePiece& piece : pieces) total += piece.values.nbytes();
    if (!snapshot_.defined() || snapshot_.numel() != total) {
      snapshot_ = at::empty({total}, at::kByte);
    }
    char* at = static_cast<char*>(snapshot_.data_ptr());
    for (const StatePiece& piece : pieces) {
      std::memcpy(at, piece.values.data_ptr(), piece.values.nbytes());
      shards->shards.push_back(ShardOf(piece, at));
      at += piece.values.nbytes();
    }
    job->blocking_ms = MsSince(start);
  }
  job->started = absl::Now();
  InFlight* raw = job.get();
  Exchange exchange = ExchangeOverStore(step);
  raw->thread = std::thread([this, raw, shards, state, exchange = std::move(exchange),
                             fault_point = std::move(fault_point),
                             strategy_name = strategy.name()] {
    raw->result = WriteAndPublish(Target(strategy_name), raw->step, shards->shards, state,
                                  exchange, /*trace=*/nullptr, fault_point, test_hooks_);
    // Every rank posted its report of this save after it had read the
    // outcome of the previous one: once this save succeeded, rank 0 may
    // delete that one's keys (the store keeps at most two saves' keys).
    if (raw->result.ok() && rank_ == 0 && communicator_ != nullptr &&
        keys_to_delete_step_ >= 0) {
      collective::Store store = communicator_->store();
      for (const char* name : kSaveExchanges) {
        for (int r = 0; r < world_size_; ++r) {
          (void)store.Delete(absl::StrCat("checkpoint/", StepDirName(keys_to_delete_step_),
                                          "/", name, "/", r));
        }
      }
    }
    keys_to_delete_step_ = raw->step;
    raw->background_ms = MsSince(raw->started);
  });
  in_flight_ = std::move(job);
  return finished;
}

}  // namespace mtb::checkpoint
