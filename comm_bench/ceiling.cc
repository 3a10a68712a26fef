// Loopback TCP and memcpy ceilings (ceiling.h). Vocabulary: a *shape* is who
// sends to whom (one way, both ways, every peer); a *round* moves `bytes` per
// (sender, receiver) pair once; each process times its own round from its
// start until all its sends and receives are done, and reports it through a
// pipe. Connections are made before the first round and kept.
#include "comm_bench/ceiling.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/stats.h"

namespace mtb::comm_bench {
namespace {

// How far above its ceiling a row may measure before the ceiling is called
// invalid: timing noise between two separate measurements.
constexpr double kCeilingSlack = 1.1;

constexpr int64_t kIoBytes = 4 << 20;

bool WriteAll(int fd, const char* data, int64_t size) {
  while (size > 0) {
    const ssize_t done = ::write(fd, data, std::min(size, kIoBytes));
    if (done <= 0) return false;
    data += done;
    size -= done;
  }
  return true;
}

bool ReadAll(int fd, char* data, int64_t size) {
  while (size > 0) {
    const ssize_t done = ::read(fd, data, std::min(size, kIoBytes));
    if (done <= 0) return false;
    data += done;
    size -= done;
  }
  return true;
}

int Listen(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    return -1;
  }
  port = ntohs(address.sin_port);
  return fd;
}

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One process of a shape: connects to every peer (lower ranks accept), then
// runs the rounds; writes one double per round (bytes per second this process
// moved: max of sent and received) to `report`. Returns the exit code.
int RunProcess(int rank, int world_size, bool everyone_sends,
               const std::vector<int>& listen_fds, const std::vector<int>& ports,
               int64_t bytes, int rounds, int report) {
  std::vector<int> peer_fd(world_size, -1);
  for (int p = 0; p < world_size; ++p) {
    if (p == rank) continue;
    if (p < rank) {
      peer_fd[p] = Connect(ports[p]);
      const int32_t me = rank;
      if (peer_fd[p] < 0 || !WriteAll(peer_fd[p], reinterpret_cast<const char*>(&me), 4)) return 1;
    } else {
      const int fd = ::accept(listen_fds[rank], nullptr, nullptr);
      int32_t who = -1;
      if (fd < 0 || !ReadAll(fd, reinterpret_cast<char*>(&who), 4) || who < 0 ||
          who >= world_size) {
        return 1;
      }
      peer_fd[who] = fd;
    }
  }
  const bool sends = everyone_sends || rank == 0;
  const bool receives = everyone_sends || rank != 0;
  std::vector<char> send_buffer(bytes, static_cast<char>(rank));
  std::vector<std::vector<char>> recv_buffers(world_size);
  for (int p = 0; p < world_size; ++p) {
    if (p != rank && receives) recv_buffers[p].assign(bytes, 0);
  }
  for (int round = 0; round < rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    bool ok = true;
    std::vector<char> results(2 * world_size, 1);
    for (int p = 0; p < world_size; ++p) {
      if (p == rank) continue;
      if (sends && (everyone_sends || p != 0)) {
        threads.emplace_back([&, p] {
          results[2 * p] = WriteAll(peer_fd[p], send_buffer.data(), bytes);
        });
      }
      if (receives && (everyone_sends || p == 0)) {
        threads.emplace_back([&, p] {
          results[2 * p + 1] = ReadAll(peer_fd[p], recv_buffers[p].data(), bytes);
        });
      }
    }
    for (std::thread& thread : threads) thread.join();
    for (char result : results) ok = ok && result;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (!ok) return 1;
    const int peers_sent_to = sends ? (everyone_sends ? world_size - 1 : 1) : 0;
    const int peers_heard = receives ? (everyone_sends ? world_size - 1 : 1) : 0;
    const double rate =
        std::max(peers_sent_to, peers_heard) * static_cast<double>(bytes) /
        seconds;
    if (::write(report, &rate, sizeof(rate)) != sizeof(rate)) return 1;
  }
  for (int fd : peer_fd) {
    if (fd >= 0) ::close(fd);
  }
  return 0;
}

struct ShapeResult {
  double median = 0, min = 0, max = 0;
};

// Forks world_size processes for one shape and collects, per round, the
// slowest process's rate.
absl::StatusOr<ShapeResult> MeasureShape(int world_size, bool everyone_sends,
                                         int64_t bytes, int rounds) {
  std::vector<int> listen_fds(world_size), ports(world_size);
  for (int p = 0; p < world_size; ++p) {
    listen_fds[p] = Listen(ports[p]);
    if (listen_fds[p] < 0) {
      return absl::UnavailableError("ceiling: cannot listen on 127.0.0.1");
    }
  }
  std::vector<int> reports(world_size);
  std::vector<pid_t> pids(world_size);
  for (int rank = 0; rank < world_size; ++rank) {
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) return absl::InternalError("ceiling: pipe failed");
    const pid_t pid = ::fork();
    if (pid < 0) return absl::InternalError("ceiling: fork failed");
    if (pid == 0) {
      ::close(pipe_fds[0]);
      ::_exit(RunProcess(rank, world_size, everyone_sends, listen_fds, ports,
                         bytes, rounds, pipe_fds[1]));
    }
    ::close(pipe_fds[1]);
    reports[rank] = pipe_fds[0];
    pids[rank] = pid;
  }
  for (int fd : listen_fds) ::close(fd);
  std::vector<std::vector<double>> rates(rounds, std::vector<double>());
  bool ok = true;
  for (int rank = 0; rank < world_size; ++rank) {
    for (int round = 0; round < rounds; ++round) {
      double rate = 0;
      if (!ReadAll(reports[rank], reinterpret_cast<char*>(&rate), sizeof(rate))) {
        ok = false;
        break;
      }
      rates[round].push_back(rate);
    }
    ::close(reports[rank]);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!ok) {
    return absl::InternalError(absl::StrCat(
        "ceiling: a process of the ", world_size, "-process shape failed"));
  }
  std::vector<double> slowest;
  for (const std::vector<double>& round : rates) slowest.push_back(Min(round));
  return ShapeResult{Median(slowest), Min(slowest), Max(slowest)};
}

double MemcpyBytesPerSecond(int64_t bytes, int rounds) {
  std::vector<char> from(bytes, 1), to(bytes, 0);
  std::vector<double> rates;
  for (int round = 0; round < rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(to.data(), from.data(), bytes);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    rates.push_back(bytes / seconds);
    from[round % bytes] = to[(round + 1) % bytes];  // keep the copy observable
  }
  return Median(rates);
}

}  // namespace

absl::StatusOr<Ceiling> MeasureCeiling(const CeilingOptions& options) {
  if (options.bytes <= 0 || options.rounds <= 0 ||
      options.peers_world_size < 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ceiling: need bytes > 0, rounds > 0 and peers_world_size >= 3; got ",
        options.bytes, ", ", options.rounds, ", ", options.peers_world_size));
  }
  Ceiling ceiling;
  ceiling.memcpy_bytes_per_second =
      MemcpyBytesPerSecond(options.bytes, options.rounds);
  absl::StatusOr<ShapeResult> one_way =
      MeasureShape(2, /*everyone_sends=*/false, options.bytes, options.rounds);
  if (!one_way.ok()) return one_way.status();
  absl::StatusOr<ShapeResult> both_ways =
      MeasureShape(2, /*everyone_sends=*/true, options.bytes, options.rounds);
  if (!both_ways.ok()) return both_ways.status();
  absl::StatusOr<ShapeResult> peers = MeasureShape(
      options.peers_world_size, /*everyone_sends=*/true, options.bytes,
      options.rounds);
  if (!peers.ok()) return peers.status();
  ceiling.tcp_one_way = one_way->median;
  ceiling.tcp_one_way_min = one_way->min;
  ceiling.tcp_one_way_max = one_way->max;
  ceiling.tcp_both_ways = both_ways->median;
  ceiling.tcp_both_ways_min = both_ways->min;
  ceiling.tcp_both_ways_max = both_ways->max;
  ceiling.tcp_peers = peers->median;
  ceiling.tcp_peers_min = peers->min;
  ceiling.tcp_peers_max = peers->max;
  ceiling.peers_world_size = options.peers_world_size;
  return ceiling;
}

CommBenchCeiling CeilingProto(const Ceiling& ceiling,
                              const CeilingOptions& options) {
  constexpr double kGiga = 1e9;
  CommBenchCeiling proto;
  proto.set_schema_version(1);
  proto.set_bytes(options.bytes);
  proto.set_rounds(options.rounds);
  proto.set_memcpy_gbps(ceiling.memcpy_bytes_per_second / kGiga);
  proto.set_tcp_one_way_gbps(ceiling.tcp_one_way / kGiga);
  proto.set_tcp_one_way_min_gbps(ceiling.tcp_one_way_min / kGiga);
  proto.set_tcp_one_way_max_gbps(ceiling.tcp_one_way_max / kGiga);
  proto.set_tcp_both_ways_gbps(ceiling.tcp_both_ways / kGiga);
  proto.set_tcp_both_ways_min_gbps(ceiling.tcp_both_ways_min / kGiga);
  proto.set_tcp_both_ways_max_gbps(ceiling.tcp_both_ways_max / kGiga);
  proto.set_peers_world_size(ceiling.peers_world_size);
  proto.set_tcp_peers_gbps(ceiling.tcp_peers / kGiga);
  proto.set_tcp_peers_min_gbps(ceiling.tcp_peers_min / kGiga);
  proto.set_tcp_peers_max_gbps(ceiling.tcp_peers_max / kGiga);
  return proto;
}

void SetMatchingCeiling(const CommBenchCeiling& ceiling, int world_size,
                        CommBenchRow* row, const std::string& transport) {
  if (world_size < 2 || transport != "tcp") return;
  double gbps = 0;
  std::string shape;
  if (world_size == 2 && row->op() == "broadcast") {
    gbps = ceiling.tcp_one_way_gbps();
    shape = "tcp_one_way";
  } else if (world_size == 2) {
    gbps = ceiling.tcp_both_ways_gbps();
    shape = "tcp_both_ways";
  } else {
    gbps = ceiling.tcp_peers_gbps();
    shape = absl::StrCat("tcp_", ceiling.peers_world_size() - 1, "_peers");
    if (ceiling.peers_world_size() != world_size) {
      absl::StrAppend(&shape, " (measured at ", ceiling.peers_world_size(),
                      " processes)");
    }
  }
  SetCeiling(gbps, shape, row);
}

void SetCeiling(double ceiling_gbps, const std::string& shape, CommBenchRow* row) {
  if (ceiling_gbps <= 0) return;
  row->set_ceiling_gbps(ceiling_gbps);
  row->set_ceiling_shape(shape);
  row->set_busbw_fraction_of_ceiling(row->busbw_gbps() / ceiling_gbps);
  row->set_ceiling_invalid(row->busbw_gbps() > kCeilingSlack * ceiling_gbps);
}

double CeilingSamples::Best() const {
  return gbps.empty() ? 0.0 : *std::max_element(gbps.begin(), gbps.end());
}

double CeilingSamples::Slowest() const {
  return gbps.empty() ? 0.0 : *std::min_element(gbps.begin(), gbps.end());
}

absl::StatusOr<CeilingSamples> AlternateCeilingAndRows(
    int measurements, int rows, const std::function<absl::StatusOr<double>()>& measure,
    const std::function<absl::Status(int row)>& run_row) {
  CeilingSamples samples;
  int rows_run = 0;
  while (static_cast<int>(samples.gbps.size()) < measurements || rows_run < rows) {
    if (static_cast<int>(samples.gbps.size()) < measurements) {
      absl::StatusOr<double> gbps = measure();
      if (!gbps.ok()) return gbps.status();
      samples.gbps.push_back(*gbps);
    }
    if (rows_run < rows) {
      if (absl::Status ran = run_row(rows_run); !ran.ok()) return ran;
      ++rows_run;
    }
  }
  return samples;
}

void SetBestCeiling(const CeilingSamples& samples, const std::string& shape, CommBenchRow* row) {
  if (samples.gbps.empty() || samples.Best() <= 0) return;
  SetCeiling(samples.Best(), shape, row);
  row->set_ceiling_measurements(static_cast<int>(samples.gbps.size()));
  row->set_ceiling_min_gbps(samples.Slowest());
}

std::string CeilingReport(const CommBenchResult& result, bool* invalid, int* rows_with_ceiling) {
  std::string text =
      absl::StrFormat("# %-14s %10s %-12s %10s %10s %8s %18s  %s\n", "op", "size (B)",
                      "placement", "busbw GB/s", "ceiling", "% of it", "best of k: min", "shape");
  std::vector<std::string> beaten;
  *rows_with_ceiling = 0;
  for (const CommBenchRow& row : result.rows()) {
    if (row.ceiling_gbps() <= 0) continue;
    ++*rows_with_ceiling;
    // How many times the ceiling was measured and its slowest measurement
    // (the spread up to ceiling_gbps, the best); "-" when measured once.
    const std::string spread =
        row.ceiling_measurements() > 0
            ? absl::StrFormat("%d: %.2f", row.ceiling_measurements(), row.ceiling_min_gbps())
            : "-";
    absl::StrAppendFormat(&text, "  %-14s %10d %-12s %10.2f %10.2f %7.0f%% %18s  %s%s\n",
                          row.op(), row.bytes(), row.placement(), row.busbw_gbps(),
                          row.ceiling_gbps(), 100 * row.busbw_fraction_of_ceiling(), spread,
                          row.ceiling_shape(),
                          row.ceiling_invalid() ? "  <- beats its ceiling by >10%" : "");
    if (row.ceiling_invalid()) {
      beaten.push_back(absl::StrCat(row.op(), " ", row.bytes(), " B ", row.placement(), " (",
                                    absl::StrFormat("%.0f%%", 100 * row.busbw_fraction_of_ceiling()),
                                    ")"));
    }
  }
  *invalid = !beaten.empty() || *rows_with_ceiling == 0;
  if (*rows_with_ceiling == 0) {
    absl::StrAppend(&text, "# verdict: CEILING INVALID: no row has a ceiling to compare with\n");
  } else if (!beaten.empty()) {
    absl::StrAppend(&text, "# verdict: CEILING INVALID: ", absl::StrJoin(beaten, ", "),
                    " beat their ceiling by more than 10%\n");
  } else {
    absl::StrAppend(&text, "# verdict: ceiling bounds every row (", *rows_with_ceiling,
                    " rows within 110% of their ceiling)\n");
  }
  return text;
}

}  // namespace mtb::comm_bench
