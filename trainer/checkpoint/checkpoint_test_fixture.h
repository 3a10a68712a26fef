// The checkpoint tests' fixture: a two-rank checkpoint written through the
// real save path (WriteRankFiles, Publish) under the test's own directory,
// and the edits the corruption tests make to it.
#ifndef MTB_TRAINER_CHECKPOINT_CHECKPOINT_TEST_FIXTURE_H_
#define MTB_TRAINER_CHECKPOINT_CHECKPOINT_TEST_FIXTURE_H_

#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/base/sha256.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/checkpoint.h"

namespace mtb::checkpoint {

struct Crash : std::runtime_error {
  Crash() : std::runtime_error("crash") {}
};

inline std::string Bytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4);
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::string(std::getenv("TEST_TMPDIR")) + "/" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_TRUE(CreateDirectories(root_).ok());
  }

  // Two ranks: "model/w" (6 floats) split 4 + 2, "model/b" (3 floats) held
  // by rank 0. Values depend on the step so checkpoints differ.
  absl::Status Save(int64_t step, const std::string& run_id = "run-a",
                    const Hooks& hooks = {}) {
    const std::string staging = root_ + "/" + StagingDirName(step);
    const float s = static_cast<float>(step);
    const std::string w0 = Bytes({s, s + 1, s + 2, s + 3});
    const std::string w1 = Bytes({s + 4, s + 5});
    const std::string b = Bytes({-s, -s, -s});
    std::vector<RankReport> reports;
    for (int rank = 0; rank < 2; ++rank) {
      std::vector<TensorShard> shards;
      if (rank == 0) {
        shards.push_back({"model/w", "float32", {2, 3}, 0, 4, w0});
        shards.push_back({"model/b", "float32", {3}, 0, 3, b});
      } else {
        shards.push_back({"model/w", "float32", {2, 3}, 4, 2, w1});
      }
      RankState state;
      state.set_step(step);
      state.set_data_position(step * 8 + rank);
      state.set_seed(7);
      absl::StatusOr<RankReport> report =
          WriteRankFiles(staging, rank, shards, state, rank == 1 ? hooks : Hooks{});
      if (!report.ok()) return report.status();
      reports.push_back(*report);
    }
    CheckpointManifest manifest;
    manifest.set_run_id(run_id);
    manifest.set_step(step);
    manifest.set_strategy("ddp");
    manifest.set_world_size(2);
    return Publish(root_, manifest, reports, hooks);
  }

  std::string Dir(int64_t step) const { return root_ + "/" + StepDirName(step); }

  // Every file under `dir` by name -> SHA-256.
  std::map<std::string, std::string> Tree(const std::string& dir) const {
    std::map<std::string, std::string> tree;
    for (const char* name : {"rank_00000.bin", "rank_00001.bin", "rank_00000.meta",
                             "rank_00001.meta", "manifest.json", "READY"}) {
      tree[name] = Sha256Hex(*ReadFileToString(dir + "/" + name));
    }
    return tree;
  }

  // Writes `manifest` and the READY that vouches for it, as a deliberate
  // editor who knows the format would: only the deeper checks can catch
  // what it says.
  void Reseal(int64_t step, const CheckpointManifest& manifest) {
    const std::string bytes = ToJson(manifest);
    ASSERT_TRUE(WriteFileAtomically(Dir(step) + "/manifest.json", bytes).ok());
    ASSERT_TRUE(
        WriteFileAtomically(Dir(step) + "/READY", ReadyFileContents(manifest.run_id(), bytes))
            .ok());
  }

  // After editing a file on purpose, make the manifest (and READY) agree
  // with its new size and hash, so that only the deeper check can catch it.
  void Rehash(int64_t step, const std::string& file) {
    CheckpointManifest manifest = *ReadManifest(Dir(step));
    const std::string bytes = *ReadFileToString(Dir(step) + "/" + file);
    for (FileEntry& entry : *manifest.mutable_files()) {
      if (entry.name() == file) {
        entry.set_size(static_cast<int64_t>(bytes.size()));
        entry.set_sha256(Sha256Hex(bytes));
      }
    }
    Reseal(step, manifest);
  }

  void EditByte(const std::string& path, size_t at, char value) {
    std::string bytes = *ReadFileToString(path);
    ASSERT_LT(at, bytes.size());
    bytes[at] = value;
    ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  }

  // The newest checkpoint is broken: verify names `expected`, resume falls
  // back to step 2 and says so.
  void ExpectBrokenAndFallback(const std::string& expected) {
    const absl::Status verified = Verify(Dir(4));
    ASSERT_FALSE(verified.ok());
    EXPECT_NE(verified.message().find(expected), std::string::npos) << verified.message();
    absl::StatusOr<Resolved> resolved = ResolveLatest(root_);
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    EXPECT_EQ(resolved->dir, Dir(2));
    ASSERT_FALSE(resolved->notes.empty());
    EXPECT_NE(resolved->notes[0].find("falling back to step_00000002"), std::string::npos)
        << resolved->notes[0];
  }

  std::string root_;
};

}  // namespace mtb::checkpoint

#endif  // MTB_TRAINER_CHECKPOINT_CHECKPOINT_TEST_FIXTURE_H_
