#include "common/collective/rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb::collective {
namespace {

using ::testing::HasSubstr;

RendezvousOptions Options(int rank, int world_size, int port) {
  RendezvousOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.master_addr = "127.0.0.1";
  options.master_port = port;
  options.connect_timeout = absl::Seconds(30);
  options.collective_timeout = absl::Seconds(30);
  return options;
}

// Runs body(rank) on world_size threads.
void OnThreads(int world_size, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      ScopedThreadLogRank log_rank(rank);
      body(rank);
    });
  }
  for (std::thread& thread : threads) thread.join();
}

TEST(Rendezvous, RankZeroHostsTheTcpStoreAndThreeRanksAllReduce) {
  RendezvousOptions server_options = Options(0, 3, /*port=*/0);
  server_options.is_server = true;
  absl::StatusOr<Store> server = ConnectStore(server_options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = server->tcp_port();
  ASSERT_GT(port, 0);
  EXPECT_EQ(server->DebugString(), "tcp://127.0.0.1:" + std::to_string(port));

  OnThreads(3, [&](int rank) {
    absl::StatusOr<std::unique_ptr<Communicator>> comm =
        rank == 0 ? JoinGroup(*server, Options(0, 3, port))
                  : Rendezvous(Options(rank, 3, port));
    ASSERT_TRUE(comm.ok()) << comm.status();
    EXPECT_EQ((*comm)->rank(), rank);
    EXPECT_EQ((*comm)->world_size(), 3);
    EXPECT_EQ((*comm)->backend(), "gloo");
    EXPECT_EQ((*comm)->device_description(), "hostname 127.0.0.1");
    at::Tensor tensor = at::full({4}, rank + 1, at::kFloat);
    ASSERT_TRUE((*comm)->AllReduce(tensor).ok());
    EXPECT_TRUE(at::equal(tensor, at::full({4}, 6, at::kFloat)));
    ASSERT_TRUE((*comm)->Barrier().ok());  // nobody leaves before the others
  });
}

TEST(Rendezvous, TheTcpStoreSetsChecksAndDeletesKeysUnderAPrefix) {
  // What checkpoints' background saves coordinate through (no collective).
  RendezvousOptions server_options = Options(0, 1, /*port=*/0);
  server_options.is_server = true;
  absl::StatusOr<Store> server = ConnectStore(server_options);
  ASSERT_TRUE(server.ok()) << server.status();
  Store store = server->WithPrefix("group");
  ASSERT_TRUE(store.Set("k", "value").ok());
  EXPECT_TRUE(*store.Check("k"));
  EXPECT_FALSE(*server->Check("k")) << "the prefix is part of the key";
  EXPECT_EQ(*store.Get("k", absl::Seconds(5)), "value");
  EXPECT_TRUE(*store.Delete("k"));
  EXPECT_FALSE(*store.Check("k"));
  EXPECT_FALSE(*store.Delete("k")) << "deleting a missing key is no error";
}

TEST(Rendezvous, KeepRecordsFalseKeepsOnlyTheTotals) {
  const Store store = Store::InProcess(absl::Seconds(30));
  OnThreads(2, [&](int rank) {
    RendezvousOptions options = Options(rank, 2, 1);
    options.keep_records = false;
    absl::StatusOr<std::unique_ptr<Communicator>> comm = JoinGroup(store, options);
    ASSERT_TRUE(comm.ok()) << comm.status();
    at::Tensor tensor = at::ones({4}, at::kFloat);
    ASSERT_TRUE((*comm)->AllReduce(tensor).ok());
    EXPECT_TRUE((*comm)->log().Records().empty());
    EXPECT_EQ((*comm)->log().Totals().calls, 1);
  });
}

TEST(Rendezvous, GroupsWithDistinctNamesShareOneStore) {
  const Store store = Store::InProcess(absl::Seconds(30));
  OnThreads(2, [&](int rank) {
    RendezvousOptions a = Options(rank, 2, 1);
    a.group_name = "a";
    RendezvousOptions b = Options(rank, 2, 1);
    b.group_name = "b";
    absl::StatusOr<std::unique_ptr<Communicator>> first = JoinGroup(store, a);
    ASSERT_TRUE(first.ok()) << first.status();
    absl::StatusOr<std::unique_ptr<Communicator>> second = JoinGroup(store, b);
    ASSERT_TRUE(second.ok()) << second.status();
    at::Tensor x = at::ones({2});
    at::Tensor y = at::full({2}, 10.0);
    ASSERT_TRUE((*first)->AllReduce(x).ok());
    ASSERT_TRUE((*second)->AllReduce(y).ok());
    EXPECT_TRUE(at::equal(x, at::full({2}, 2.0)));
    EXPECT_TRUE(at::equal(y, at::full({2}, 20.0)));
    ASSERT_TRUE((*first)->Barrier().ok());
    ASSERT_TRUE((*second)->Barrier().ok());
  });
}

TEST(Rendezvous, GlooSocketIfnameChoosesTheInterface) {
  ASSERT_EQ(setenv("GLOO_SOCKET_IFNAME", "lo", /*overwrite=*/1), 0);
  const Store store = Store::InProcess(absl::Seconds(30));
  OnThreads(2, [&](int rank) {
    absl::StatusOr<std::unique_ptr<Communicator>> comm =
        JoinGroup(store, Options(rank, 2, 1));
    ASSERT_TRUE(comm.ok()) << comm.status();
    EXPECT_EQ((*comm)->device_description(), "GLOO_SOCKET_IFNAME=lo");
    ASSERT_TRUE((*comm)->Barrier().ok());
  });
  unsetenv("GLOO_SOCKET_IFNAME");
}

TEST(Rendezvous, UnknownInterfaceNamesTheInterface) {
  RendezvousOptions options = Options(0, 1, 1);
  options.gloo_interface = "nosuchif0";
  const auto comm = JoinGroup(Store::InProcess(), options);
  ASSERT_FALSE(comm.ok());
  EXPECT_THAT(std::string(comm.status().message()),
              HasSubstr("gloo device for interface 'nosuchif0'"));
}

// A port with a bound socket that never listens: connections are refused for
// as long as the socket lives, so the client retries until its timeout.
class RefusingPort {
 public:
  RefusingPort() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
        0) {
      ADD_FAILURE() << "bind failed";
    }
    socklen_t length = sizeof(address);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  ~RefusingPort() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(Rendezvous, UnreachableStoreIsDeadlineExceededAfterTheConnectTimeout) {
  RefusingPort refusing;
  RendezvousOptions options = Options(1, 2, refusing.port());
  options.connect_timeout = absl::Seconds(3);
  const absl::Time start = absl::Now();
  const absl::StatusOr<std::unique_ptr<Communicator>> comm =
      Rendezvous(options);
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded)
      << comm.status();
  EXPECT_THAT(std::string(comm.status().message()),
              HasSubstr("rendezvous: connecting to the TCPStore at 127.0.0.1:" +
                        std::to_string(refusing.port()) +
                        " as rank 1 of 2 (connect timeout 3s)"));
  // c10d retries about once a second and stops when the next try would pass
  // the deadline: at least one retry, well within the liveness bound.
  EXPECT_GE(elapsed, absl::Seconds(1));
  EXPECT_LT(elapsed, absl::Seconds(30));
}

// A port that was free a moment ago (the OS's pick for a closed socket).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

TEST(Rendezvous, ClientStartedBeforeTheServerConnectsOnceItListens) {
  const int port = FreePort();
  OnThreads(2, [&](int rank) {
    RendezvousOptions options = Options(rank, 2, port);
    if (rank == 0) {
      absl::SleepFor(absl::Milliseconds(1500));  // the launcher is slow
      options.is_server = true;
    }
    absl::StatusOr<std::unique_ptr<Communicator>> comm = Rendezvous(options);
    ASSERT_TRUE(comm.ok()) << comm.status();
    ASSERT_TRUE((*comm)->Barrier().ok());
  });
}

// A rank waiting for peers says who has joined and who is missing at least
// every wait_progress_every, and the timeout names how many joined.
TEST(Rendezvous, WaitingForMissingPeersReportsProgressAndTheCount) {
  Store store = Store::InProcess(absl::Seconds(10));
  std::vector<std::string> lines[2];
  absl::Status status[2];
  OnThreads(2, [&](int rank) {
    RendezvousOptions options = Options(rank, /*world_size=*/4, 29500);
    options.connect_timeout = absl::Milliseconds(1200);
    options.wait_progress_every = absl::Milliseconds(200);
    Store group = store.WithPrefix("world");
    status[rank] = WaitForPeers(group, options, [&, rank](const std::string& line) {
      lines[rank].push_back(line);
    });
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(status[rank].code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(std::string(status[rank].message()),
                HasSubstr("2 of 4 ranks joined (0, 1); missing 2, 3"));
    EXPECT_THAT(std::string(status[rank].message()),
                HasSubstr("--connect_timeout"));
    // 1.2 s at one line per 0.2 s: at least 3 even on a loaded machine.
    ASSERT_GE(lines[rank].size(), 3u) << rank;
    EXPECT_THAT(lines[rank].back(),
                HasSubstr(absl::StrCat("rank ", rank, " waiting for peers")));
    EXPECT_THAT(lines[rank].back(),
                HasSubstr("2 of 4 ranks joined (0, 1); missing 2, 3"));
  }
}

TEST(Rendezvous, WaitForPeersReturnsOnceEveryRankHasJoined) {
  Store store = Store::InProcess(absl::Seconds(10));
  absl::Status status[3];
  OnThreads(3, [&](int rank) {
    if (rank == 2) absl::SleepFor(absl::Milliseconds(300));
    RendezvousOptions options = Options(rank, 3, 29500);
    options.connect_timeout = absl::Seconds(20);
    Store group = store.WithPrefix("world");
    status[rank] = WaitForPeers(group, options);
  });
  for (const absl::Status& s : status) EXPECT_TRUE(s.ok()) << s;
}

TEST(Rendezvous, OptionsAreValidatedWithTheRule) {
  RendezvousOptions options = Options(2, 2, 29500);
  EXPECT_THAT(std::string(ValidateRendezvousOptions(options).message()),
              HasSubstr("rank 2 is not in [0, world_size 2)"));
  options = Options(0, 2, 0);
  EXPECT_THAT(std::string(ValidateRendezvousOptions(options).message()),
              HasSubstr("master_port 0 is not in [1, 65535] (0 only when "
                        "hosting the store)"));
  options = Options(0, 2, 29500);
  options.collective_timeout = absl::ZeroDuration();
  EXPECT_EQ(ValidateRendezvousOptions(options).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateRendezvousOptions(Options(1, 2, 29500)).ok());
}

}  // namespace
}  // namespace mtb::collective
