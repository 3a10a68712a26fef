// Save and load bandwidth of the trainer's checkpoints (docs/checkpoint.md,
// "Benchmark") next to this disk's own, in the same run:
//
//   bazel run --config=bench //trainer/checkpoint:checkpoint_benchmark --
//       --rounds=5 [--dir=/path/on/the/checkpoint/disk]
//
// State: a GPT's parameters and AdamW m and v (fp32; default vocab 8192,
// d_model 768, 3 layers: ~27.5M parameters, ~330 MB), saved with the full
// publish protocol (Checkpointer::Save: shard files hashed while written and
// fsynced, manifest, READY, rename, `latest`, pruning) by 1 rank (single) and
// by 2 ranks (ddp: each rank writes half, in parallel; ranks are threads of
// this process), and loaded back (Checkpointer::Resume) after the files'
// pages were dropped from the page cache (posix_fadvise DONTNEED on clean,
// fsynced pages), so loads read the disk. Peers, each round: the disk
// ceiling (common/base/disk_ceiling.h) for 1 and 2 threads — O_DIRECT writes
// + fsync of the same bytes from random buffers, and SHA-256 of them in
// memory; a save's ceiling is the smaller, and a save that beats its ceiling
// by more than 10% in a round marks that round's ceiling invalid (the table
// says in how many rounds) — `dd` reading the 1-thread ceiling's file back
// cold, and PyTorch 1.13's torch.save + fsync and cold torch.load of a state
// dict of the same tensors (trainer/checkpoint/bench/torch_save_peer.py).
// Rounds alternate the contenders; the table has medians and the min..max
// range (the machine is shared: read the ranges). Nothing is deleted while
// rounds run (saves keep every checkpoint, the ceiling and the peer write new
// files each round; all is removed at the end): on a disk mounted with `discard` (this
// one), a deleted file's blocks are discarded at a later journal commit,
// i.e. inside whichever contender's fsync comes next. Needs free space for
// 3 x rounds x the state.
#include <fcntl.h>
#include <unistd.h>

#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/base/disk_ceiling.h"
#include "common/base/flags.h"
#include "common/base/logging.h"
#include "common/base/stats.h"
#include "common/collective/test_util.h"
#include "common/report/report.h"
#include "common/results/atomic_file.h"
#include "glog/logging.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpointer.h"
#include "trainer/model/model.h"
#include "trainer/run/strategy.h"
#include "trainer/strategy/ddp.h"
#include "trainer/tests/test_config.h"
#include "trainer/run/trainer.h"
#include "trainer/config/config_names.h"

ABSL_FLAG(std::string, dir, "",
          "where to write (default: a new directory under /tmp); put it on the "
          "disk you checkpoint to");
ABSL_FLAG(int32_t, rounds, 5, "alternating rounds (medians and ranges over them)");
ABSL_FLAG(int32_t, vocab_size, 8192, "the state's model: vocabulary");
ABSL_FLAG(int32_t, d_model, 768, "the state's model: width");
ABSL_FLAG(int32_t, n_layers, 3, "the state's model: blocks");
ABSL_FLAG(std::string, resume_ranks, "1,2,4",
          "world sizes at which a resume (verification + load) is timed, before and after "
          "verifying once (empty: none)");
ABSL_FLAG(bool, resume_only, false, "time only the resume section (no save/load table)");
ABSL_FLAG(std::string, python, "/usr/bin/python3",
          "PyTorch's Python for the torch.save peer (empty: no peer)");

namespace mtb {
namespace {

namespace fs = std::filesystem;

constexpr char kPeer[] = "trainer/checkpoint/bench/torch_save_peer.py";

void Check(const absl::Status& status) { CHECK(status.ok()) << status; }

double ThreadCpuSeconds() {
  timespec now;
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

double ProcessCpuSeconds() {
  timespec now;
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

double Seconds(absl::Time start) { return absl::ToDoubleSeconds(absl::Now() - start); }

// Drops the (clean, fsynced) pages of `path`, a file or every file under a
// directory, from the page cache, so the next read comes from the disk.
void Evict(const std::string& path) {
  std::vector<std::string> files;
  if (fs::is_directory(path)) {
    for (const auto& entry : fs::recursive_directory_iterator(path)) {
      if (entry.is_regular_file()) files.push_back(entry.path().string());
    }
  } else {
    files.push_back(path);
  }
  for (const std::string& file : files) {
    const int fd = ::open(file.c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

void RunOrDie(const std::string& command) {
  const int code = std::system(command.c_str());
  CHECK_EQ(code, 0) << command;
}

TrainConfig BenchConfig(const std::string& strategy) {
  TrainConfig config = TinyConfig();
  config.set_vocab_size(absl::GetFlag(FLAGS_vocab_size));
  config.set_d_model(absl::GetFlag(FLAGS_d_model));
  config.set_n_layers(absl::GetFlag(FLAGS_n_layers));
  config.set_n_heads(absl::GetFlag(FLAGS_d_model) / 64);
  config.set_seq_len(64);
  config.set_strategy(*StrategyFromName(strategy));
  return config;
}

// The shapes the Python peer builds its state dict from: the same tensors.
std::string ShapesJson(const GptModel& model) {
  std::vector<std::string> entries;
  for (const NamedParameter& p : model.parameters()) {
    std::vector<std::string> dims;
    for (int64_t d : p.tensor.sizes()) dims.push_back(absl::StrCat(d));
    for (const char* prefix : {"model/", "optimizer/exp_avg/", "optimizer/exp_avg_sq/"}) {
      entries.push_back(absl::StrCat("{\"name\": \"", prefix, p.name,
                                     "\", \"dtype\": \"float32\", \"shape\": [",
                                     absl::StrJoin(dims, ", "), "]}"));
    }
  }
  entries.push_back("{\"name\": \"optimizer/step\", \"dtype\": \"int64\", \"shape\": []}");
  return absl::StrCat("[", absl::StrJoin(entries, ",\n"), "]");
}

// One contender's per-round seconds and the bytes it moved.
struct Row {
  std::string name;
  int64_t bytes = 0;
  std::vector<double> seconds;
  int ceiling_threads = 0;         // > 0: judged against that disk ceiling
  bool against_cold_read = false;  // a load: compared with the cold dd read
};

// Saves `strategy`'s state as step `step` under `root`, then loads it back
// cold; returns (save, load) seconds and the bytes. Collective over
// `communicator` (nullptr: one rank).
struct SaveLoad {
  double save = 0, load = 0;
  double write = 0, publish = 0;  // the save's phases (CheckpointSave)
  // CPU seconds of the saving thread and of the whole process during the
  // save: is it waiting for the disk, or for a core?
  double thread_cpu = 0, process_cpu = 0;
  int64_t bytes = 0;
};
SaveLoad SaveThenLoad(const TrainConfig& config, Strategy& strategy, const std::string& root,
                      int64_t step, int rank, int world_size,
                      collective::Communicator* communicator) {
  checkpoint::CheckpointPlan plan;
  plan.options.dir = root;
  plan.options.save_every = 1;
  // Nothing is deleted while rounds run (see the file comment).
  plan.options.keep_last = 0;
  plan.run_id = "checkpoint-benchmark";
  checkpoint::Checkpointer saver(plan, config, rank, world_size, communicator);
  Check(saver.Start());
  checkpoint::RankState state;
  state.set_rank(rank);
  state.set_step(step);
  SaveLoad out;
  absl::Time start = absl::Now();
  const double thread_cpu = ThreadCpuSeconds(), process_cpu = ProcessCpuSeconds();
  absl::StatusOr<CheckpointSave> saved = saver.Save(step, strategy, state, nullptr, [](const char*) {});
  out.save = Seconds(start);
  out.thread_cpu = ThreadCpuSeconds() - thread_cpu;
  out.process_cpu = ProcessCpuSeconds() - process_cpu;
  Check(saved.status());
  out.bytes = saved->bytes();
  out.write = saved->write_seconds();
  out.publish = saved->publish_seconds();

  const std::string dir = absl::StrCat(root, "/", checkpoint::StepDirName(step));
  if (rank == 0) Evict(dir);
  // Start's exchange doubles as a barrier: every rank waits for the eviction.
  Check(saver.Start());
  plan.resume_dir = dir;
  plan.start_step = step;
  absl::StatusOr<checkpoint::CheckpointManifest> manifest = checkpoint::ReadManifest(dir);
  Check(manifest.status());
  plan.resume_manifest = *manifest;
  checkpoint::Checkpointer loader(plan, config, rank, world_size, communicator);
  Check(loader.Start());
  start = absl::Now();
  Check(loader.Resume(strategy, state));
  out.load = Seconds(start);
  return out;
}

// GB/s of the median round and the range. A save (and torch.save) against
// the ceiling of its thread count measured in the same round: the median and
// range of the per-round shares, and in how many rounds the save beat the
// ceiling by more than 10% (that round's ceiling is invalid). A load against
// the cold `dd` read of the same round (a reference, not a ceiling).
void PrintTable(const std::vector<Row>& rows,
                const std::map<int, std::vector<DiskCeiling>>& ceilings, const Row& cold_read) {
  MarkdownTable table;
  table.headers = {"contender", "bytes", "median s", "GB/s (median)", "GB/s range",
                   "per round against its bound: median (range)", "bound"};
  for (const Row& row : rows) {
    if (row.seconds.empty()) continue;
    const double bytes = static_cast<double>(row.bytes);
    std::vector<std::string> cells = {
        row.name, FormatByteAmount(bytes), absl::StrFormat("%.3f", Median(row.seconds)),
        absl::StrFormat("%.2f", bytes / Median(row.seconds) / 1e9),
        absl::StrFormat("%.2f..%.2f", bytes / Max(row.seconds) / 1e9,
                        bytes / Min(row.seconds) / 1e9)};
    std::vector<double> shares;
    std::string bound = "-";
    if (row.ceiling_threads > 0 && ceilings.count(row.ceiling_threads) > 0) {
      const std::vector<DiskCeiling>& ceiling = ceilings.at(row.ceiling_threads);
      int invalid = 0, disk_bound = 0;
      for (size_t r = 0; r < row.seconds.size() && r < ceiling.size(); ++r) {
        const CeilingVerdict verdict = JudgeAgainstCeiling(ceiling[r], row.bytes, row.seconds[r]);
        shares.push_back(100 * verdict.share);
        invalid += verdict.ceiling_valid ? 0 : 1;
        disk_bound += std::string(ceiling[r].bound()) == "disk" ? 1 : 0;
      }
      bound = absl::StrFormat("%d-thread ceiling (the disk in %d of %d rounds, else SHA-256)%s",
                              row.ceiling_threads, disk_bound, static_cast<int>(shares.size()),
                              invalid == 0
                                  ? ""
                                  : absl::StrFormat(": INVALID in %d of %d rounds (beaten by "
                                                    "more than 10%%)",
                                                    invalid, static_cast<int>(shares.size())));
    } else if (row.against_cold_read && !cold_read.seconds.empty()) {
      for (size_t r = 0; r < row.seconds.size() && r < cold_read.seconds.size(); ++r) {
        shares.push_back(100 * (bytes / row.seconds[r]) /
                         (static_cast<double>(cold_read.bytes) / cold_read.seconds[r]));
      }
      bound = "cold dd read (a reference, not a ceiling)";
    }
    cells.push_back(shares.empty() ? "-"
                                   : absl::StrFormat("%.0f%% (%.0f..%.0f%%)", Median(shares),
                                                     Min(shares), Max(shares)));
    cells.push_back(bound);
    table.rows.push_back(cells);
  }
  std::printf("%s\n", table.Render().c_str());
}

// A resume as the trainer does it at `world_size` ranks (threads), from
// cold pages: the launcher verifies the checkpoint before any rank starts,
// then every rank verifies and loads its state. `before`: every rank
// verified in full as well (1 + N hashing passes over the bytes, as before
// the launcher handed its verdict down); `after`: the ranks check the
// launcher's manifest digest and the layout, hashing nothing (1 pass);
// `on_load`: ranks with no launcher of ours (torchrun) check the layout and
// hash only the files each reads, as it loads (ddp: every shard file, since
// its parameters are whole; no launcher pass).
// Seconds from the launcher's start to the last rank loaded, per round.
struct ResumeTimes {
  std::vector<double> before, after, on_load;
  int64_t bytes = 0;
};

ResumeTimes TimeResume(const std::string& root, int world_size, int rounds) {
  ResumeTimes times;
  absl::Mutex mutex;
  std::string digest;  // the launcher's verdict, guarded by `mutex`
  collective::ThreadRanksOptions threads;
  threads.timeout = absl::Minutes(30);
  const TrainConfig config = BenchConfig("ddp");
  Check(collective::RunRanksAsThreads(
      world_size,
      [&](collective::Communicator& communicator) {
        const int rank = communicator.rank();
        GptModel model(ModelShapeOf(config), config.seed());
        DdpStrategy ddp(&communicator, DdpOptions{});
        Check(ddp.Setup(model.store(), AdamWOptions{}));
        checkpoint::CheckpointPlan plan;
        plan.options.dir = root;
        plan.options.save_every = 1;
        plan.options.keep_last = 0;
        plan.run_id = "checkpoint-benchmark";
        checkpoint::Checkpointer saver(plan, config, rank, world_size, &communicator);
        Check(saver.Start());
        checkpoint::RankState state;
        state.set_rank(rank);
        state.set_step(1);
        absl::StatusOr<CheckpointSave> saved =
            saver.Save(1, ddp, state, nullptr, [](const char*) {});
        Check(saved.status());
        const std::string dir = absl::StrCat(root, "/", checkpoint::StepDirName(1));
        for (int round = 0; round < rounds; ++round) {
          for (const int mode : {0, 1, 2}) {  // before, after, on_load
            const bool once = mode == 1, on_load = mode == 2;
            if (rank == 0) Evict(dir);
            Check(saver.Start());  // a barrier: the pages are cold
            const absl::Time start = absl::Now();
            if (rank == 0 && !on_load) {
              absl::StatusOr<checkpoint::VerifiedCheckpoint> launcher =
                  checkpoint::VerifyCheckpoint(dir);
              Check(launcher.status());
              absl::MutexLock lock(&mutex);
              digest = launcher->manifest_sha256;
            }
            Check(saver.Start());  // the ranks start after the launcher's verdict
            std::string trusted;
            if (once) {
              absl::MutexLock lock(&mutex);
              trusted = digest;
            }
            absl::StatusOr<checkpoint::VerifiedCheckpoint> verified =
                checkpoint::VerifyCheckpoint(dir, trusted, /*defer_hashing=*/on_load);
            Check(verified.status());
            CHECK_EQ(verified->content_hashed, mode == 0);
            checkpoint::CheckpointPlan resume = plan;
            resume.hash_on_load = on_load;
            resume.resume_dir = dir;
            resume.start_step = 1;
            resume.resume_manifest = verified->manifest;
            checkpoint::Checkpointer loader(resume, config, rank, world_size, &communicator);
            Check(loader.Start());
            Check(loader.Resume(ddp, state));
            Check(saver.Start());  // every rank has loaded
            if (rank == 0) {
              (on_load ? times.on_load : once ? times.after : times.before)
                  .push_back(Seconds(start));
              times.bytes = saved->bytes();
            }
          }
        }
      },
      threads));
  fs::remove_all(root);
  return times;
}

void PrintResumeTable(const std::string& root, int rounds) {
  MarkdownTable table;
  table.headers = {"ranks", "bytes", "before: 1 + N verifications, median s (range)",
                   "after: 1 verification, median s (range)", "after / before",
                   "torchrun: each rank hashes what it reads, median s (range)"};
  for (absl::string_view text :
       absl::StrSplit(absl::GetFlag(FLAGS_resume_ranks), ',', absl::SkipEmpty())) {
    int world_size = 0;
    CHECK(absl::SimpleAtoi(text, &world_size) && world_size >= 1) << text;
    const ResumeTimes times =
        TimeResume(absl::StrCat(root, "/resume_", world_size), world_size, rounds);
    table.rows.push_back(
        {absl::StrCat(world_size), FormatByteAmount(static_cast<double>(times.bytes)),
         absl::StrFormat("%.3f (%.3f..%.3f)", Median(times.before), Min(times.before),
                         Max(times.before)),
         absl::StrFormat("%.3f (%.3f..%.3f)", Median(times.after), Min(times.after),
                         Max(times.after)),
         absl::StrFormat("%.2f", Median(times.after) / Median(times.before)),
         absl::StrFormat("%.3f (%.3f..%.3f)", Median(times.on_load), Min(times.on_load),
                         Max(times.on_load))});
    std::printf("resume at %d rank(s) timed\n", world_size);
    std::fflush(stdout);
  }
  std::printf("resume from cold pages: the launcher's verification, every rank's, every "
              "rank's load (ddp, ranks as threads)\n%s\n",
              table.Render().c_str());
}

std::string LoadAverage() {
  absl::StatusOr<std::string> text = ReadFileToString("/proc/loadavg");
  return text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : "?";
}

int Main() {
  at::set_num_threads(1);
  std::string root = absl::GetFlag(FLAGS_dir);
  if (root.empty()) {
    char pattern[] = "/tmp/mtb_checkpoint_bench_XXXXXX";
    CHECK(::mkdtemp(pattern) != nullptr);
    root = pattern;
  }
  Check(CreateDirectories(root));
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const std::string python = absl::GetFlag(FLAGS_python);
  std::printf("checkpoint benchmark in %s, %d rounds; load average at start %s\n",
              root.c_str(), rounds, LoadAverage().c_str());

  if (!absl::GetFlag(FLAGS_resume_ranks).empty()) PrintResumeTable(root, rounds);
  if (absl::GetFlag(FLAGS_resume_only)) {
    if (absl::GetFlag(FLAGS_dir).empty()) fs::remove_all(root);
    std::printf("load average at end %s\n", LoadAverage().c_str());
    return 0;
  }
  std::map<std::string, Row> rows;
  // The disk ceiling per thread count, one per round (rank 0 measures them).
  std::map<int, std::vector<DiskCeiling>> ceilings;
  std::vector<std::string> ceiling_files;
  // Per save: (write seconds of the slowest rank, publish seconds).
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> phases;
  const TrainConfig single_config = BenchConfig("single");
  const TrainConfig ddp_config = BenchConfig("ddp");
  collective::ThreadRanksOptions threads;
  threads.timeout = absl::Minutes(30);
  const absl::Status ran = collective::RunRanksAsThreads(
      2,
      [&](collective::Communicator& communicator) {
        const int rank = communicator.rank();
        GptModel ddp_model(ModelShapeOf(ddp_config), ddp_config.seed());
        DdpStrategy ddp(&communicator, DdpOptions{});
        Check(ddp.Setup(ddp_model.store(), AdamWOptions{}));
        std::unique_ptr<GptModel> single_model;
        SingleStrategy single;
        if (rank == 0) {
          single_model = std::make_unique<GptModel>(ModelShapeOf(single_config), 1);
          Check(single.Setup(single_model->store(), AdamWOptions{}));
          Check(WriteFileAtomically(root + "/shapes.json", ShapesJson(*single_model)));
        }
        for (int round = 0; round < rounds; ++round) {
          const int64_t step = round + 1;
          if (rank == 0) {
            const SaveLoad one = SaveThenLoad(single_config, single, root + "/one_rank", step, 0,
                                              1, nullptr);
            rows["save, 1 rank (ours)"].seconds.push_back(one.save);
            rows["save, 1 rank (ours)"].bytes = one.bytes;
            phases["1 rank"].first.push_back(one.write);
            phases["1 rank"].second.push_back(one.publish);
            std::printf("round %d: 1-rank save %.3f s wall, %.3f s CPU on its thread, %.3f s "
                        "in the process\n",
                        round + 1, one.save, one.thread_cpu, one.process_cpu);
            rows["load, 1 rank, cold (ours)"].seconds.push_back(one.load);
            rows["load, 1 rank, cold (ours)"].bytes = one.bytes;
            for (int threads : {1, 2}) {
              DiskCeilingOptions options;
              options.directory = root;
              options.bytes = one.bytes;
              options.threads = threads;
              options.keep_files = true;  // deleted at the end (see the file comment)
              absl::StatusOr<DiskCeiling> ceiling = MeasureDiskCeiling(options);
              Check(ceiling.status());
              ceilings[threads].push_back(*ceiling);
              ceiling_files.insert(ceiling_files.end(), ceiling->files.begin(),
                                   ceiling->files.end());
              const std::string label = absl::StrCat("ceiling, ", threads,
                                                     threads == 1 ? " thread" : " threads");
              Row& write = rows[label + ": O_DIRECT write + fsync"];
              write.seconds.push_back(ceiling->write_seconds);
              write.bytes = ceiling->bytes;
              Row& hash = rows[label + ": SHA-256 in memory"];
              hash.seconds.push_back(ceiling->sha256_seconds);
              hash.bytes = ceiling->bytes;
              if (threads == 1) {
                // The ceiling's file read back cold: what the disk reads.
                const std::string& file = ceiling->files.front();
                Evict(file);
                const absl::Time start = absl::Now();
                RunOrDie(absl::StrCat("dd if=", file, " of=/dev/null bs=1M status=none"));
                rows["dd read, cold"].seconds.push_back(Seconds(start));
                rows["dd read, cold"].bytes = ceiling->bytes;
              }
            }
            if (!python.empty()) {
              const std::string command =
                  absl::StrCat(python, " ", kPeer, " ", root, "/shapes.json ", root, "/torch_",
                               round, ".pt");
              FILE* peer = ::popen(command.c_str(), "r");
              CHECK(peer != nullptr);
              char line[256] = {0};
              CHECK(std::fgets(line, sizeof(line), peer) != nullptr) << command;
              CHECK_EQ(::pclose(peer), 0) << command;
              const std::vector<std::string> parts =
                  absl::StrSplit(absl::StripAsciiWhitespace(line), ' ');
              CHECK_EQ(parts.size(), 3u) << line;
              double save = 0, load = 0;
              int64_t bytes = 0;
              CHECK(absl::SimpleAtod(parts[0], &save) && absl::SimpleAtod(parts[1], &load) &&
                    absl::SimpleAtoi(parts[2], &bytes));
              rows["torch.save + fsync (PyTorch 1.13)"].seconds.push_back(save);
              rows["torch.save + fsync (PyTorch 1.13)"].bytes = bytes;
              rows["torch.load, cold (PyTorch 1.13)"].seconds.push_back(load);
              rows["torch.load, cold (PyTorch 1.13)"].bytes = bytes;
            }
          }
          const SaveLoad two = SaveThenLoad(ddp_config, ddp, root + "/two_ranks", step, rank, 2,
                                            &communicator);
          if (rank == 0) {
            rows["save, 2 ranks (ours, ddp)"].seconds.push_back(two.save);
            rows["save, 2 ranks (ours, ddp)"].bytes = two.bytes;
            phases["2 ranks"].first.push_back(two.write);
            phases["2 ranks"].second.push_back(two.publish);
            rows["load, 2 ranks, cold (ours, ddp)"].seconds.push_back(two.load);
            rows["load, 2 ranks, cold (ours, ddp)"].bytes = two.bytes;
            std::printf("round %d/%d done\n", round + 1, rounds);
            std::fflush(stdout);
          }
        }
      },
      threads);
  Check(ran);
  fs::remove_all(root + "/one_rank");
  fs::remove_all(root + "/two_ranks");
  for (int round = 0; round < rounds; ++round) {
    fs::remove(absl::StrCat(root, "/torch_", round, ".pt"));
  }
  for (const std::string& file : ceiling_files) fs::remove(file);
  fs::remove(root + "/shapes.json");
  if (absl::GetFlag(FLAGS_dir).empty()) fs::remove_all(root);

  rows["save, 1 rank (ours)"].ceiling_threads = 1;
  rows["torch.save + fsync (PyTorch 1.13)"].ceiling_threads = 1;
  rows["save, 2 ranks (ours, ddp)"].ceiling_threads = 2;
  for (const char* load : {"load, 1 rank, cold (ours)", "load, 2 ranks, cold (ours, ddp)",
                           "torch.load, cold (PyTorch 1.13)"}) {
    rows[load].against_cold_read = true;
  }
  std::vector<Row> ordered;
  for (const char* name :
       {"ceiling, 1 thread: O_DIRECT write + fsync", "ceiling, 1 thread: SHA-256 in memory",
        "save, 1 rank (ours)", "torch.save + fsync (PyTorch 1.13)",
        "ceiling, 2 threads: O_DIRECT write + fsync", "ceiling, 2 threads: SHA-256 in memory",
        "save, 2 ranks (ours, ddp)", "dd read, cold", "load, 1 rank, cold (ours)",
        "load, 2 ranks, cold (ours, ddp)", "torch.load, cold (PyTorch 1.13)"}) {
    if (rows.count(name) == 0 || rows[name].seconds.empty()) continue;
    Row row = rows[name];
    row.name = name;
    ordered.push_back(row);
  }
  PrintTable(ordered, ceilings, rows["dd read, cold"]);
  for (const auto& [ranks, seconds] : phases) {
    std::printf("save, %s: median write %.3f s (hash while writing, fsync; slowest rank), "
                "publish %.3f s (reports, manifest, READY, rename, latest, prune)\n",
                ranks.c_str(), Median(seconds.first), Median(seconds.second));
  }
  std::printf("load average at end %s (a shared machine: read the ranges)\n",
              LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace mtb

int main(int argc, char** argv) {
  mtb::InitLogging(argv[0]);
  mtb::ParseCommandLineOrExit(argc, argv,
                              "checkpoint save/load bandwidth against the disk ceiling "
                              "(O_DIRECT write + fsync, SHA-256), a cold read and "
                              "torch.save (docs/checkpoint.md)");
  return mtb::Main();
}
