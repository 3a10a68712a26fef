// The shared-memory transport through the Communicator, ranks as threads:
// every collective exact on integer patterns at 1-4 ranks in every reducing
// dtype, uneven splits, messages streamed through small slots, both
// all-reduce algorithms; a deliberately misassigned slice caught for each
// algorithm; a hung peer's timeout; transport selection by host identity.
#include <atomic>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/collective/communicator.h"
#include "common/collective/test_tensors.h"
#include "common/collective/test_util.h"
#include "gtest/gtest.h"

namespace mtb::collective {
namespace {

// Small slots: every op below streams through many steps.
constexpr int64_t kSlotBytes = 4096;

ThreadRanksOptions ShmOptions() {
  ThreadRanksOptions options;
  options.transport = Transport::kShm;
  options.shm_slot_bytes = kSlotBytes;
  options.timeout = absl::Seconds(60);
  return options;
}

// Rank r's element i: (i % 13) + 16 r. Sums over 4 ranks stay below 256, so
// they are exact in bfloat16 too.
at::Tensor Pattern(int64_t numel, int rank, at::ScalarType dtype) {
  return at::arange(numel, at::kLong).remainder(13).add(16 * rank).to(dtype);
}

// The sum of Pattern over n ranks.
at::Tensor PatternSum(int64_t numel, int n, at::ScalarType dtype) {
  return at::arange(numel, at::kLong).remainder(13).mul(n).add(16 * n * (n - 1) / 2).to(dtype);
}

std::string LastAlgorithm(Communicator& comm) {
  const std::vector<CollectiveRecord> records = comm.log().Records();
  return records.empty() ? "" : records.back().algorithm;
}

struct Case {
  int world_size;
  at::ScalarType dtype;
};

class ShmEveryOp : public ::testing::TestWithParam<Case> {};

TEST_P(ShmEveryOp, IsExactOnIntegerPatterns) {
  const int n = GetParam().world_size;
  const at::ScalarType dtype = GetParam().dtype;
  ASSERT_TRUE(
      RunRanksAsThreads(
          n,
          [&](Communicator& comm) {
            const int r = comm.rank();
            EXPECT_EQ(comm.transport(), "shm");
            // All-reduce: naive (small) and sliced (> 256 KiB), an
            // element count no world size divides.
            for (int64_t numel : {int64_t{1}, int64_t{1001}, int64_t{70001}}) {
              at::Tensor tensor = Pattern(numel, r, dtype);
              ASSERT_TRUE(comm.AllReduce(tensor).ok());
              ExpectEqual(tensor, PatternSum(numel, n, dtype));
              EXPECT_TRUE(absl::StartsWith(LastAlgorithm(comm), "shm_allreduce_"));
            }
            at::Tensor maximum = Pattern(777, r, dtype);
            ASSERT_TRUE(comm.AllReduce(maximum, ReduceOp::kMax).ok());
            ExpectEqual(maximum, Pattern(777, n - 1, dtype));
            // Reduce-scatter: rank r gets block r of the sum.
            const int64_t k = 1537;
            at::Tensor rs_out = at::empty({k}, Pattern(1, 0, dtype).options());
            ASSERT_TRUE(comm.ReduceScatter(Pattern(n * k, r, dtype), rs_out).ok());
            ExpectEqual(rs_out, PatternSum(n * k, n, dtype).narrow(0, r * k, k));
            // Reduce-scatter-v, uneven with an empty block.
            std::vector<int64_t> counts;
            for (int p = 0; p < n; ++p) counts.push_back(p == 1 ? 0 : 300 * p + 7);
            int64_t total = 0, before = 0;
            for (int p = 0; p < n; ++p) {
              if (p < r) before += counts[p];
              total += counts[p];
            }
            at::Tensor rsv_in = Pattern(total * 3, r, dtype).view({total, 3});
            at::Tensor rsv_out = at::empty({counts[r], 3}, rsv_in.options());
            ASSERT_TRUE(comm.ReduceScatterV(rsv_in, rsv_out, counts).ok());
            ExpectEqual(
                rsv_out,
                PatternSum(total * 3, n, dtype).view({total, 3}).narrow(0, before, counts[r]));
            // All-gather (flat), all-gather-v, broadcast.
            at::Tensor ag_out = at::empty({n * k}, rsv_in.options());
            ASSERT_TRUE(comm.AllGather(Pattern(k, r, dtype), ag_out).ok());
            for (int p = 0; p < n; ++p) {
              ExpectEqual(ag_out.narrow(0, p * k, k), Pattern(k, p, dtype));
            }
            at::Tensor agv_out = at::empty({total, 3}, rsv_in.options());
            ASSERT_TRUE(comm.AllGatherV(Pattern(counts[r] * 3, r, dtype).view({counts[r], 3}),
                                        agv_out, counts)
                            .ok());
            int64_t row = 0;
            for (int p = 0; p < n; ++p) {
              ExpectEqual(agv_out.narrow(0, row, counts[p]).reshape({-1}),
                          Pattern(counts[p] * 3, p, dtype));
              row += counts[p];
            }
            at::Tensor broadcast = Pattern(9000, r, dtype);
            ASSERT_TRUE(comm.Broadcast(broadcast, n - 1).ok());
            ExpectEqual(broadcast, Pattern(9000, n - 1, dtype));
            // All-to-all: rank r's block p is Pattern(.., 100 r + p).
            const int64_t rows = 1200;
            std::vector<at::Tensor> send_blocks;
            for (int p = 0; p < n; ++p) send_blocks.push_back(Pattern(rows, r * 4 + p, dtype));
            at::Tensor a2a_out = at::empty({n * rows}, rsv_in.options());
            ASSERT_TRUE(comm.AllToAll(at::cat(send_blocks), a2a_out).ok());
            for (int p = 0; p < n; ++p) {
              ExpectEqual(a2a_out.narrow(0, p * rows, rows), Pattern(rows, p * 4 + r, dtype));
            }
            // All-to-all-v: rank s sends (s + 2 d) * 500 + 1 rows to d
            // (uneven; only rank 0 to itself is small).
            const auto rows_from_to = [](int s, int d) { return (s + 2 * d) * 500 + 1; };
            std::vector<int64_t> send_counts, recv_counts;
            std::vector<at::Tensor> v_blocks;
            for (int p = 0; p < n; ++p) {
              send_counts.push_back(rows_from_to(r, p));
              recv_counts.push_back(rows_from_to(p, r));
              v_blocks.push_back(Pattern(send_counts.back(), r * 4 + p, dtype));
            }
            int64_t recv_total = 0;
            for (int64_t c : recv_counts) recv_total += c;
            at::Tensor v_out = at::empty({recv_total}, rsv_in.options());
            ASSERT_TRUE(comm.AllToAllV(at::cat(v_blocks), v_out, send_counts, recv_counts).ok());
            row = 0;
            for (int p = 0; p < n; ++p) {
              ExpectEqual(v_out.narrow(0, row, recv_counts[p]),
                          Pattern(recv_counts[p], p * 4 + r, dtype));
              row += recv_counts[p];
            }
            ASSERT_TRUE(comm.Barrier().ok());
            EXPECT_EQ(LastAlgorithm(comm), "shm_barrier");
          },
          ShmOptions())
          .ok());
}

INSTANTIATE_TEST_SUITE_P(RanksAndDtypes, ShmEveryOp,
                         ::testing::Values(Case{1, at::kFloat}, Case{2, at::kFloat},
                                           Case{3, at::kFloat}, Case{4, at::kFloat},
                                           Case{3, at::kBFloat16}, Case{2, at::kDouble},
                                           Case{4, at::kInt}, Case{3, at::kLong},
                                           Case{2, at::kHalf}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return absl::StrCat(info.param.world_size, "Ranks",
                                               std::string(c10::toString(info.param.dtype)));
                         });

// Streaming at chunk boundaries: sizes one element below, at and above a
// slot (or sub-slot) and several slots, in place and out of place, with the
// fewest slots the pipelined loop allows (2, the default: the next chunk's
// copy-in uses the other slot) and 8 (a broadcast's root runs further
// ahead). All-reduce and broadcast are pipelined, the other ops are not: one
// rank's sequence mixes both, so their steps must stay numbered alike.
struct StreamCase {
  int world_size;
  int slots;
};

class ShmStreaming : public ::testing::TestWithParam<StreamCase> {};

TEST_P(ShmStreaming, IsExactAcrossChunkBoundaries) {
  const int n = GetParam().world_size;
  ThreadRanksOptions options = ShmOptions();
  options.shm_slots = GetParam().slots;
  constexpr int64_t kSlotFloats = kSlotBytes / 4;
  ASSERT_TRUE(
      RunRanksAsThreads(
          n,
          [&](Communicator& comm) {
            const int r = comm.rank();
            // All-reduce: naive (<= 256 KiB) over 1, 2 and 3 chunks; sliced
            // over 64 chunks and one element more.
            for (int64_t numel : {kSlotFloats - 1, kSlotFloats, kSlotFloats + 1,
                                  3 * kSlotFloats - 1, int64_t{65536} + 1,
                                  int64_t{65536} + kSlotFloats + 3}) {
              at::Tensor tensor = Pattern(numel, r, at::kFloat);
              ASSERT_TRUE(comm.AllReduce(tensor).ok());
              ExpectEqual(tensor, PatternSum(numel, n, at::kFloat));
            }
            // Reduce-scatter: blocks of one sub-slot (slot / n) and around
            // it, out of place and in place (the output is the input's own
            // block).
            const int64_t sub = kSlotFloats / n;
            for (int64_t k : {sub - 1, sub, sub + 1, 5 * sub + 7}) {
              at::Tensor input = Pattern(n * k, r, at::kFloat);
              at::Tensor out = at::empty({k});
              ASSERT_TRUE(comm.ReduceScatter(input, out).ok());
              ExpectEqual(out, PatternSum(n * k, n, at::kFloat).narrow(0, r * k, k));
              at::Tensor in_place = Pattern(n * k, r, at::kFloat);
              at::Tensor own = in_place.narrow(0, r * k, k);
              ASSERT_TRUE(comm.ReduceScatter(in_place, own).ok());
              ExpectEqual(own, PatternSum(n * k, n, at::kFloat).narrow(0, r * k, k));
            }
            // All-gather: blocks of a slot and around it, out of place and
            // in place (the input is this rank's block of the output).
            for (int64_t k : {kSlotFloats - 1, kSlotFloats, kSlotFloats + 1, 3 * kSlotFloats + 5}) {
              at::Tensor out = at::empty({n * k});
              ASSERT_TRUE(comm.AllGather(Pattern(k, r, at::kFloat), out).ok());
              at::Tensor in_place = at::full({n * k}, -1.0f);
              in_place.narrow(0, r * k, k).copy_(Pattern(k, r, at::kFloat));
              ASSERT_TRUE(comm.AllGather(in_place.narrow(0, r * k, k), in_place).ok());
              for (int p = 0; p < n; ++p) {
                ExpectEqual(out.narrow(0, p * k, k), Pattern(k, p, at::kFloat));
                ExpectEqual(in_place.narrow(0, p * k, k), Pattern(k, p, at::kFloat));
              }
            }
            // Broadcast: bytes around a slot and many slots, not a multiple
            // of 4 or 64, from every root.
            for (int64_t bytes : {kSlotBytes - 1, kSlotBytes, kSlotBytes + 1, 9 * kSlotBytes + 13}) {
              for (int root = 0; root < n; ++root) {
                at::Tensor tensor = Pattern(bytes, r, at::kByte);
                ASSERT_TRUE(comm.Broadcast(tensor, root).ok());
                ExpectEqual(tensor, Pattern(bytes, root, at::kByte));
              }
            }
            // All-to-all-v: blocks around a sub-slot (slot / n, 64-byte
            // aligned) in bytes; rank 0's block to itself is the largest
            // (it streams beside the others), and only the last rank sends
            // many sub-slots, so the others learn the step count from it.
            const int64_t a2a_sub = kSlotBytes / n / 64 * 64;
            const auto bytes_from_to = [&](int s, int d) -> int64_t {
              if (s == 0 && d == 0) return 7 * a2a_sub + 3;
              if (s == n - 1 && d != s) return 4 * a2a_sub + 1;
              return a2a_sub + (s + d) % 3 - 1;
            };
            std::vector<int64_t> send_counts, recv_counts;
            std::vector<at::Tensor> blocks;
            for (int p = 0; p < n; ++p) {
              send_counts.push_back(bytes_from_to(r, p));
              recv_counts.push_back(bytes_from_to(p, r));
              blocks.push_back(Pattern(send_counts.back(), r * 4 + p, at::kByte));
            }
            int64_t recv_total = 0;
            for (int64_t c : recv_counts) recv_total += c;
            at::Tensor out = at::empty({recv_total}, at::kByte);
            ASSERT_TRUE(comm.AllToAllV(at::cat(blocks), out, send_counts, recv_counts).ok());
            int64_t at_byte = 0;
            for (int p = 0; p < n; ++p) {
              ExpectEqual(out.narrow(0, at_byte, recv_counts[p]),
                          Pattern(recv_counts[p], p * 4 + r, at::kByte));
              at_byte += recv_counts[p];
            }
          },
          options)
          .ok());
}

INSTANTIATE_TEST_SUITE_P(RanksAndSlots, ShmStreaming,
                         ::testing::Values(StreamCase{2, 2}, StreamCase{2, 8}, StreamCase{4, 2},
                                           StreamCase{4, 8}),
                         [](const ::testing::TestParamInfo<StreamCase>& info) {
                           return absl::StrCat(info.param.world_size, "Ranks", info.param.slots,
                                               "Slots");
                         });

TEST(ShmCollectives, FewerThanTwoSlotsIsRefused) {
  ThreadRanksOptions options = ShmOptions();
  options.shm_slots = 1;
  const absl::Status status = RunRanksAsThreads(1, [](Communicator&) {}, options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "shm_slots must be at least 2")) << status;
}

TEST(ShmCollectives, AsyncCollectivesCompleteInIssueOrderWithCorrectResults) {
  ASSERT_TRUE(RunRanksAsThreads(
                  3,
                  [](Communicator& comm) {
                    std::vector<at::Tensor> tensors;
                    std::vector<CollectiveHandle> handles;
                    for (int i = 0; i < 8; ++i) {
                      tensors.push_back(Pattern(5000 + 1000 * i, comm.rank() + i, at::kFloat));
                      handles.push_back(comm.AllReduceAsync(tensors.back()));
                    }
                    for (int i = 7; i >= 0; --i) ASSERT_TRUE(handles[i].Wait().ok());
                    for (int i = 0; i < 8; ++i) {
                      // sum over r of (x + 16 (r + i)) = PatternSum + 48 i.
                      ExpectEqual(tensors[i],
                                  PatternSum(5000 + 1000 * i, 3, at::kFloat).add(48 * i));
                    }
                  },
                  ShmOptions())
                  .ok());
}

// Each algorithm with the test-only fault: the results must differ from the
// closed form on some rank. Guards the exactness test above against an
// algorithm whose slices never mattered.
TEST(ShmCollectives, MisassignedSlicesAreCaughtForEveryAlgorithm) {
  ThreadRanksOptions options = ShmOptions();
  options.testonly_shm_misassign_slices = true;
  const int n = 3;
  std::atomic<int> naive_wrong{0}, sliced_wrong{0}, rs_wrong{0}, ag_wrong{0}, bc_wrong{0},
      a2a_wrong{0};
  ASSERT_TRUE(
      RunRanksAsThreads(
          n,
          [&](Communicator& comm) {
            const int r = comm.rank();
            const auto differs = [](const at::Tensor& a, const at::Tensor& b) {
              return !at::equal(a, b);
            };
            at::Tensor naive = Pattern(100, r, at::kFloat);
            ASSERT_TRUE(comm.AllReduce(naive).ok());
            EXPECT_EQ(LastAlgorithm(comm), "shm_allreduce_naive");
            naive_wrong += differs(naive, PatternSum(100, n, at::kFloat));
            at::Tensor sliced = Pattern(100000, r, at::kFloat);
            ASSERT_TRUE(comm.AllReduce(sliced).ok());
            EXPECT_EQ(LastAlgorithm(comm), "shm_allreduce_sliced");
            sliced_wrong += differs(sliced, PatternSum(100000, n, at::kFloat));
            at::Tensor rs = at::empty({500});
            ASSERT_TRUE(comm.ReduceScatter(Pattern(n * 500, r, at::kFloat), rs).ok());
            rs_wrong += differs(rs, PatternSum(n * 500, n, at::kFloat).narrow(0, r * 500, 500));
            at::Tensor ag = at::empty({n * 500});
            ASSERT_TRUE(comm.AllGather(at::full({500}, r, at::kFloat), ag).ok());
            ag_wrong += differs(ag, at::arange(n, at::kFloat).repeat_interleave(500));
            at::Tensor bc = Pattern(600, r, at::kFloat);
            ASSERT_TRUE(comm.Broadcast(bc, 0).ok());
            bc_wrong += differs(bc, Pattern(600, 0, at::kFloat));
            at::Tensor a2a_in = at::arange(n, at::kFloat).add(10 * r).repeat_interleave(400);
            at::Tensor a2a = at::empty_like(a2a_in);
            ASSERT_TRUE(comm.AllToAll(a2a_in, a2a).ok());
            a2a_wrong +=
                differs(a2a, at::arange(n, at::kFloat).mul(10).add(r).repeat_interleave(400));
          },
          options)
          .ok());
  EXPECT_GT(naive_wrong.load(), 0);
  EXPECT_GT(sliced_wrong.load(), 0);
  EXPECT_GT(rs_wrong.load(), 0);
  EXPECT_GT(ag_wrong.load(), 0);
  EXPECT_GT(bc_wrong.load(), 0);
  EXPECT_GT(a2a_wrong.load(), 0);
}

// The same forensics as a Gloo collective: the flight recorder holds the
// failed collective with its algorithm, the tool's position and the error.
TEST(ShmCollectives, HungPeerIsDeadlineExceededNamingItInTheFlightRecorder) {
  ThreadRanksOptions options = ShmOptions();
  options.timeout = absl::Seconds(1);
  ASSERT_TRUE(RunRanksAsThreads(
                  2,
                  [](Communicator& comm) {
                    if (comm.rank() == 1) return;  // never issues the all-reduce
                    comm.flight_recorder().SetPosition(3, "backward");
                    at::Tensor tensor = at::ones({64});
                    const absl::Status status = comm.AllReduce(tensor);
                    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
                    EXPECT_TRUE(absl::StrContains(
                        status.message(),
                        "all_reduce #0 (float32, 64 elements) on rank 0 of 2 failed after "
                        "timeout 1s: shm: timed out waiting for rank 1"))
                        << status;
                    const FlightRecorderDump dump = comm.flight_recorder().Snapshot("test");
                    ASSERT_EQ(dump.entries_size(), 1);
                    EXPECT_EQ(dump.entries(0).state(), "failed");
                    EXPECT_EQ(dump.entries(0).algorithm(), "shm_allreduce_naive");
                    EXPECT_EQ(dump.entries(0).phase(), "backward");
                    EXPECT_TRUE(absl::StrContains(dump.entries(0).error(), "shm: timed out"));
                    EXPECT_TRUE(absl::StrContains(dump.first_failure(), "all_reduce #0"));
                    EXPECT_EQ(comm.Barrier().code(), absl::StatusCode::kFailedPrecondition);
                  },
                  options)
                  .ok());
}

TEST(ShmCollectives, TcpTransportKeepsGlooWhateverTheHosts) {
  ThreadRanksOptions options;
  options.transport = Transport::kTcp;
  ASSERT_TRUE(RunRanksAsThreads(
                  2,
                  [](Communicator& comm) {
                    EXPECT_EQ(comm.transport(), "tcp");
                    at::Tensor tensor = at::ones({8});
                    ASSERT_TRUE(comm.AllReduce(tensor).ok());
                    EXPECT_TRUE(absl::StartsWith(LastAlgorithm(comm), "gloo_"));
                  },
                  options)
                  .ok());
}

// Ranks on different "hosts" (host identities overridden; hosts interleaved
// so a host's ranks are not contiguous): all_reduce, reduce_scatter(v) and
// all_gather(v) go through shared memory within each host and Gloo among the
// hosts' leaders, exactly; the other ops keep Gloo.
struct HostCase {
  int world_size;
  int hosts;
  at::ScalarType dtype;
};

class ShmHierarchical : public ::testing::TestWithParam<HostCase> {};

TEST_P(ShmHierarchical, IsExactAndSaysSo) {
  const int n = GetParam().world_size;
  const at::ScalarType dtype = GetParam().dtype;
  ThreadRanksOptions options = ShmOptions();
  options.transport = Transport::kAuto;
  const int hosts = GetParam().hosts;
  options.host_id = [hosts](int rank) { return absl::StrCat("host", rank % hosts); };
  ASSERT_TRUE(
      RunRanksAsThreads(
          n,
          [&](Communicator& comm) {
            const int r = comm.rank();
            EXPECT_EQ(comm.transport(), "shm+tcp");
            for (int64_t numel : {int64_t{1001}, int64_t{70001}}) {
              at::Tensor tensor = Pattern(numel, r, dtype);
              ASSERT_TRUE(comm.AllReduce(tensor).ok());
              ExpectEqual(tensor, PatternSum(numel, n, dtype));
              EXPECT_TRUE(absl::StartsWith(LastAlgorithm(comm), "hierarchical(shm_allreduce_"))
                  << LastAlgorithm(comm);
            }
            const int64_t k = 1537;
            at::Tensor rs_out = at::empty({k}, Pattern(1, 0, dtype).options());
            ASSERT_TRUE(comm.ReduceScatter(Pattern(n * k, r, dtype), rs_out).ok());
            ExpectEqual(rs_out, PatternSum(n * k, n, dtype).narrow(0, r * k, k));
            EXPECT_TRUE(absl::StartsWith(LastAlgorithm(comm), "hierarchical("));
            std::vector<int64_t> counts;
            for (int p = 0; p < n; ++p) counts.push_back(p == 1 ? 0 : 300 * p + 7);
            int64_t total = 0;
            for (int64_t c : counts) total += c;
            at::Tensor agv_out = at::empty({total, 3}, rs_out.options());
            ASSERT_TRUE(comm.AllGatherV(Pattern(counts[r] * 3, r, dtype).view({counts[r], 3}),
                                        agv_out, counts)
                            .ok());
            EXPECT_TRUE(absl::StartsWith(LastAlgorithm(comm), "hierarchical("));
            int64_t row = 0;
            for (int p = 0; p < n; ++p) {
              ExpectEqual(agv_out.narrow(0, row, counts[p]).reshape({-1}),
                          Pattern(counts[p] * 3, p, dtype));
              row += counts[p];
            }
            at::Tensor broadcast = Pattern(900, r, dtype);
            ASSERT_TRUE(comm.Broadcast(broadcast, n - 1).ok());
            ExpectEqual(broadcast, Pattern(900, n - 1, dtype));
            EXPECT_TRUE(absl::StartsWith(LastAlgorithm(comm), "gloo_"));
            ASSERT_TRUE(comm.Barrier().ok());
          },
          options)
          .ok());
}

INSTANTIATE_TEST_SUITE_P(Hosts, ShmHierarchical,
                         ::testing::Values(HostCase{4, 2, at::kFloat},
                                           HostCase{3, 2, at::kBFloat16},
                                           HostCase{3, 3, at::kLong}),
                         [](const ::testing::TestParamInfo<HostCase>& info) {
                           return absl::StrCat(info.param.world_size, "RanksOn", info.param.hosts,
                                               "Hosts",
                                               std::string(c10::toString(info.param.dtype)));
                         });

TEST(ShmCollectives, ParseTransportNamesTheChoices) {
  EXPECT_EQ(*ParseTransport("shm"), Transport::kShm);
  EXPECT_EQ(*ParseTransport("tcp"), Transport::kTcp);
  EXPECT_EQ(*ParseTransport("auto"), Transport::kAuto);
  const absl::StatusOr<Transport> bad = ParseTransport("ib");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "expected auto, shm or tcp"));
}

}  // namespace
}  // namespace mtb::collective
