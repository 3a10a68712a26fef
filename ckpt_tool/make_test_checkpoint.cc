// Test aid: publishes a checkpoint of step STEP under ROOT with the
// checkpoint library: "model/w" 2x3 float32 and "model/b" 3 float32, on 2
// ranks (w split 4 + 2, b on rank 0) or on 1 rank (the same global tensors
// in one shard). FLIP: an element index of w whose value is changed (+0.5),
// for compare's negative case.
//   make_test_checkpoint ROOT STEP [RUN_ID [RANKS [FLIP]]]
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 6) return 2;
  using namespace mtb::checkpoint;
  const std::string root = argv[1];
  const int64_t step = std::atoll(argv[2]);
  const std::string run_id = argc > 3 ? argv[3] : "test-run";
  const int ranks = argc > 4 ? std::atoi(argv[4]) : 2;
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  const std::vector<float> b = {7, 8, 9};
  if (argc > 5) w.at(std::atoi(argv[5])) += 0.5f;
  auto bytes = [](const float* p, size_t n) {
    return absl::string_view(reinterpret_cast<const char*>(p), n * 4);
  };
  std::vector<RankReport> reports;
  for (int rank = 0; rank < ranks; ++rank) {
    std::vector<TensorShard> shards;
    if (ranks == 1) {
      shards.push_back({"model/w", "float32", {2, 3}, 0, 6, bytes(w.data(), 6)});
      shards.push_back({"model/b", "float32", {3}, 0, 3, bytes(b.data(), 3)});
    } else if (rank == 0) {
      shards.push_back({"model/w", "float32", {2, 3}, 0, 4, bytes(w.data(), 4)});
      shards.push_back({"model/b", "float32", {3}, 0, 3, bytes(b.data(), 3)});
    } else {
      shards.push_back({"model/w", "float32", {2, 3}, 4, 2, bytes(w.data() + 4, 2)});
    }
    RankState state;
    state.set_rank(rank);
    state.set_step(step);
    state.set_data_position(step * 4);
    absl::StatusOr<RankReport> report =
        WriteRankFiles(root + "/" + StagingDirName(step), rank, shards, state);
    if (!report.ok()) {
      std::cerr << report.status() << "\n";
      return 1;
    }
    reports.push_back(*report);
  }
  CheckpointManifest manifest;
  manifest.set_run_id(run_id);
  manifest.set_step(step);
  manifest.set_strategy("ddp");
  manifest.set_world_size(ranks);
  const absl::Status published = Publish(root, manifest, reports);
  if (!published.ok()) {
    std::cerr << published << "\n";
    return 1;
  }
  return 0;
}
