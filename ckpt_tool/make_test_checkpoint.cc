// Test aid: publishes a 2-rank checkpoint of step argv[2] under root argv[1]
// with the checkpoint library ("model/w" 2x3 float32 split 4 + 2, "model/b"
// on rank 0).
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  using namespace mtb::checkpoint;
  const std::string root = argv[1];
  const int64_t step = std::atoll(argv[2]);
  const std::vector<float> w = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9};
  auto bytes = [](const float* p, size_t n) {
    return absl::string_view(reinterpret_cast<const char*>(p), n * 4);
  };
  std::vector<RankReport> reports;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<TensorShard> shards;
    if (rank == 0) {
      shards.push_back({"model/w", "float32", {2, 3}, 0, 4, bytes(w.data(), 4)});
      shards.push_back({"model/b", "float32", {3}, 0, 3, bytes(b.data(), 3)});
    } else {
      shards.push_back({"model/w", "float32", {2, 3}, 4, 2, bytes(w.data() + 4, 2)});
    }
    RankState state;
    state.set_step(step);
    absl::StatusOr<RankReport> report =
        WriteRankFiles(root + "/" + StagingDirName(step), rank, shards, state);
    if (!report.ok()) {
      std::cerr << report.status() << "\n";
      return 1;
    }
    reports.push_back(*report);
  }
  CheckpointManifest manifest;
  manifest.set_run_id("test-run");
  manifest.set_step(step);
  manifest.set_strategy("ddp");
  manifest.set_world_size(2);
  const absl::Status published = Publish(root, manifest, reports);
  if (!published.ok()) {
    std::cerr << published << "\n";
    return 1;
  }
  return 0;
}
