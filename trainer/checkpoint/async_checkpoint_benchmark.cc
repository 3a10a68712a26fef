// Synchronous against --async_checkpoint saves, and resharding load time
// (docs/checkpoint.md, "Async save"), on fsdp with 2 rank threads:
//
//   bazel run --config=bench //trainer/checkpoint:async_checkpoint_benchmark --
//       --rounds=3 [--dir=/path/on/the/checkpoint/disk]
//
// Each round runs, alternating, the same training (--steps steps, the
// model below, ~50 MB of parameters and AdamW m and v) with no checkpoints,
// with a synchronous save after every step and with an async save after
// every step (keep_last 2), then loads the last checkpoint onto 2 fsdp
// ranks (same layout) and onto 3 (a reshard), training nothing. Reported:
// per save, what the training loop waited (a synchronous save: all of it;
// async: the snapshot copy, and the wait for the previous save); the run's
// throughput over its wall time, saves included, against no checkpoints;
// rank 0's load time. Medians over the rounds with min..max (the machine is
// shared: read the ranges).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/flags.h"
#include "common/base/logging.h"
#include "common/base/stats.h"
#include "common/report/report.h"
#include "common/results/atomic_file.h"
#include "glog/logging.h"
#include "trainer/checkpoint/resume_test_util.h"

ABSL_FLAG(std::string, dir, "",
          "where to write (default: a new directory under /tmp); put it on the "
          "disk you checkpoint to");
ABSL_FLAG(int32_t, rounds, 3, "alternating rounds (medians and ranges over them)");
ABSL_FLAG(int32_t, steps, 8, "steps per run (a save after each)");
ABSL_FLAG(int32_t, vocab_size, 4096, "model: vocabulary");
ABSL_FLAG(int32_t, d_model, 256, "model: width");
ABSL_FLAG(int32_t, n_layers, 4, "model: blocks");

namespace mtb::checkpoint {
namespace {

namespace fs = std::filesystem;

TrainConfig BenchConfig(int ranks) {
  TrainConfig config = ResumeConfig("fsdp", absl::GetFlag(FLAGS_steps));
  config.set_vocab_size(absl::GetFlag(FLAGS_vocab_size));
  config.set_d_model(absl::GetFlag(FLAGS_d_model));
  config.set_n_layers(absl::GetFlag(FLAGS_n_layers));
  config.set_n_heads(absl::GetFlag(FLAGS_d_model) / 64);
  config.set_seq_len(64);
  config.set_dropout(0);
  config.set_lr_decay_steps(config.steps());
  config.set_batch_size(12 / ranks);  // global batch 12
  return config;
}

std::string Range(const std::vector<double>& values, int digits = 3) {
  return absl::StrCat(FormatSignificant(Median(values), digits), " (",
                      FormatSignificant(Min(values), digits), "..",
                      FormatSignificant(Max(values), digits), ")");
}

int Main() {
  std::string root = absl::GetFlag(FLAGS_dir);
  if (root.empty()) {
    char pattern[] = "/tmp/mtb_async_checkpoint_bench_XXXXXX";
    CHECK(::mkdtemp(pattern) != nullptr);
    root = pattern;
  }
  CHECK(CreateDirectories(root).ok());
  const int rounds = absl::GetFlag(FLAGS_rounds);
  absl::StatusOr<std::string> load = ReadFileToString("/proc/loadavg");
  std::printf(
      "async checkpoint benchmark in %s: fsdp, 2 rank threads, %d steps, %d rounds; "
      "load average at start %s",
      root.c_str(), absl::GetFlag(FLAGS_steps), rounds, load.ok() ? load->c_str() : "?\n");

  std::map<std::string, std::vector<double>> tokens_per_s, blocking_ms, background_ms, wait_ms;
  std::vector<double> sync_ratio, async_ratio, blocking_fraction, load_same, load_reshard;
  double state_bytes = 0;
  for (int round = 0; round < rounds; ++round) {
    std::map<std::string, double> round_tps;
    double sync_median = 0, async_median = 0;
    const std::vector<std::string> order = round % 2 == 0
                                               ? std::vector<std::string>{"none", "sync", "async"}
                                               : std::vector<std::string>{"async", "sync", "none"};
    std::string last_dir;
    for (const std::string& mode : order) {
      const std::string dir = absl::StrCat(root, "/", mode, "_", round);
      CheckpointOptions options = Saving(dir, mode == "none" ? 0 : 1);
      options.keep_last = 2;
      options.async_save = mode == "async";
      const TrainConfig config = BenchConfig(2);
      const RunOutput run = Train(config, 2, options);
      CHECK(run.status.ok()) << mode << ": " << run.status;
      const TrainRun& r = run.result.runs(0);
      const double tps = r.steps_size() * run.result.model().tokens_per_step() / r.wall_seconds();
      round_tps[mode] = tps;
      tokens_per_s[mode].push_back(tps);
      std::vector<double> blocking;
      for (const CheckpointSave& save : run.result.checkpoint().saves()) {
        blocking.push_back(save.blocking_ms());
        blocking_ms[mode].push_back(save.blocking_ms());
        if (save.async()) {
          background_ms[mode].push_back(save.background_ms());
          wait_ms[mode].push_back(save.wait_ms());
        }
        state_bytes = save.bytes();
      }
      if (mode == "sync") sync_median = Median(blocking);
      if (mode == "async") {
        async_median = Median(blocking);
        last_dir = dir;
      }
    }
    sync_ratio.push_back(round_tps["sync"] / round_tps["none"]);
    async_ratio.push_back(round_tps["async"] / round_tps["none"]);
    blocking_fraction.push_back(async_median / sync_median);
    // Loads of the last checkpoint, training nothing (--steps = its step).
    const std::string step = absl::StrFormat("%s/step_%08d", last_dir, absl::GetFlag(FLAGS_steps));
    for (int ranks : {2, 3}) {
      const RunOutput loaded =
          Train(BenchConfig(ranks), ranks,
                Saving(absl::StrCat(root, "/load_", round, "_", ranks), 0, step));
      CHECK(loaded.status.ok()) << loaded.status;
      (ranks == 2 ? load_same : load_reshard).push_back(loaded.result.checkpoint().load_ms());
    }
    std::fprintf(stderr, "round %d/%d done\n", round + 1, rounds);
  }

  MarkdownTable table;
  table.headers = {"",
                   "tokens/s (wall, saves included)",
                   "vs none",
                   "training blocked per save, ms",
                   "background per save, ms",
                   "waited for the previous save, ms"};
  for (const char* mode : {"none", "sync", "async"}) {
    const std::string m = mode;
    table.rows.push_back({m, Range(tokens_per_s[m]),
                          m == "none" ? "1" : Range(m == "sync" ? sync_ratio : async_ratio),
                          blocking_ms[m].empty() ? "-" : Range(blocking_ms[m]),
                          background_ms[m].empty() ? "-" : Range(background_ms[m]),
                          wait_ms[m].empty() ? "-" : Range(wait_ms[m])});
  }
  std::printf("\nstate saved per step: %s\n\n%s\n", FormatByteAmount(state_bytes).c_str(),
              table.Render().c_str());
  std::printf(
      "async blocking / synchronous save (per round, medians of its saves): %s "
      "(goal <= 0.1)\n",
      Range(blocking_fraction).c_str());
  std::printf(
      "load of that checkpoint on rank 0, ms: fsdp 2 -> 2 ranks %s; reshard fsdp 2 -> 3 "
      "ranks %s\n",
      Range(load_same).c_str(), Range(load_reshard).c_str());
  fs::remove_all(root);
  return 0;
}

}  // namespace
}  // namespace mtb::checkpoint

int main(int argc, char** argv) {
  mtb::InitLogging(argv[0]);
  mtb::ParseCommandLineOrExit(argc, argv,
                              "sync vs async checkpoint saves, reshard load time "
                              "(docs/checkpoint.md)");
  FLAGS_minloglevel = 1;  // the runs' step lines would bury the table
  return mtb::checkpoint::Main();
}
