// The Strategy checkpoint contract (trainer/run/strategy.h, "Checkpoint state")
// for every strategy, on rank threads: over all ranks the saved pieces cover
// every element of every global tensor exactly once, with the parameter's
// global shape, and hold the live values; the load pieces are what each rank
// must hold (the whole model for ddp and zero, its own optimizer shard for
// zero; fsdp its shards and nothing else). Sizes the world size does not
// divide (d_model 20, vocab 37), and several buckets so that a zero shard
// spans parameters.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/collective/test_util.h"
#include "gtest/gtest.h"
#include "trainer/model/model.h"
#include "trainer/model/state_pieces.h"
#include "trainer/run/strategy.h"
#include "trainer/strategy/ddp.h"
#include "trainer/strategy/fsdp.h"
#include "trainer/strategy/zero.h"

namespace mtb {
namespace {

struct Listed {
  int rank = 0;
  std::string name;
  std::vector<int64_t> global_shape;
  int64_t offset = 0;
  int64_t length = 0;
  bool values_match = false;  // model pieces: equal to the parameter's slice
};

ModelShape UnevenShape() {
  ModelShape shape;
  shape.vocab_size = 37;
  shape.d_model = 20;
  shape.n_layers = 2;
  shape.n_heads = 4;
  shape.seq_len = 8;
  return shape;
}

std::unique_ptr<Strategy> Make(const std::string& name,
                               collective::Communicator* communicator) {
  if (name == "single") return std::make_unique<SingleStrategy>();
  if (name == "ddp") return std::make_unique<DdpStrategy>(communicator, DdpOptions{});
  if (name == "fsdp") return std::make_unique<FsdpStrategy>(communicator, FsdpOptions{});
  ZeroOptions options;
  options.stage = name == "zero1" ? 1 : 2;
  options.first_bucket_cap_bytes = 4 << 10;
  options.bucket_cap_bytes = 6 << 10;
  return std::make_unique<ZeroStrategy>(communicator, options);
}

std::vector<Listed> List(const std::vector<StatePiece>& pieces, int rank,
                         const GptModel& model) {
  std::map<std::string, at::Tensor> parameters;
  for (const NamedParameter& p : model.parameters()) parameters["model/" + p.name] = p.tensor;
  std::vector<Listed> listed;
  for (const StatePiece& piece : pieces) {
    Listed entry;
    entry.rank = rank;
    entry.name = piece.name;
    entry.global_shape = piece.global_shape;
    entry.offset = piece.offset;
    entry.length = piece.values.numel();
    EXPECT_TRUE(piece.values.is_contiguous() && piece.values.dim() == 1) << piece.name;
    if (auto found = parameters.find(piece.name); found != parameters.end()) {
      entry.values_match = at::equal(
          piece.values, found->second.detach().reshape({-1}).narrow(0, piece.offset, entry.length));
    }
    listed.push_back(entry);
  }
  return listed;
}

// Every tensor the contract names, with its element count.
std::map<std::string, int64_t> ExpectedTensors(const GptModel& model) {
  std::map<std::string, int64_t> tensors = {{"optimizer/step", 1}};
  for (const NamedParameter& p : model.parameters()) {
    for (const char* prefix : {"model/", "optimizer/exp_avg/", "optimizer/exp_avg_sq/"}) {
      tensors[prefix + p.name] = p.tensor.numel();
    }
  }
  return tensors;
}

// Pieces of every rank, saved and loaded, after Setup.
void Collect(const std::string& strategy, int world_size, std::vector<Listed>* saved,
             std::vector<Listed>* loaded, std::map<std::string, int64_t>* tensors) {
  at::set_num_threads(1);
  std::mutex mutex;
  auto body = [&](collective::Communicator* communicator, int rank) {
    GptModel model(UnevenShape(), 11);
    std::unique_ptr<Strategy> s = Make(strategy, communicator);
    ASSERT_TRUE(s->Setup(model.store(), AdamWOptions{}).ok());
    // fsdp keeps only shards: gathered, the parameters can be compared.
    ASSERT_TRUE(s->GatherFullParameters().ok());
    const std::vector<Listed> save = List(s->CheckpointPiecesToSave(), rank, model);
    const std::vector<Listed> load = List(s->CheckpointPiecesToLoad(), rank, model);
    EXPECT_TRUE(s->FinishCheckpointLoad().ok());
    const std::lock_guard<std::mutex> lock(mutex);
    saved->insert(saved->end(), save.begin(), save.end());
    loaded->insert(loaded->end(), load.begin(), load.end());
    *tensors = ExpectedTensors(model);
  };
  if (world_size == 1) {
    body(nullptr, 0);
  } else {
    ASSERT_TRUE(collective::RunRanksAsThreads(world_size, [&](collective::Communicator& c) {
                  body(&c, c.rank());
                }).ok());
  }
}

// Over all ranks, each tensor's pieces tile [0, numel) exactly once.
void ExpectEveryElementOnce(const std::vector<Listed>& pieces,
                            const std::map<std::string, int64_t>& tensors,
                            const std::string& what) {
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> ranges;
  for (const Listed& piece : pieces) {
    ASSERT_TRUE(tensors.count(piece.name)) << what << ": unexpected " << piece.name;
    ranges[piece.name].push_back({piece.offset, piece.length});
    if (absl::StartsWith(piece.name, "model/")) {
      EXPECT_TRUE(piece.values_match) << what << ": " << piece.name << " values";
    }
  }
  for (const auto& [name, numel] : tensors) {
    std::vector<std::pair<int64_t, int64_t>>& list = ranges[name];
    std::sort(list.begin(), list.end());
    int64_t covered = 0;
    for (const auto& [offset, length] : list) {
      EXPECT_EQ(offset, covered) << what << ": " << name << " has a gap or an overlap";
      covered = offset + length;
    }
    EXPECT_EQ(covered, numel) << what << ": " << name;
  }
}

TEST(StatePieces, SavedPiecesCoverEveryElementOfEveryGlobalTensorExactlyOnce) {
  const std::vector<std::pair<std::string, int>> cases = {
      {"single", 1}, {"ddp", 1}, {"ddp", 2}, {"ddp", 3},
      {"zero1", 2},  {"zero1", 3}, {"zero2", 2}, {"zero2", 3}};
  for (const auto& [strategy, world_size] : cases) {
    const std::string what = absl::StrCat(strategy, " at ", world_size);
    std::vector<Listed> saved, loaded;
    std::map<std::string, int64_t> tensors;
    Collect(strategy, world_size, &saved, &loaded, &tensors);
    ExpectEveryElementOnce(saved, tensors, what);
    // Every rank writes: replicated state is split, not written n times.
    std::set<int> writers;
    for (const Listed& piece : saved) writers.insert(piece.rank);
    EXPECT_EQ(static_cast<int>(writers.size()), world_size) << what;
    // Global shapes are the parameters' own.
    for (const Listed& piece : saved) {
      int64_t numel = 1;
      for (int64_t d : piece.global_shape) numel *= d;
      EXPECT_EQ(numel, tensors.at(piece.name)) << what << ": " << piece.name;
    }
    // Loads: each rank the whole model (and ddp the whole optimizer state);
    // zero's optimizer shard is what the rank saved.
    for (int rank = 0; rank < world_size; ++rank) {
      std::vector<Listed> model_pieces, rank_saved_state, rank_loaded_state;
      for (const Listed& piece : loaded) {
        if (piece.rank != rank) continue;
        if (absl::StartsWith(piece.name, "model/") || piece.name == "optimizer/step" ||
            strategy == "ddp") {
          model_pieces.push_back(piece);
        } else {
          rank_loaded_state.push_back(piece);
        }
      }
      std::map<std::string, int64_t> whole;
      for (const auto& [name, numel] : tensors) {
        if (absl::StartsWith(name, "model/") || name == "optimizer/step" || strategy == "ddp") {
          whole[name] = numel;
        }
      }
      ExpectEveryElementOnce(model_pieces, whole, absl::StrCat(what, " rank ", rank, " load"));
      for (const Listed& piece : saved) {
        if (strategy != "ddp" && piece.rank == rank &&
            absl::StartsWith(piece.name, "optimizer/exp_avg")) {
          rank_saved_state.push_back(piece);
        }
      }
      ASSERT_EQ(rank_loaded_state.size(), rank_saved_state.size()) << what;
      for (size_t i = 0; i < rank_saved_state.size(); ++i) {
        EXPECT_EQ(rank_loaded_state[i].name, rank_saved_state[i].name) << what;
        EXPECT_EQ(rank_loaded_state[i].offset, rank_saved_state[i].offset) << what;
        EXPECT_EQ(rank_loaded_state[i].length, rank_saved_state[i].length) << what;
      }
    }
  }
}

// fsdp (trainer/strategy/fsdp.h): each rank saves its shard of every unit
// (parameters and AdamW state, split per parameter, the live values), which
// over all ranks covers every tensor exactly once, and loads exactly the same
// pieces (plus the step): it holds nothing else.
TEST(StatePieces, FsdpSavesAndLoadsExactlyItsShardOfEveryUnit) {
  for (int world_size : {1, 2, 3}) {
    const std::string what = absl::StrCat("fsdp at ", world_size);
    std::vector<Listed> saved, loaded;
    std::map<std::string, int64_t> tensors;
    Collect("fsdp", world_size, &saved, &loaded, &tensors);
    ExpectEveryElementOnce(saved, tensors, what);
    for (int rank = 0; rank < world_size; ++rank) {
      std::vector<Listed> rank_saved, rank_loaded;
      for (const Listed& piece : saved) {
        if (piece.rank == rank && piece.name != "optimizer/step") {
          rank_saved.push_back(piece);
        }
      }
      for (const Listed& piece : loaded) {
        if (piece.rank == rank && piece.name != "optimizer/step") {
          rank_loaded.push_back(piece);
        }
      }
      ASSERT_EQ(rank_loaded.size(), rank_saved.size()) << what;
      for (size_t i = 0; i < rank_saved.size(); ++i) {
        EXPECT_EQ(rank_loaded[i].name, rank_saved[i].name) << what;
        EXPECT_EQ(rank_loaded[i].offset, rank_saved[i].offset) << what;
        EXPECT_EQ(rank_loaded[i].length, rank_saved[i].length) << what;
      }
    }
  }
}

TEST(StatePieces, AZeroShardSpanningParametersSplitsIntoOnePiecePerParameter) {
  // Flat elements 10..(wte's end + 5): the end of wte, then the start of the
  // next parameter in layout order.
  GptModel model(UnevenShape(), 11);
  const ParameterStore& store = model.store();
  const int wte = store.layout()[0];
  const int next = store.layout()[1];
  const int64_t wte_numel = store.parameters()[wte].tensor.numel();
  const std::vector<StatePiece> pieces = ModelPieces(store, {{10, wte_numel - 10 + 5}});
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].name, "model/" + store.parameters()[wte].name);
  EXPECT_EQ(pieces[0].offset, 10);
  EXPECT_EQ(pieces[0].values.numel(), wte_numel - 10);
  EXPECT_EQ(pieces[1].name, "model/" + store.parameters()[next].name);
  EXPECT_EQ(pieces[1].offset, 0);
  EXPECT_EQ(pieces[1].values.numel(), 5);
  EXPECT_EQ(EvenSlice(10, 3, 0).numel, 4);
  EXPECT_EQ(EvenSlice(10, 3, 2).offset, 7);
}

}  // namespace
}  // namespace mtb
