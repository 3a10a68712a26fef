// Staging memory of reduce-scatter, counted by the counting CPU allocator in
// real rank processes (the allocator is process-global, so ranks as threads
// would count each other's buffers).
//
// The test spawns two copies of its own binary as ranks 0 and 1
// (MTB_STAGING_TEST_RANK set); each installs the counting allocator, joins a
// group over a TCPStore on 127.0.0.1, and reduce-scatters an 8 MiB input
// (values with a closed-form sum) with each algorithm, measuring the peak of
// live tensor bytes above what was live before the call. The rank prints one
// line per case and exits 0 only when every result is exact and the chunked
// algorithm stayed within its bound: depth (n-1) chunks in place, depth (n-2)
// out of place (none at 2 ranks: the peer's chunks land in the output).
//
// The negative case shows the counter can see staging: the alltoall
// algorithm's full-size temporary (S bytes) must show up in the same figure.
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/collective/communicator.h"
#include "common/collective/rendezvous.h"
#include "common/libtorch/counting_allocator.h"
#include "gtest/gtest.h"

extern char** environ;

namespace mtb::collective {
namespace {

constexpr int kWorldSize = 2;
constexpr int64_t kInputBytes = 8 << 20;  // S
constexpr int64_t kChunkBytes = 64 << 10;
constexpr int kDepth = 3;
constexpr char kRankVariable[] = "MTB_STAGING_TEST_RANK";
constexpr char kPortVariable[] = "MTB_STAGING_TEST_PORT";

// One rank: returns the process exit code.
int RunRank(int rank, int port) {
  InstallCountingCpuAllocator();
  at::set_num_threads(1);
  RendezvousOptions options;
  options.rank = rank;
  options.world_size = kWorldSize;
  options.master_addr = "127.0.0.1";
  options.master_port = port;
  options.is_server = rank == 0;
  options.connect_timeout = absl::Seconds(60);
  options.first_step_timeout = absl::Seconds(60);
  options.collective_timeout = absl::Seconds(60);
  options.reduce_scatter_chunk_bytes = kChunkBytes;
  options.reduce_scatter_depth = kDepth;
  options.transport = Transport::kTcp;  // the Gloo algorithms' staging
  absl::StatusOr<std::unique_ptr<Communicator>> comm = Rendezvous(options);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, comm.status().ToString().c_str());
    return 1;
  }
  const int64_t elements = kInputBytes / 4;
  const int64_t k = elements / kWorldSize;
  // Rank r's input: (r+1) * (i mod 1000); the sum is n(n+1)/2 times that.
  const at::Tensor pattern = at::arange(elements, at::kFloat).fmod_(1000);
  const at::Tensor input = pattern * (rank + 1);
  const at::Tensor expected =
      (pattern * (kWorldSize * (kWorldSize + 1) / 2)).narrow(0, rank * k, k);
  const at::Tensor separate_output = at::empty({k});
  const at::Tensor in_place_input = input.clone();
  bool ok = true;
  struct Case {
    const char* name;
    ReduceScatterAlgorithm algorithm;
    bool in_place;
    int64_t bound;  // staging bytes at most; -1: no bound (the negative case)
  };
  for (const Case& c :
       {Case{"chunked_out_of_place", ReduceScatterAlgorithm::kChunked, false,
             kDepth * (kWorldSize - 2) * kChunkBytes},
        Case{"chunked_in_place", ReduceScatterAlgorithm::kChunked, true,
             kDepth * (kWorldSize - 1) * kChunkBytes},
        Case{"alltoall", ReduceScatterAlgorithm::kAllToAll, false, -1}}) {
    (*comm)->SetReduceScatterAlgorithm(c.algorithm);
    in_place_input.copy_(input);
    const at::Tensor source = c.in_place ? in_place_input : input;
    const at::Tensor output =
        c.in_place ? in_place_input.narrow(0, rank * k, k) : separate_output;
    if (!c.in_place) output.fill_(-1);
    const int64_t before = CpuMemory().current_bytes;
    ResetCpuPeak();
    const absl::Status status = (*comm)->ReduceScatter(source, output);
    const int64_t staging = CpuMemory().peak_bytes - before;
    const bool exact = status.ok() && at::equal(output, expected);
    ok = ok && exact;
    std::printf("rank %d %s staging_bytes=%lld exact=%d %s\n", rank, c.name,
                static_cast<long long>(staging), exact ? 1 : 0,
                status.ToString().c_str());
    if (c.bound >= 0 && staging > c.bound) ok = false;
  }
  std::fflush(stdout);
  return ok ? 0 : 1;
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), length);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

std::string TempDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

std::string ReadFile(const std::string& path) {
  std::string text;
  if (FILE* file = std::fopen(path.c_str(), "r")) {
    char buffer[4096];
    size_t got;
    while ((got = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
      text.append(buffer, got);
    }
    std::fclose(file);
  }
  return text;
}

// Rank `rank` as a child process writing to <tmp>/rank<rank>.out.
pid_t SpawnRank(int rank, int port, const std::string& out_path) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) env.push_back(*entry);
  env.push_back(absl::StrCat(kRankVariable, "=", rank));
  env.push_back(absl::StrCat(kPortVariable, "=", port));
  std::vector<char*> envp;
  for (std::string& line : env) envp.push_back(line.data());
  envp.push_back(nullptr);
  char self[] = "/proc/self/exe";
  char* argv[] = {self, nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, self, &actions, nullptr, argv, envp.data()), 0);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// The staging figure a rank printed for `algorithm`; -1 when missing.
int64_t StagingBytes(const std::string& text, int rank,
                     const std::string& algorithm) {
  const std::string key =
      absl::StrCat("rank ", rank, " ", algorithm, " staging_bytes=");
  const size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + key.size()));
}

TEST(ReduceScatterStaging, ChunkedStagingIsBoundedByTheChunkInRealProcesses) {
  const int port = FreePort();
  std::vector<pid_t> pids;
  std::vector<std::string> outputs;
  for (int rank = 0; rank < kWorldSize; ++rank) {
    outputs.push_back(absl::StrCat(TempDir(), "/rank", rank, ".out"));
    pids.push_back(SpawnRank(rank, port, outputs.back()));
  }
  for (int rank = 0; rank < kWorldSize; ++rank) {
    int status = 0;
    ASSERT_EQ(::waitpid(pids[rank], &status, 0), pids[rank]);
    const std::string text = ReadFile(outputs[rank]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;
    // Chunked in place: depth slots of one peer chunk (3 x 64 KiB) against
    // an 8 MiB input; the counter sees them (> 0).
    const int64_t in_place = StagingBytes(text, rank, "chunked_in_place");
    EXPECT_LE(in_place, kDepth * (kWorldSize - 1) * kChunkBytes) << text;
    EXPECT_GT(in_place, 0) << text;
    EXPECT_TRUE(absl::StrContains(
        text, absl::StrCat("rank ", rank, " chunked_in_place staging_bytes=",
                           in_place, " exact=1 OK")))
        << text;
    // Out of place at 2 ranks the peer's chunks land in the output: nothing
    // staged at all.
    const int64_t out_of_place = StagingBytes(text, rank, "chunked_out_of_place");
    EXPECT_EQ(out_of_place, 0) << text;
    EXPECT_TRUE(absl::StrContains(
        text, absl::StrCat("rank ", rank, " chunked_out_of_place staging_bytes=0",
                           " exact=1 OK")))
        << text;
    // Alltoall: its temporary is the whole input, so the counter must see
    // at least S: the figure above is not blind to staging.
    const int64_t alltoall_staging = StagingBytes(text, rank, "alltoall");
    EXPECT_GE(alltoall_staging, kInputBytes) << text;
    EXPECT_TRUE(absl::StrContains(
        text, absl::StrCat("rank ", rank, " alltoall staging_bytes=",
                           alltoall_staging, " exact=1 OK")))
        << text;
  }
}

}  // namespace
}  // namespace mtb::collective

int main(int argc, char** argv) {
  if (const char* rank = std::getenv(mtb::collective::kRankVariable)) {
    return mtb::collective::RunRank(
        std::atoi(rank), std::atoi(std::getenv(mtb::collective::kPortVariable)));
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
