// DdpStrategy with ranks as threads of this test (common/collective/test_util.h):
// equivalence with one rank, the overlap (issue order of bucket all-reduces
// against autograd events), bucket order, no_sync accounting, Setup's checks
// and the collective non-finite stop. Real processes (the trainer binary) are
// in //trainer:ddp_process_test.
#include "trainer/strategy/ddp.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "absl/synchronization/mutex.h"
#include "common/collective/test_util.h"
#include "gtest/gtest.h"
#include "trainer/data/data.h"
#include "trainer/strategy/buckets.h"
#include "trainer/strategy/rank_runs.h"
#include "trainer/tests/test_config.h"
#include "trainer/run/components.h"
#include "trainer/run/trainer.h"

namespace mtb {
namespace {

// Setup over a one-unit store of `parameters` (the store lives as long as the
// calling thread's next SetupOn; each test's strategy is done with it by then).
absl::Status SetupOn(Strategy& strategy, std::vector<NamedParameter> parameters) {
  static thread_local std::unique_ptr<ParameterStore> store;
  store = std::make_unique<ParameterStore>(std::move(parameters));
  return strategy.Setup(*store, AdamWOptions{});
}

// Trains `config` on `world_size` thread ranks with ddp (or, for world size
// 1 and `single`, SingleStrategy) and returns every rank's run.
std::vector<RankRun> Train(const TrainConfig& config, int world_size,
                           const DdpOptions& options, bool single = false) {
  return TrainOnRankThreads(
      config, world_size,
      [&](collective::Communicator* communicator) -> std::unique_ptr<Strategy> {
        if (single) return std::make_unique<SingleStrategy>();
        return std::make_unique<DdpStrategy>(communicator, options);
      });
}

TrainConfig DdpConfig() {
  TrainConfig config = TinyConfig();  // vocab 64, d 32, 2 layers, seq 16, B 4
  config.set_strategy(TrainConfig::ddp);
  config.set_dropout(0.1);  // masks keyed by global sample: rank-independent
  config.set_max_grad_norm(1.0);
  return config;
}

// Small buckets, so that the tiny model has several.
DdpOptions SmallBuckets() {
  DdpOptions options;
  options.first_bucket_cap_bytes = 16 << 10;
  options.bucket_cap_bytes = 32 << 10;
  return options;
}

TEST(Ddp, OneRankRunsTheSamePathAndEqualsSingleBitForBit) {
  const TrainConfig config = DdpConfig();
  const std::vector<RankRun> ddp = Train(config, 1, SmallBuckets());
  TrainConfig reference = config;
  reference.set_strategy(TrainConfig::single);
  const std::vector<RankRun> single = Train(reference, 1, {}, true);
  for (int step = 0; step < config.steps(); ++step) {
    EXPECT_EQ(ddp[0].steps[step].loss(), single[0].steps[step].loss());
    EXPECT_EQ(ddp[0].steps[step].grad_syncs(), 1);
    EXPECT_EQ(ddp[0].steps[step].grad_bytes_sent(), 0);
  }
  ExpectAllEqual(ddp[0].params, single[0].params, "ddp vs single");
  EXPECT_GT(ddp[0].buckets.size(), 1u);
}

TEST(Ddp, TwoRanksAsThreadsMatchOneRankOnTheGlobalBatch) {
  TrainConfig config = DdpConfig();
  const std::vector<RankRun> two = Train(config, 2, SmallBuckets());
  TrainConfig whole = config;
  whole.set_batch_size(2 * config.batch_size());
  const std::vector<RankRun> one = Train(whole, 1, SmallBuckets());
  // Every rank holds the same parameters, bit for bit: one all-reduce result.
  ExpectAllEqual(two[0].params, two[1].params, "rank 0 vs rank 1");
  for (int step = 0; step < config.steps(); ++step) {
    EXPECT_EQ(two[0].steps[step].loss(), two[1].steps[step].loss());
    // fp32 summation order differs (one mean over 8 samples vs the average
    // of two means over 4): see ddp_process_test.cc for the tolerance.
    EXPECT_NEAR(two[0].steps[step].loss(), one[0].steps[step].loss(), 1e-5);
  }
  ExpectAllClose(two[0].params, one[0].params, "parameters");
}

// Checkpointed blocks return their parameters' gradients from a custom
// autograd function; the accumulator hooks must still see each exactly once.
TEST(Ddp, ActivationCheckpointingChangesNothingUnderDdp) {
  TrainConfig config = DdpConfig();
  config.set_grad_accum(2);
  const std::vector<RankRun> plain = Train(config, 2, SmallBuckets());
  config.set_activation_checkpointing(true);
  const std::vector<RankRun> checkpointed = Train(config, 2, SmallBuckets());
  for (int step = 0; step < config.steps(); ++step) {
    EXPECT_EQ(plain[0].steps[step].loss(), checkpointed[0].steps[step].loss());
  }
  ExpectAllEqual(plain[0].params, checkpointed[0].params, "checkpointing");
  ExpectAllEqual(plain[1].params, checkpointed[1].params, "checkpointing");
}

TEST(Ddp, BucketsFollowReverseLayoutOrderWithAOneMebibyteFirstBucket) {
  // d_model 128, 4 layers: a block is 12*128^2 + 13*128 floats = 0.76 MiB.
  TrainConfig config = DdpConfig();
  config.set_d_model(128);
  config.set_n_layers(4);
  config.set_vocab_size(256);
  config.set_steps(1);
  DdpStrategy strategy(nullptr, DdpOptions{});
  const auto data = TensorData(MakeSyntheticSamples(7, 256, 16));
  auto trainer = Trainer::Create(config, RankInfo{}, &strategy, data.get());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const std::vector<BucketSummary> buckets = strategy.Buckets();
  // Reverse layout order (trainer/model/parameter_store.h: the root unit first,
  // then blocks): bucket 0 closes once it holds >= 1 MiB: block 3, then
  // block 2's parameters up to (and including) the one that crosses 1 MiB;
  // the root unit (ln_f, wpe, wte) ends the last bucket.
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].first_parameter, "h.3.mlp.c_proj.bias");
  EXPECT_GE(buckets[0].bytes, kFirstBucketBytes);
  EXPECT_EQ(buckets[1].last_parameter, "wte");
  EXPECT_EQ(buckets[0].bytes + buckets[1].bytes, strategy.gradient_bytes());
  // Buckets are slices of the flat gradient buffer: .grad is a view of it.
  const ParameterStore& store = (*trainer)->model().store();
  for (size_t i = 0; i < store.parameters().size(); ++i) {
    EXPECT_EQ(store.parameters()[i].tensor.grad().data_ptr<float>(),
              store.flat_gradients().data_ptr<float>() + store.offset(i))
        << store.parameters()[i].name;
  }
  EXPECT_EQ(strategy.gradient_bytes(),
            (*trainer)->model().ParameterCount() * 4);
}

// The overlap is real: on each rank, in program order on the thread that runs
// backward, bucket 0 (the last block's gradients) is issued before any
// gradient of block 0 has been computed.
TEST(Ddp, FirstBucketIsIssuedBeforeBackwardReachesTheFirstLayer) {
  TrainConfig config = DdpConfig();
  config.set_steps(2);
  at::set_num_threads(1);
  const auto data = TensorData(MakeSyntheticSamples(config.seed(), config.vocab_size(),
                                      config.seq_len()));
  std::vector<std::vector<std::string>> events(2);
  std::vector<std::vector<BucketSummary>> buckets(2);
  const absl::Status status =
      collective::RunRanksAsThreads(2, [&](collective::Communicator& communicator) {
        const int rank = communicator.rank();
        DdpStrategy strategy(&communicator, SmallBuckets());
        auto trainer = Trainer::Create(config, RankInfo{rank, 2}, &strategy,
                                       data.get());
        ASSERT_TRUE(trainer.ok()) << trainer.status();
        buckets[rank] = strategy.Buckets();
        std::vector<std::string>& log = events[rank];
        const collective::CollectiveLog::ObserverId observer_id = communicator.log().AddObserver(
            [&log](collective::CollectiveEvent event,
                   const collective::CollectiveRecord& record) {
              if (event == collective::CollectiveEvent::kIssued &&
                  record.op == collective::CollectiveOp::kAllReduce &&
                  record.dtype == "float32") {
                log.push_back(absl::StrCat("issued ", record.size_bytes));
              }
            });
        for (const NamedParameter& p : (*trainer)->model().parameters()) {
          if (p.name.rfind("h.0.", 0) != 0) continue;
          p.tensor.register_hook([&log, name = p.name](const at::Tensor&) {
            log.push_back("grad " + name);
          });
        }
        for (int step = 0; step < config.steps(); ++step) {
          ASSERT_TRUE((*trainer)->Step().ok());
          log.push_back("step done");
        }
        communicator.log().RemoveObserver(observer_id);
      });
  ASSERT_TRUE(status.ok()) << status;
  for (int rank = 0; rank < 2; ++rank) {
    const std::vector<std::string>& log = events[rank];
    ASSERT_GE(buckets[rank].size(), 3u);
    EXPECT_EQ(buckets[rank][0].first_parameter, "h.1.mlp.c_proj.bias");
    const std::string first_bucket =
        absl::StrCat("issued ", buckets[rank][0].bytes);
    const auto issued = std::find(log.begin(), log.end(), first_bucket);
    const auto layer0 =
        std::find_if(log.begin(), log.end(), [](const std::string& e) {
          return e.rfind("grad h.0.", 0) == 0;
        });
    ASSERT_NE(issued, log.end()) << "rank " << rank;
    ASSERT_NE(layer0, log.end()) << "rank " << rank;
    EXPECT_LT(issued - log.begin(), layer0 - log.begin())
        << "rank " << rank << ": bucket 0 was issued after backward reached "
        << *layer0;
    // Every bucket is issued once per step, in bucket order.
    std::vector<std::string> issues;
    for (const std::string& e : log) {
      if (e.rfind("issued ", 0) == 0) issues.push_back(e);
    }
    ASSERT_EQ(issues.size(), 2 * buckets[rank].size());
    for (size_t i = 0; i < issues.size(); ++i) {
      EXPECT_EQ(issues[i],
                absl::StrCat("issued ",
                             buckets[rank][i % buckets[rank].size()].bytes));
    }
  }
}

// Two parameters, one bucket each. Bucket 0 holds `late` (last in parameter
// order), but the loss is built so that backward produces `early`'s gradient
// first: bucket 1 becomes ready first and must wait for bucket 0, so every
// rank issues bucket 0 then bucket 1.
TEST(Ddp, ABucketReadyBeforeItsPredecessorWaitsForIt) {
  const absl::Status status =
      collective::RunRanksAsThreads(2, [](collective::Communicator& communicator) {
        const at::Tensor early = at::ones({5}, at::kFloat).requires_grad_();
        const at::Tensor late = at::ones({3}, at::kFloat).requires_grad_();
        const std::vector<NamedParameter> parameters = {{"early", early},
                                                        {"late", late}};
        DdpOptions options;
        options.first_bucket_cap_bytes = 4;  // one parameter per bucket
        options.bucket_cap_bytes = 4;
        DdpStrategy strategy(&communicator, options);
        ASSERT_TRUE(SetupOn(strategy, parameters).ok());
        ASSERT_EQ(strategy.Buckets()[0].first_parameter, "late");
        std::vector<std::string> log;
        const collective::CollectiveLog::ObserverId observer_id = communicator.log().AddObserver(
            [&log](collective::CollectiveEvent event,
                   const collective::CollectiveRecord& record) {
              if (event == collective::CollectiveEvent::kIssued) {
                log.push_back(absl::StrCat("issued ", record.elements));
              }
            });
        early.register_hook([&log](const at::Tensor&) {
          log.push_back("grad early");
        });
        late.register_hook([&log](const at::Tensor&) {
          log.push_back("grad late");
        });
        ASSERT_TRUE(strategy.BeforeBackward(0, 1).ok());
        // `late` enters the graph first, so its gradient comes last.
        const at::Tensor a = (late * 2).sum();
        const at::Tensor b = (early * (communicator.rank() + 1)).sum();
        (a + b).backward();
        ASSERT_TRUE(strategy.AfterBackward().ok());
        communicator.log().RemoveObserver(observer_id);
        EXPECT_EQ(log, (std::vector<std::string>{"grad early", "grad late",
                                                 "issued 3", "issued 5"}));
        // Averages over the two ranks: d/d early = (1 + 2) / 2.
        EXPECT_TRUE(at::equal(early.grad(), at::full({5}, 1.5f)));
        EXPECT_TRUE(at::equal(late.grad(), at::full({3}, 2.0f)));
      });
  ASSERT_TRUE(status.ok()) << status;
}

// The test-only faults break exactly what they name (the process tests rely
// on them to prove their checks): rank r's gradient of both parameters is
// r + 1, so the average over two ranks is 1.5 and the sum 3.
TEST(Ddp, TestFaultsBreakExactlyWhatTheyName) {
  struct Case {
    std::string fault;
    float early, late;  // each rank's expected gradients, rank 0 then rank 1
    float early_rank1, late_rank1;
  };
  // Bucket 0 holds `late`, bucket 1 `early` (one parameter per bucket).
  for (const Case& c : {Case{"", 1.5f, 1.5f, 1.5f, 1.5f},
                        Case{"sum_not_average", 3, 3, 3, 3},
                        Case{"bucket_never_synced:1", 1, 1.5f, 2, 1.5f},
                        Case{"parameter_unreduced:late", 1.5f, 1, 1.5f, 2}}) {
    SCOPED_TRACE(c.fault);
    absl::StatusOr<SyncTestFault> fault = ParseSyncTestFault(c.fault);
    ASSERT_TRUE(fault.ok()) << fault.status();
    const absl::Status status = collective::RunRanksAsThreads(
        2, [&](collective::Communicator& communicator) {
          const at::Tensor early = at::ones({5}, at::kFloat).requires_grad_();
          const at::Tensor late = at::ones({3}, at::kFloat).requires_grad_();
          DdpOptions options;
          options.first_bucket_cap_bytes = 4;
          options.bucket_cap_bytes = 4;
          options.testonly_fault = *fault;
          DdpStrategy strategy(&communicator, options);
          ASSERT_TRUE(
              SetupOn(strategy, {{"early", early}, {"late", late}})
                  .ok());
          ASSERT_TRUE(strategy.BeforeBackward(0, 1).ok());
          const float mine = static_cast<float>(communicator.rank() + 1);
          ((early * mine).sum() + (late * mine).sum()).backward();
          ASSERT_TRUE(strategy.AfterBackward().ok());
          const bool rank0 = communicator.rank() == 0;
          EXPECT_TRUE(at::equal(early.grad(),
                                at::full({5}, rank0 ? c.early : c.early_rank1)))
              << "rank " << communicator.rank() << " early " << early.grad();
          EXPECT_TRUE(at::equal(late.grad(),
                                at::full({3}, rank0 ? c.late : c.late_rank1)))
              << "rank " << communicator.rank() << " late " << late.grad();
        });
    ASSERT_TRUE(status.ok()) << status;
  }
}

TEST(Ddp, TestFaultsThatNameNothingAreInvalidArguments) {
  for (const char* text : {"sum", "bucket_never_synced:x", "sum_not_average:1",
                           "parameter_unreduced:"}) {
    const absl::StatusOr<SyncTestFault> fault = ParseSyncTestFault(text);
    EXPECT_EQ(fault.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(fault.status().message().find(
                  absl::StrCat("--testonly_sync_fault=", text, ": expected")),
              std::string::npos)
        << fault.status();
  }
  const at::Tensor w = at::ones({3}, at::kFloat).requires_grad_();
  DdpOptions bucket;
  bucket.testonly_fault = *ParseSyncTestFault("bucket_never_synced:1");
  DdpStrategy one_bucket(nullptr, bucket);
  const absl::Status no_bucket = SetupOn(one_bucket, {{"w", w}});
  EXPECT_EQ(no_bucket.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_bucket.message().find("there are 1 buckets (0..0)"),
            std::string::npos)
      << no_bucket;
  DdpOptions parameter;
  parameter.testonly_fault = *ParseSyncTestFault("parameter_unreduced:v");
  DdpStrategy no_v(nullptr, parameter);
  const absl::Status unknown = SetupOn(no_v, {{"w", w}});
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("no parameter of that name"),
            std::string::npos)
      << unknown;
}

TEST(Ddp, GradSyncEveryMovesKTimesTheBytesOfLastForCloseParameters) {
  TrainConfig last = DdpConfig();
  last.set_grad_accum(3);
  last.set_grad_sync("last");
  TrainConfig every = last;
  every.set_grad_sync("every");
  DdpOptions last_options = SmallBuckets();
  DdpOptions every_options = SmallBuckets();
  every_options.grad_sync = GradSync::kEvery;
  const std::vector<RankRun> a = Train(last, 2, last_options);
  const std::vector<RankRun> b = Train(every, 2, every_options);
  const int64_t gradient_bytes = a[0].params.size() > 0 ? [&] {
    int64_t bytes = 0;
    for (const at::Tensor& p : a[0].params) bytes += p.numel() * 4;
    return bytes;
  }() : 0;
  for (int rank = 0; rank < 2; ++rank) {
    for (int step = 0; step < last.steps(); ++step) {
      EXPECT_EQ(a[rank].steps[step].grad_syncs(), 1);
      EXPECT_EQ(b[rank].steps[step].grad_syncs(), 3);
      // 2(n-1)/n = 1 for two ranks: one gradient's bytes per sync, exactly.
      EXPECT_EQ(a[rank].steps[step].grad_bytes_sent(), gradient_bytes);
      EXPECT_EQ(a[rank].steps[step].expected_grad_bytes(), gradient_bytes);
      EXPECT_EQ(b[rank].steps[step].grad_bytes_sent(), 3 * gradient_bytes);
      EXPECT_EQ(b[rank].steps[step].expected_grad_bytes(), 3 * gradient_bytes);
      EXPECT_NEAR(a[rank].steps[step].loss(), b[rank].steps[step].loss(),
                  1e-6);
    }
  }
  ExpectAllClose(b[0].params, a[0].params, "parameters");
}

TEST(Ddp, SetupBroadcastsRankZerosParameters) {
  const absl::Status status =
      collective::RunRanksAsThreads(3, [](collective::Communicator& communicator) {
        const float mine = static_cast<float>(communicator.rank() + 1);
        const at::Tensor w = at::full({4, 3}, mine).requires_grad_();
        const at::Tensor b = at::full({7}, -mine).requires_grad_();
        DdpStrategy strategy(&communicator, DdpOptions{});
        ASSERT_TRUE(SetupOn(strategy, {{"w", w}, {"b", b}}).ok());
        EXPECT_TRUE(at::equal(w, at::full({4, 3}, 1.0f)));
        EXPECT_TRUE(at::equal(b, at::full({7}, -1.0f)));
      });
  ASSERT_TRUE(status.ok()) << status;
}

TEST(Ddp, RanksWithDifferentParametersFailSetupNamingTheRank) {
  const absl::Status status =
      collective::RunRanksAsThreads(3, [](collective::Communicator& communicator) {
        // Rank 2 has a differently shaped "w".
        const int64_t rows = communicator.rank() == 2 ? 5 : 4;
        const at::Tensor w = at::zeros({rows, 3}).requires_grad_();
        DdpStrategy strategy(&communicator, DdpOptions{});
        const absl::Status setup = SetupOn(strategy, {{"w", w}});
        EXPECT_EQ(setup.code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_NE(setup.message().find("ddp: rank 2 has 1 parameters (15 "
                                       "elements"),
                  std::string::npos)
            << setup.message();
        EXPECT_NE(setup.message().find("but rank 0 has 1 (12 elements"),
                  std::string::npos)
            << setup.message();
      });
  ASSERT_TRUE(status.ok()) << status;
}

TEST(Ddp, NonFiniteLossOnOneRankStopsEveryRankAtThatStepNamingIt) {
  TrainConfig config = DdpConfig();
  config.set_steps(3);
  at::set_num_threads(1);
  const auto data = TensorData(MakeSyntheticSamples(config.seed(), config.vocab_size(),
                                      config.seq_len()));
  std::vector<std::vector<at::Tensor>> before(2), after(2);
  const absl::Status status =
      collective::RunRanksAsThreads(2, [&](collective::Communicator& communicator) {
        const int rank = communicator.rank();
        DdpStrategy strategy(&communicator, SmallBuckets());
        RunComponents faults;
        faults.Add(MakeFaultComponent(
            *ParseFaults("nan:rank=1,step=2", TrainerFaultGrammar()), rank));
        auto trainer = Trainer::Create(config, RankInfo{rank, 2}, &strategy,
                                       data.get(), &faults);
        ASSERT_TRUE(trainer.ok()) << trainer.status();
        ASSERT_TRUE((*trainer)->Step().ok());
        for (const NamedParameter& p : (*trainer)->model().parameters()) {
          before[rank].push_back(p.tensor.detach().clone());
        }
        const absl::StatusOr<StepRecord> stopped = (*trainer)->Step();
        ASSERT_FALSE(stopped.ok());
        EXPECT_EQ(stopped.status().code(), absl::StatusCode::kAborted);
        EXPECT_EQ(stopped.status().message(),
                  "step 2 of 3: the loss is not finite on rank 1 (nan) and "
                  "the gradient norm (nan) is not finite (injected by "
                  "--fault=nan:rank=1,step=2); every rank stopped before "
                  "the optimizer update");
        EXPECT_EQ((*trainer)->completed_steps(), 1);
        for (const NamedParameter& p : (*trainer)->model().parameters()) {
          after[rank].push_back(p.tensor.detach().clone());
        }
      });
  ASSERT_TRUE(status.ok()) << status;
  for (int rank = 0; rank < 2; ++rank) {
    ExpectAllEqual(after[rank], before[rank], "no update");
  }
  ExpectAllEqual(after[0], after[1], "rank 0 vs rank 1");
}

}  // namespace
}  // namespace mtb
