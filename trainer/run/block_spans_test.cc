// Per-block trace spans (trainer/run/block_spans.h) in the trace of a real
// training run, for every strategy, on rank threads over Gloo (nothing
// process-global is checked): in each ProfilerStep#N, each micro-batch's
// forward holds exactly one "forward h.L" per block in layer order and its
// backward exactly one "backward h.L" per block in reverse order, disjoint,
// with their args; and tracing changes no number (losses and grad norms of
// the traced run equal the untraced run's bit for bit). The checker is shown
// to catch a missing, a doubled and an escaped span. The real-process run's
// files are checked by //trainer:trainer_run_test.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ATen/Parallel.h"
#include "absl/strings/str_cat.h"
#include "common/collective/test_util.h"
#include "common/trace/recorder.h"
#include "gtest/gtest.h"
#include "trainer/run/block_spans.h"
#include "trainer/data/data.h"
#include "trainer/tests/test_config.h"
#include "trainer/run/trainer.h"
#include "trainer/strategy/factory.h"
#include "trainer/config/config_names.h"

namespace mtb {
namespace {

constexpr double kSlackUs = 1e-3;  // ts + dur rounding in double

struct Span {
  std::string name;
  double begin = 0, end = 0;
  std::map<std::string, std::string> args;
  bool Inside(const Span& outer) const {
    return begin >= outer.begin - kSlackUs && end <= outer.end + kSlackUs;
  }
};

std::vector<Span> ComputeSpans(const trace::TraceFile& file) {
  std::vector<Span> spans;
  for (const trace::TraceEvent& e : file.traceevents()) {
    if (e.ph() != "X" || e.tid() != trace::kComputeTrack) continue;
    spans.push_back({e.name(), e.ts(), e.ts() + e.dur(),
                     std::map<std::string, std::string>(e.args().begin(), e.args().end())});
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  return spans;
}

// What is wrong with the per-block spans of `file` for `layers` blocks and
// `micro_batches` per step; empty when nothing is.
std::vector<std::string> BlockSpanProblems(const trace::TraceFile& file, int layers,
                                           int micro_batches) {
  std::vector<std::string> problems;
  const std::vector<Span> spans = ComputeSpans(file);
  int block_spans = 0, expected = 0;
  for (const Span& s : spans) block_spans += s.args.count("block") > 0;
  for (const Span& step : spans) {
    if (step.name.rfind("ProfilerStep#", 0) != 0) continue;
    for (const std::string phase : {"forward", "backward"}) {
      std::vector<const Span*> parents;
      for (const Span& s : spans) {
        if (s.name == phase && s.Inside(step)) parents.push_back(&s);
      }
      if (static_cast<int>(parents.size()) != micro_batches) {
        problems.push_back(absl::StrCat(step.name, ": ", parents.size(), " ", phase,
                                        " spans, want ", micro_batches));
        continue;
      }
      for (int micro = 0; micro < micro_batches; ++micro) {
        const Span& parent = *parents[micro];
        const std::string where = absl::StrCat(step.name, " ", phase, " #", micro);
        std::vector<const Span*> blocks;  // in time order
        for (const Span& s : spans) {
          if (s.args.count("block") && s.name.rfind(phase + " h.", 0) == 0 && s.Inside(parent)) {
            blocks.push_back(&s);
          }
        }
        expected += layers;
        if (static_cast<int>(blocks.size()) != layers) {
          problems.push_back(absl::StrCat(where, ": ", blocks.size(), " block spans, want ",
                                          layers));
          continue;
        }
        for (int i = 0; i < layers; ++i) {
          // Forward runs the blocks in layer order, backward in reverse.
          const int layer = phase == "forward" ? i : layers - 1 - i;
          const Span& b = *blocks[i];
          if (b.name != absl::StrCat(phase, " h.", layer) ||
              b.args.at("block") != absl::StrCat(layer) || b.args.at("parent") != phase ||
              b.args.at("micro_batch") != absl::StrCat(micro)) {
            problems.push_back(absl::StrCat(where, ": span ", i, " is ", b.name, " (block ",
                                            b.args.at("block"), ", micro_batch ",
                                            b.args.at("micro_batch"), "), want ", phase,
                                            " h.", layer));
          }
          if (b.end < b.begin || (i > 0 && b.begin < blocks[i - 1]->end - kSlackUs)) {
            problems.push_back(absl::StrCat(where, ": ", b.name, " overlaps the one before"));
          }
        }
      }
    }
  }
  if (block_spans != expected) {
    problems.push_back(absl::StrCat(block_spans, " block spans in the file, ", expected,
                                    " inside the steps' phases"));
  }
  return problems;
}

struct Case {
  std::string name;
  std::string strategy;
  int world_size = 2;
  bool checkpointing = false;
  bool prefetch = false;
  int grad_accum = 1;
};

TrainConfig ConfigOf(const Case& c) {
  TrainConfig config = TinyConfig();
  config.set_n_layers(3);
  config.set_steps(2);
  config.set_strategy(*StrategyFromName(c.strategy));
  config.set_activation_checkpointing(c.checkpointing);
  config.set_fsdp_prefetch(c.prefetch);
  config.set_grad_accum(c.grad_accum);
  if (c.strategy == "zero2" || c.strategy == "fsdp") config.set_grad_sync("every");
  return config;
}

struct RunOutput {
  std::vector<trace::TraceFile> traces;  // per rank; empty untraced
  std::vector<std::pair<double, double>> loss_and_norm;  // rank 0's steps
};

RunOutput Train(const Case& c, bool traced) {
  at::set_num_threads(1);
  const TrainConfig config = ConfigOf(c);
  const auto data = TensorData(MakeSyntheticSamples(config.seed(), config.vocab_size(), config.seq_len()));
  RunOutput out;
  out.traces.resize(traced ? c.world_size : 0);
  auto body = [&](collective::Communicator* communicator, int rank) {
    absl::StatusOr<std::unique_ptr<Strategy>> strategy = MakeStrategy(config, communicator);
    ASSERT_TRUE(strategy.ok()) << strategy.status();
    trace::TraceRunInfo info;
    info.set_rank(rank);
    info.set_world_size(c.world_size);
    trace::TraceRecorder recorder(info);
    RunHooks hooks;
    if (traced) hooks.trace = &recorder;
    absl::StatusOr<TrainResult> result =
        RunTraining(config, RankInfo{rank, c.world_size}, **strategy, *data, hooks);
    ASSERT_TRUE(result.ok()) << "rank " << rank << ": " << result.status();
    if (traced) out.traces[rank] = recorder.Build();
    if (rank == 0) {
      for (const StepRecord& s : result->runs(0).steps()) {
        out.loss_and_norm.emplace_back(s.loss(), s.grad_norm());
      }
    }
  };
  if (c.world_size == 1) {
    body(nullptr, 0);
  } else {
    const absl::Status threads = collective::RunRanksAsThreads(
        c.world_size, [&](collective::Communicator& comm) { body(&comm, comm.rank()); });
    EXPECT_TRUE(threads.ok()) << threads;
  }
  return out;
}

class EveryStrategy : public ::testing::TestWithParam<Case> {};

TEST_P(EveryStrategy, EachBlockHasOneForwardAndOneBackwardSpanPerMicroBatchNestedInItsPhase) {
  const Case& c = GetParam();
  const RunOutput traced = Train(c, true);
  ASSERT_EQ(static_cast<int>(traced.traces.size()), c.world_size);
  for (int rank = 0; rank < c.world_size; ++rank) {
    int steps = 0;
    for (const Span& s : ComputeSpans(traced.traces[rank])) {
      steps += s.name.rfind("ProfilerStep#", 0) == 0;
    }
    EXPECT_EQ(steps, 2) << "rank " << rank;
    for (const std::string& problem :
         BlockSpanProblems(traced.traces[rank], 3, c.grad_accum)) {
      ADD_FAILURE() << "rank " << rank << ": " << problem;
    }
  }
  // The alias the backward spans hang on is an identity: every number of
  // the run is the untraced run's, bit for bit.
  const RunOutput plain = Train(c, false);
  ASSERT_EQ(traced.loss_and_norm.size(), 2u);
  EXPECT_EQ(traced.loss_and_norm, plain.loss_and_norm);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, EveryStrategy,
    ::testing::Values(Case{"single", "single", 1}, Case{"ddp", "ddp"},
                      Case{"zero1", "zero1"}, Case{"zero2", "zero2"}, Case{"fsdp", "fsdp"},
                      Case{"fsdp_prefetch_checkpointing", "fsdp", 2, true, true},
                      Case{"ddp_checkpointing_grad_accum_2", "ddp", 2, true, false, 2}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// The checker fails where it should: a block span removed, doubled, or moved
// out of its phase.
TEST(BlockSpanProblems, AMissingADoubledAndAnEscapedSpanAreFound) {
  const RunOutput run = Train(Case{"single", "single", 1}, true);
  ASSERT_EQ(run.traces.size(), 1u);
  const trace::TraceFile good = run.traces[0];
  ASSERT_TRUE(BlockSpanProblems(good, 3, 1).empty());
  EXPECT_FALSE(BlockSpanProblems(good, 4, 1).empty()) << "3 blocks pass for 4";

  auto edited = [&](const std::string& name,
                    const std::function<void(trace::TraceFile*, int)>& edit) {
    trace::TraceFile file = good;
    for (int i = 0; i < file.traceevents_size(); ++i) {
      if (file.traceevents(i).name() == name) {
        edit(&file, i);
        break;
      }
    }
    return file;
  };
  const trace::TraceFile missing = edited("backward h.1", [](trace::TraceFile* f, int i) {
    f->mutable_traceevents()->DeleteSubrange(i, 1);
  });
  EXPECT_FALSE(BlockSpanProblems(missing, 3, 1).empty());
  const trace::TraceFile doubled = edited("forward h.2", [](trace::TraceFile* f, int i) {
    *f->add_traceevents() = f->traceevents(i);
  });
  EXPECT_FALSE(BlockSpanProblems(doubled, 3, 1).empty());
  const trace::TraceFile escaped = edited("backward h.0", [](trace::TraceFile* f, int i) {
    trace::TraceEvent* e = f->mutable_traceevents(i);
    e->set_ts(e->ts() + 1e6);  // a second later: after its step
  });
  EXPECT_FALSE(BlockSpanProblems(escaped, 3, 1).empty());
}

}  // namespace
}  // namespace mtb
