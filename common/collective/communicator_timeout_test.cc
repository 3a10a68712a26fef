// A hung peer becomes kDeadlineExceeded naming the collective, its sequence
// number, the rank and the timeout, and the communicator refuses every later
// call. Timeouts are short (1 s); the liveness bound is 10x that, and nothing
// checks a tight timing.
//
// The rank that "hangs" stays alive (blocked on a latch) until its peers have
// seen their errors: if it returned, its connections would close and the
// peers could see a lost peer (kUnavailable) instead of a timeout.
#include <cstdlib>
#include <string>

#include "ATen/ATen.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "common/collective/communicator.h"
#include "common/collective/test_util.h"
#include "common/results/json_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb::collective {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(1);
constexpr absl::Duration kLivenessBound = absl::Seconds(10);

// Decrements `counter` when it goes out of scope, whatever assertion failed.
class CountDownOnExit {
 public:
  explicit CountDownOnExit(absl::BlockingCounter& counter)
      : counter_(counter) {}
  ~CountDownOnExit() { counter_.DecrementCount(); }

 private:
  absl::BlockingCounter& counter_;
};

void ExpectTimeoutThenRefusal(Communicator& comm, const absl::Status& status,
                              absl::Duration elapsed,
                              const std::string& collective) {
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr(collective + " on rank " + std::to_string(comm.rank()) +
                        " of " + std::to_string(comm.world_size()) +
                        " failed after timeout 1s: "));
  EXPECT_LT(elapsed, kLivenessBound);
  EXPECT_GE(elapsed, kTimeout / 2);

  const absl::Status later = comm.AllReduce(at::ones({2}));
  EXPECT_EQ(later.code(), absl::StatusCode::kFailedPrecondition) << later;
  EXPECT_THAT(std::string(later.message()), HasSubstr("unusable"));
  EXPECT_THAT(std::string(later.message()), HasSubstr(collective));
  EXPECT_EQ(comm.health(), status);

  const CollectiveRecord record = comm.log().Records().back();
  EXPECT_TRUE(record.completed);
  EXPECT_EQ(record.status, status);
}

TEST(CommunicatorTimeout, HungPeerInAllReduceIsDeadlineExceededThenRefusal) {
  ThreadRanksOptions options;
  options.timeout = kTimeout;
  absl::BlockingCounter waiting_ranks(2);
  const absl::Status run = RunRanksAsThreads(
      3,
      [&](Communicator& comm) {
        ASSERT_TRUE(comm.AllReduce(at::ones({12})).ok());  // #0: all ranks
        if (comm.rank() == 2) {
          waiting_ranks.Wait();  // never calls #1
          return;
        }
        CountDownOnExit done(waiting_ranks);
        const absl::Time start = absl::Now();
        const absl::Status status = comm.AllReduce(at::ones({12}));
        ExpectTimeoutThenRefusal(comm, status, absl::Now() - start,
                                 "all_reduce #1 (float32, 12 elements)");
      },
      options);
  ASSERT_TRUE(run.ok()) << run;
}

TEST(CommunicatorTimeout, HungPeerInAsyncAllReduceFailsAtWait) {
  ThreadRanksOptions options;
  options.timeout = kTimeout;
  absl::BlockingCounter waiting_ranks(1);
  const absl::Status run = RunRanksAsThreads(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) {
          waiting_ranks.Wait();
          return;
        }
        CountDownOnExit done(waiting_ranks);
        const absl::Time start = absl::Now();
        CollectiveHandle handle =
            comm.AllReduceAsync(at::ones({5}, at::kDouble));
        const absl::Status status = handle.Wait();
        ExpectTimeoutThenRefusal(comm, status, absl::Now() - start,
                                 "all_reduce #0 (float64, 5 elements)");
        EXPECT_TRUE(handle.IsCompleted());
        EXPECT_EQ(handle.Wait(), status);  // the same status again
      },
      options);
  ASSERT_TRUE(run.ok()) << run;
}

// The send/recv algorithms run on threads of their own: a hung peer must
// still surface at Wait() as the collective's timeout.
TEST(CommunicatorTimeout, HungPeerInChunkedReduceScatterAndDirectAllGather) {
  for (const bool reduce_scatter : {true, false}) {
    SCOPED_TRACE(reduce_scatter ? "chunked reduce_scatter" : "direct all_gather");
    ThreadRanksOptions options;
    options.timeout = kTimeout;
    options.reduce_scatter_algorithm = ReduceScatterAlgorithm::kChunked;
    options.reduce_scatter_chunk_bytes = 16;
    options.all_gather_algorithm = AllGatherAlgorithm::kDirect;
    absl::BlockingCounter waiting_ranks(1);
    const absl::Status run = RunRanksAsThreads(
        2,
        [&](Communicator& comm) {
          if (comm.rank() == 1) {
            waiting_ranks.Wait();
            return;
          }
          CountDownOnExit done(waiting_ranks);
          const absl::Time start = absl::Now();
          at::Tensor output = at::empty({reduce_scatter ? 8 : 32});
          const absl::Status status =
              reduce_scatter ? comm.ReduceScatter(at::ones({16}), output)
                             : comm.AllGather(at::ones({16}), output);
          ExpectTimeoutThenRefusal(
              comm, status, absl::Now() - start,
              reduce_scatter ? "reduce_scatter #0 (float32, 16 elements)"
                             : "all_gather #0 (float32, 32 elements)");
        },
        options);
    ASSERT_TRUE(run.ok()) << run;
  }
}

// The all-reduce algorithms off c10d's path (Gloo's bcube on the second
// context, our reduce-scatter + all-gather) run on threads of their own too:
// a peer that stops after one successful call (which also built bcube's
// context) surfaces at Wait() as the collective's timeout.
TEST(CommunicatorTimeout, HungPeerInBcubeAndReduceScatterAllGatherAllReduce) {
  for (const AllReduceAlgorithm algorithm :
       {AllReduceAlgorithm::kBcube, AllReduceAlgorithm::kReduceScatterAllGather}) {
    SCOPED_TRACE(std::string(AllReduceAlgorithmName(algorithm)));
    ThreadRanksOptions options;
    options.timeout = kTimeout;
    options.all_reduce_algorithm = algorithm;
    options.reduce_scatter_chunk_bytes = 16;
    absl::BlockingCounter waiting_ranks(1);
    const absl::Status run = RunRanksAsThreads(
        2,
        [&](Communicator& comm) {
          ASSERT_TRUE(comm.AllReduce(at::ones({16})).ok());
          if (comm.rank() == 1) {
            waiting_ranks.Wait();
            return;
          }
          CountDownOnExit done(waiting_ranks);
          const absl::Time start = absl::Now();
          const absl::Status status = comm.AllReduce(at::ones({16}));
          ExpectTimeoutThenRefusal(comm, status, absl::Now() - start,
                                   "all_reduce #1 (float32, 16 elements)");
        },
        options);
    ASSERT_TRUE(run.ok()) << run;
  }
}

TEST(CommunicatorTimeout, SetTimeoutTightensLaterCollectives) {
  ThreadRanksOptions options;
  options.timeout = absl::Minutes(2);  // generous for the "first step"
  absl::BlockingCounter waiting_ranks(1);
  const absl::Status run = RunRanksAsThreads(
      2,
      [&](Communicator& comm) {
        ASSERT_TRUE(comm.AllReduce(at::ones({4})).ok());
        ASSERT_TRUE(comm.SetTimeout(kTimeout).ok());
        if (comm.rank() == 1) {
          waiting_ranks.Wait();
          return;
        }
        CountDownOnExit done(waiting_ranks);
        const absl::Time start = absl::Now();
        at::Tensor tensor = at::ones({3});
        const absl::Status status = comm.Broadcast(tensor, 1);
        ExpectTimeoutThenRefusal(comm, status, absl::Now() - start,
                                 "broadcast #1 (float32, 3 elements, root 1)");
      },
      options);
  ASSERT_TRUE(run.ok()) << run;
}

// Send and recv wait on the gloo transport context, which took its timeout
// when the group was built: SetTimeout reaches it too (before, a pipeline
// stage's receive from a hung stage waited out the start-up timeout).
TEST(CommunicatorTimeout, SetTimeoutTightensALaterRecv) {
  ThreadRanksOptions options;
  options.timeout = absl::Minutes(2);  // generous for the "first step"
  absl::BlockingCounter waiting_ranks(1);
  const absl::Status run = RunRanksAsThreads(
      2,
      [&](Communicator& comm) {
        ASSERT_TRUE(comm.AllReduce(at::ones({4})).ok());
        ASSERT_TRUE(comm.SetTimeout(kTimeout).ok());
        if (comm.rank() == 1) {
          waiting_ranks.Wait();  // never sends
          return;
        }
        CountDownOnExit done(waiting_ranks);
        const absl::Time start = absl::Now();
        at::Tensor tensor = at::empty({3});
        const absl::Status status = comm.Recv(tensor, 1, /*tag=*/3);
        ExpectTimeoutThenRefusal(comm, status, absl::Now() - start,
                                 "recv #1 (float32, 3 elements, from rank 1)");
      },
      options);
  ASSERT_TRUE(run.ok()) << run;
}

TEST(CommunicatorTimeout, HungPeerInHalvingDoublingReduceScatter) {
  ThreadRanksOptions options;
  options.timeout = kTimeout;
  options.reduce_scatter_algorithm = ReduceScatterAlgorithm::kHalvingDoubling;
  absl::BlockingCounter waiting_ranks(1);
  const absl::Status run = RunRanksAsThreads(
      2,
      [&](Communicator& comm) {
        at::Tensor output = at::empty({4});
        // #0 builds the second gloo context on every rank.
        ASSERT_TRUE(comm.ReduceScatter(at::ones({8}), output).ok());
        if (comm.rank() == 1) {
          waiting_ranks.Wait();
          return;
        }
        CountDownOnExit done(waiting_ranks);
        const absl::Time start = absl::Now();
        const absl::Status status = comm.ReduceScatter(at::ones({8}), output);
        ExpectTimeoutThenRefusal(comm, status, absl::Now() - start,
                                 "reduce_scatter #1 (float32, 8 elements)");
      },
      options);
  ASSERT_TRUE(run.ok()) << run;
}

TEST(CommunicatorTimeout, HungPeerInRecvIsDeadlineExceeded) {
  ThreadRanksOptions options;
  options.timeout = kTimeout;
  absl::BlockingCounter waiting_ranks(1);
  const absl::Status run = RunRanksAsThreads(
      2,
      [&](Communicator& comm) {
        if (comm.rank() == 1) {
          waiting_ranks.Wait();  // never sends
          return;
        }
        CountDownOnExit done(waiting_ranks);
        const absl::Time start = absl::Now();
        at::Tensor tensor = at::empty({6});
        const absl::Status status = comm.Recv(tensor, 1, /*tag=*/3);
        ExpectTimeoutThenRefusal(comm, status, absl::Now() - start,
                                 "recv #0 (float32, 6 elements, from rank 1)");
      },
      options);
  ASSERT_TRUE(run.ok()) << run;
}

TEST(CommunicatorTimeout, ATimeoutDumpsTheFlightRecorderNamingTheCollective) {
  ThreadRanksOptions options;
  options.timeout = kTimeout;
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/timeout_dump.json";
  absl::BlockingCounter waiting_ranks(1);
  RankProgress hung;
  const absl::Status run = RunRanksAsThreads(
      2,
      [&](Communicator& comm) {
        comm.flight_recorder().SetPosition(5, "forward");
        ASSERT_TRUE(comm.AllReduce(at::ones({12})).ok());  // #0: both ranks
        if (comm.rank() == 1) {
          waiting_ranks.Wait();  // never calls #1
          hung = comm.flight_recorder().Progress();
          return;
        }
        CountDownOnExit done(waiting_ranks);
        comm.EnableFlightRecorderDumps(path);
        comm.flight_recorder().SetPosition(5, "backward");
        const absl::Status status = comm.AllReduce(at::ones({12}));
        EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
      },
      options);
  ASSERT_TRUE(run.ok()) << run;
  FlightRecorderDump dump;
  ASSERT_TRUE(ReadJsonFile(path, &dump).ok());
  EXPECT_EQ(dump.rank(), 0);
  EXPECT_EQ(dump.world_size(), 2);
  EXPECT_THAT(dump.reason(),
              HasSubstr("communicator broken: all_reduce #1 (float32, 12 "
                        "elements) on rank 0 of 2 failed after timeout 1s"));
  EXPECT_EQ(dump.issued(), 2);
  EXPECT_EQ(dump.last_completed(), 0);
  ASSERT_EQ(dump.entries_size(), 2);
  EXPECT_EQ(dump.entries(0).state(), "completed");
  EXPECT_EQ(dump.entries(1).sequence(), 1);
  EXPECT_EQ(dump.entries(1).state(), "failed");
  EXPECT_EQ(dump.entries(1).phase(), "backward");
  EXPECT_THAT(dump.entries(1).error(), HasSubstr("all_reduce #1"));
  EXPECT_GT(dump.entries(1).issue_time_us(), 0);
  EXPECT_GT(dump.entries(1).wait_return_time_us(), dump.entries(1).issue_time_us());
  // The peer that never issued #1 is in no collective, one behind.
  EXPECT_EQ(hung.collective, -1);
  EXPECT_EQ(hung.issued, 1);
  EXPECT_EQ(hung.last_completed, 0);
  EXPECT_EQ(hung.phase, "forward");
}

}  // namespace
}  // namespace mtb::collective
