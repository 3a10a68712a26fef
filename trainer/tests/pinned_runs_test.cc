// Pinned runs: the loss bits of every step and the final parameter digest of
// a seeded tiny model trained through RunTraining on 1, 2 and 3 rank threads
// over Gloo, under ddp, zero1, zero2 and fsdp, in float and in exact mode,
// against trainer/testdata/pinned_runs.txt. Any change to the loop, a
// strategy, the model, data or optimizer that moves a bit shows up here; a
// refactoring must leave every line as it is.
//
// Exact mode's lines are the same on every layout and strategy (that is its
// point); float mode's differ by summation order and are pinned one by one.
//
// The lines were recorded with the model's products on the BLAS backend
// (LibTorch's own kernels, common/gemm/backend.h); the runs pin it, so the
// lines keep meaning "the loop did not move a bit" whatever the default
// backend is. Under oneDNN, exact mode is checked for its own promise (one
// rank's bits on every layout) rather than against the file.
//
// Regenerate after a deliberate change: run the test, then copy
// $TEST_UNDECLARED_OUTPUTS_DIR/pinned_runs.txt (bazel-testlogs/trainer/
// pinned_runs_test/shard_*/test.outputs/outputs.zip) over the file; each
// shard writes its own strategy's lines.
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ATen/Parallel.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/collective/test_util.h"
#include "common/gemm/backend.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/config/config.h"
#include "trainer/data/data.h"
#include "trainer/tests/test_config.h"
#include "trainer/run/trainer.h"
#include "trainer/strategy/factory.h"

namespace mtb {
namespace {

constexpr char kPinnedFile[] = "trainer/testdata/pinned_runs.txt";
constexpr int kGlobalBatch = 12;  // 1 x 12, 2 x 6, 3 x 4

// Accumulation, dropout, a cosine schedule with warm-up, active clipping and
// weight decay, so that every part of the step moves the numbers.
TrainConfig PinnedConfig(const std::string& strategy, bool exact, int ranks) {
  TrainConfig c = TinyConfig();
  c.set_strategy(*StrategyFromName(strategy));
  c.set_grad_sync("auto");
  c.set_batch_size(kGlobalBatch / ranks / 2);
  c.set_grad_accum(2);
  c.set_dropout(0.1);
  c.set_lr(3e-3);
  c.set_weight_decay(0.1);
  c.set_lr_schedule(TrainConfig::cosine);
  c.set_lr_warmup_steps(1);
  c.set_lr_decay_steps(4);
  c.set_min_lr(3e-4);
  c.set_max_grad_norm(0.5);
  c.set_steps(4);
  c.set_seed(2026);
  c.set_bucket_cap_mb(0.01);  // several buckets
  if (exact) {
    c.set_reduction(TrainConfig::exact);
    c.set_exact_chunk(1);
  }
  ResolveConfig(&c, 1);
  return c;
}

// "<mode> <strategy> <ranks> <digest> <loss bits, step by step>".
std::string PinnedLine(const std::string& strategy, bool exact, int ranks,
                       const TrainResult& result) {
  std::vector<std::string> bits;
  for (const StepRecord& step : result.runs(0).steps()) {
    bits.push_back(step.loss_bits());
  }
  return absl::StrCat(exact ? "exact" : "float", " ", strategy, " ", ranks, " ",
                      result.parameter_digest(), " ", absl::StrJoin(bits, ","));
}

// Rank 0's result of `config` trained through RunTraining on `ranks` threads.
TrainResult TrainOnThreads(const TrainConfig& config, int ranks) {
  at::set_num_threads(1);
  absl::StatusOr<std::unique_ptr<DataSource>> data = TensorData(OpenSamplesFor(config));
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok()) return {};
  TrainResult rank0;
  absl::Mutex mu;
  auto body = [&](collective::Communicator* communicator, int rank) {
    absl::StatusOr<std::unique_ptr<Strategy>> strategy =
        MakeStrategy(config, communicator);
    ASSERT_TRUE(strategy.ok()) << strategy.status();
    absl::StatusOr<TrainResult> result = RunTraining(
        config, RankInfo{rank, ranks}, **strategy, **data);
    ASSERT_TRUE(result.ok()) << "rank " << rank << ": " << result.status();
    if (rank == 0) {
      absl::MutexLock lock(&mu);
      rank0 = *std::move(result);
    }
  };
  if (ranks == 1) {
    body(nullptr, 0);
  } else {
    const absl::Status status = collective::RunRanksAsThreads(
        ranks, [&](collective::Communicator& c) { body(&c, c.rank()); });
    EXPECT_TRUE(status.ok()) << status;
  }
  return rank0;
}

// The pinned file's lines by their first three fields.
std::map<std::string, std::string> PinnedLines() {
  absl::StatusOr<std::string> text = ReadFileToString(kPinnedFile);
  EXPECT_TRUE(text.ok()) << text.status();
  std::map<std::string, std::string> lines;
  if (!text.ok()) return lines;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() != 5) continue;
    lines[absl::StrCat(fields[0], " ", fields[1], " ", fields[2])] =
        std::string(line);
  }
  return lines;
}

void AppendActual(const std::string& line) {
  const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (dir == nullptr) return;
  const std::string path = absl::StrCat(dir, "/pinned_runs.txt");
  absl::StatusOr<std::string> before = ReadFileToString(path);
  EXPECT_TRUE(WriteFileAtomically(
                  path, absl::StrCat(before.ok() ? *before : "", line, "\n"))
                  .ok());
}

class PinnedRuns : public testing::TestWithParam<std::string> {};

TEST_P(PinnedRuns, EveryLayoutReproducesItsPinnedLossBitsAndDigest) {
  const gemm::ScopedBackend blas(gemm::Backend::kBlas);
  const std::string strategy = GetParam();
  const std::map<std::string, std::string> pinned = PinnedLines();
  std::string exact_line_of_one_rank;
  for (bool exact : {false, true}) {
    for (int ranks : {1, 2, 3}) {
      const TrainResult result =
          TrainOnThreads(PinnedConfig(strategy, exact, ranks), ranks);
      ASSERT_EQ(result.runs_size(), 1) << strategy << " " << ranks;
      const std::string line = PinnedLine(strategy, exact, ranks, result);
      AppendActual(line);
      const std::vector<std::string> fields = absl::StrSplit(line, ' ');
      const std::string key = absl::StrJoin(fields.begin(), fields.begin() + 3, " ");
      const auto it = pinned.find(key);
      if (it == pinned.end()) {
        ADD_FAILURE() << "no pinned line for '" << key << "'";
      } else {
        EXPECT_EQ(line, it->second);
      }
      if (exact) {
        // The same bits on every layout: only the key differs.
        const std::string numbers = line.substr(key.size());
        if (ranks == 1) exact_line_of_one_rank = numbers;
        EXPECT_EQ(numbers, exact_line_of_one_rank) << key;
      }
    }
  }
}

// Exact mode on the oneDNN backend (the default): every strategy on 1, 2 and
// 3 rank threads gives the loss bits and parameter digest of ddp on one rank.
// Not pinned to a file: oneDNN picks its kernels by the CPU's instruction set,
// so its bits are this machine's. The rank threads are fresh threads, whose
// products run on the intra-op thread count (common/gemm/onednn.h) as on the
// main thread of a one-rank run.
TEST_P(PinnedRuns, ExactModeOnOneDnnGivesOneRanksBitsOnEveryLayout) {
  const gemm::ScopedBackend onednn(gemm::Backend::kOneDnn);
  const std::string strategy = GetParam();
  // The numbers of a line: its digest and loss bits, without the key.
  auto numbers = [](const std::string& line) {
    const std::vector<std::string> fields = absl::StrSplit(line, ' ');
    return absl::StrCat(fields[3], " ", fields[4]);
  };
  const std::string reference = numbers(
      PinnedLine("ddp", true, 1, TrainOnThreads(PinnedConfig("ddp", true, 1), 1)));
  // The negative case: oneDNN's bits are not BLAS's (the pinned lines), so
  // the comparisons below see which library ran the products.
  const std::map<std::string, std::string> pinned = PinnedLines();
  ASSERT_EQ(pinned.count("exact ddp 1"), 1u);
  EXPECT_NE(reference, numbers(pinned.at("exact ddp 1")))
      << "the products did not run on oneDNN";
  for (int ranks : {1, 2, 3}) {
    const TrainResult result =
        TrainOnThreads(PinnedConfig(strategy, true, ranks), ranks);
    ASSERT_EQ(result.runs_size(), 1) << strategy << " " << ranks;
    EXPECT_EQ(numbers(PinnedLine(strategy, true, ranks, result)), reference)
        << "exact " << strategy << " on " << ranks << " rank thread(s)";
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, PinnedRuns,
                         testing::Values("ddp", "zero1", "zero2", "fsdp"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// The negative case: the comparison sees a one-step change of the schedule.
TEST(PinnedRunsCheck, ADifferentRunDoesNotMatchItsPinnedLine) {
  const gemm::ScopedBackend blas(gemm::Backend::kBlas);
  TrainConfig config = PinnedConfig("ddp", /*exact=*/false, 2);
  config.set_min_lr(config.min_lr() * 2);
  const std::string line =
      PinnedLine("ddp", false, 2, TrainOnThreads(config, 2));
  const std::map<std::string, std::string> pinned = PinnedLines();
  ASSERT_EQ(pinned.count("float ddp 2"), 1u);
  EXPECT_NE(line, pinned.at("float ddp 2"));
}

}  // namespace
}  // namespace mtb
