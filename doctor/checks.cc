#include "doctor/checks.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "absl/base/config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/libtorch/matmul_peak.h"
#include "glog/logging.h"
#include "common/report/report.h"
#include "common/results/atomic_file.h"

namespace mtb::doctor {
namespace {

constexpr char kBuild[] = "build";
constexpr char kHost[] = "host";
constexpr char kNetwork[] = "network";

bool IsLoopback(const std::string& address) {
  return absl::StartsWith(address, "127.") || address == "::1";
}

}  // namespace

DoctorCheck CheckLibraries(const RunContext& context) {
  const std::string value = absl::StrCat(
      "LibTorch ", context.libtorch_version(), ", Gloo ",
      context.gloo_version().empty() ? "?" : context.gloo_version(),
      ", protobuf ", context.protobuf_version(), ", Abseil LTS ",
#ifdef ABSL_LTS_RELEASE_VERSION
      ABSL_LTS_RELEASE_VERSION
#else
      "(not an LTS)"
#endif
  );
  if (context.libtorch_version().empty()) {
    return MakeCheck(kBuild, "libraries", "fail", value,
                     "this binary has no LibTorch: rebuild with ./bazelw "
                     "(installs libtorch-dev)");
  }
  return MakeCheck(kBuild, "libraries", "pass", value);
}

DoctorCheck CheckBlas(const std::string& blas) {
  if (blas.empty()) {
    return MakeCheck(kBuild, "BLAS", "warn", "no BLAS library is mapped",
                     "LibTorch should map libblas.so.3; check `ldd` of the "
                     "binary");
  }
  if (absl::StrContains(blas, "reference BLAS")) {
    return MakeCheck(
        kBuild, "BLAS", "warn",
        absl::StrCat(blas, " -- fp32 matmul is ~20x slower than OpenBLAS"),
        "install OpenBLAS and select it: apt-get install libopenblas0-openmp "
        "(./bazelw does), or update-alternatives --config "
        "libblas.so.3-x86_64-linux-gnu");
  }
  return MakeCheck(kBuild, "BLAS", "pass", blas);
}

DoctorCheck CheckThreads(int intra_op_threads, int cores,
                         const std::string& omp_num_threads,
                         const std::string& openblas_coretype) {
  const std::string value = absl::StrCat(
      "intra-op ", intra_op_threads, " of ", cores, " cores; OMP_NUM_THREADS=",
      omp_num_threads.empty() ? "(unset)" : omp_num_threads,
      "; OPENBLAS_CORETYPE=",
      openblas_coretype.empty() ? "(unset: auto-detect)" : openblas_coretype);
  if (intra_op_threads > cores) {
    return MakeCheck(kBuild, "threads", "warn", value,
                     "more intra-op threads than cores oversubscribes them: "
                     "lower OMP_NUM_THREADS or --intra_op_threads");
  }
  return MakeCheck(kBuild, "threads", "pass", value);
}

DoctorCheck CheckMemory(const absl::StatusOr<HostMemory>& memory) {
  if (!memory.ok()) {
    return MakeCheck(kHost, "memory", "warn",
                     std::string(memory.status().message()),
                     "the trainer's memory check needs /proc/meminfo");
  }
  DoctorCheck check = MakeCheck(
      kHost, "memory", "pass",
      absl::StrCat(FormatByteAmount(static_cast<double>(memory->total_bytes)),
                   " (", memory->source, "), ",
                   FormatByteAmount(static_cast<double>(memory->available_bytes)),
                   " available"));
  check.set_measured(static_cast<double>(memory->available_bytes) / (1 << 30));
  check.set_unit("GiB available");
  return check;
}

std::vector<DoctorCheck> CheckGemms(const std::string& precision) {
  const std::vector<GemmSpeed> speeds =
      MeasureGemms(precision, {{512, 512, 512}}, /*repeats=*/3);
  auto row = [](const std::string& name, const GemmSpeed& speed) {
    DoctorCheck check = MakeCheck(
        kHost, name, "pass",
        absl::StrCat(FormatSignificant(speed.flops_per_second / 1e9, 3),
                     " GFLOP/s (", speed.Describe(), ", best of 3)"));
    check.set_measured(speed.flops_per_second / 1e9);
    check.set_unit("GFLOP/s");
    return check;
  };
  const GemmSpeed* fastest = FastestGemm(speeds);
  CHECK(fastest != nullptr);
  std::vector<DoctorCheck> checks = {
      row(absl::StrCat("matmul ", precision), *fastest)};
  for (const GemmSpeed& speed : speeds) {
    checks.push_back(
        row(absl::StrCat("gemm ", speed.library, " ", precision), speed));
  }
  return checks;
}

DoctorCheck CompareBf16ToFp32(DoctorCheck bf16, const DoctorCheck& fp32) {
  if (fp32.measured() > 0 && bf16.measured() < 0.25 * fp32.measured()) {
    bf16.set_status("warn");
    bf16.set_value(absl::StrCat(
        bf16.value(), " -- ",
        FormatSignificant(fp32.measured() / std::max(bf16.measured(), 1e-9), 2),
        "x slower than fp32 on this CPU"));
    bf16.set_fix(
        "this CPU has no fast bf16 matmul: --precision=bf16 will train slower "
        "than fp32 here (it still saves activation memory)");
  }
  return bf16;
}

int DiskProbeMib(int megabytes, int64_t free_bytes) {
  const int64_t tenth_mib = free_bytes / 10 / (int64_t{1} << 20);
  return static_cast<int>(
      std::max<int64_t>(0, std::min<int64_t>({megabytes, kMaxDiskProbeMib, tenth_mib})));
}

DoctorCheck CheckDisk(const std::string& directory, int megabytes) {
  const std::string name = "disk";
  auto fail = [&](const std::string& why) {
    return MakeCheck(kHost, name, "fail", absl::StrCat(directory, ": ", why),
                     "give --checkpoint_dir a writable directory with room "
                     "for the checkpoints");
  };
  if (absl::Status created = CreateDirectories(directory); !created.ok()) {
    return fail(std::string(created.message()));
  }
  // Free space first: the probe is sized from it and never fills the disk.
  struct statvfs fs;
  if (::statvfs(directory.c_str(), &fs) != 0) {
    return fail(absl::StrCat("statvfs: ", std::strerror(errno)));
  }
  const int64_t free_bytes = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  const bool too_little = free_bytes < int64_t{4} * megabytes * (1 << 20);
  const std::string too_little_fix = absl::StrCat(
      "free space is below 4x --disk_check_mb=", megabytes, ": checkpoints will not fit");
  const int probe_mib = DiskProbeMib(megabytes, free_bytes);
  if (probe_mib == 0) {
    DoctorCheck check = fail(absl::StrCat(
        "only ", FormatByteAmount(static_cast<double>(free_bytes)),
        " free: no write probe (it would take more than 10% of it)"));
    if (too_little) check.set_fix(too_little_fix);
    return check;
  }
  std::string path = absl::StrCat(directory, "/.mtb_doctor_disk_XXXXXX");
  const int fd = ::mkstemp(path.data());
  if (fd < 0) return fail(absl::StrCat("cannot create a file: ", std::strerror(errno)));
  const std::vector<char> block(1 << 20, 'm');
  const auto start = std::chrono::steady_clock::now();
  bool ok = true;
  for (int i = 0; i < probe_mib && ok; ++i) {
    size_t done = 0;
    while (done < block.size()) {
      const ssize_t n = ::write(fd, block.data() + done, block.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ok = false;
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
  ok = ok && ::fsync(fd) == 0;
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  const int saved_errno = errno;
  ::close(fd);
  ::unlink(path.c_str());
  if (!ok) return fail(absl::StrCat("write+fsync failed: ", std::strerror(saved_errno)));
  const double mb_per_second =
      probe_mib * 1.048576 / std::max(seconds, 1e-9);
  const std::string value = absl::StrFormat(
      "%s: write+fsync %s MB/s (%d MiB), %s free", directory,
      FormatSignificant(mb_per_second, 3), probe_mib,
      FormatByteAmount(static_cast<double>(free_bytes)));
  DoctorCheck check = MakeCheck(kHost, name, "pass", value);
  if (too_little) {
    check.set_status("fail");
    check.set_fix(too_little_fix);
  }
  check.set_measured(mb_per_second);
  check.set_unit("MB/s");
  return check;
}

absl::StatusOr<std::vector<std::string>> ResolveHostname(
    const std::string& hostname) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (const int error = ::getaddrinfo(hostname.c_str(), nullptr, &hints, &result);
      error != 0) {
    return absl::NotFoundError(
        absl::StrCat(hostname, " does not resolve: ", ::gai_strerror(error)));
  }
  std::vector<std::string> addresses;
  for (addrinfo* entry = result; entry != nullptr; entry = entry->ai_next) {
    char text[INET6_ADDRSTRLEN] = {0};
    const void* raw =
        entry->ai_family == AF_INET
            ? static_cast<const void*>(
                  &reinterpret_cast<sockaddr_in*>(entry->ai_addr)->sin_addr)
            : static_cast<const void*>(
                  &reinterpret_cast<sockaddr_in6*>(entry->ai_addr)->sin6_addr);
    if (::inet_ntop(entry->ai_family, raw, text, sizeof(text)) != nullptr) {
      const std::string address = text;
      bool seen = false;
      for (const std::string& a : addresses) seen |= a == address;
      if (!seen) addresses.push_back(address);
    }
  }
  ::freeaddrinfo(result);
  return addresses;
}

DoctorCheck CheckHostname(const std::string& hostname,
                          const absl::StatusOr<std::vector<std::string>>& addresses,
                          int nnodes) {
  if (!addresses.ok()) {
    return MakeCheck(kNetwork, "hostname", "fail",
                     std::string(addresses.status().message()),
                     "add the hostname to /etc/hosts or DNS, or set "
                     "GLOO_SOCKET_IFNAME to the interface the ranks should use");
  }
  const std::string value =
      absl::StrCat(hostname, " -> ", absl::StrJoin(*addresses, ", "));
  bool all_loopback = !addresses->empty();
  for (const std::string& address : *addresses) all_loopback &= IsLoopback(address);
  if (!all_loopback) return MakeCheck(kNetwork, "hostname", "pass", value);
  const std::string fix =
      "Gloo binds the address the hostname resolves to; map the hostname to "
      "this host's network address in /etc/hosts, or set GLOO_SOCKET_IFNAME";
  return MakeCheck(kNetwork, "hostname", nnodes > 1 ? "fail" : "warn",
                   absl::StrCat(value, " (loopback only: ",
                                nnodes > 1 ? "other hosts cannot reach it"
                                           : "fine on one host, not across hosts",
                                ")"),
                   fix);
}

DoctorCheck CheckGlooInterface(const std::string& ifname) {
  if (ifname.empty()) {
    return MakeCheck(kNetwork, "GLOO_SOCKET_IFNAME", "pass",
                     "(unset: Gloo uses the hostname's address)");
  }
  if (::if_nametoindex(ifname.c_str()) == 0) {
    return MakeCheck(kNetwork, "GLOO_SOCKET_IFNAME", "fail",
                     absl::StrCat(ifname, ": no such interface"),
                     "set it to an interface `ip -br addr` lists, or unset it");
  }
  return MakeCheck(kNetwork, "GLOO_SOCKET_IFNAME", "pass",
                   absl::StrCat(ifname, " (Gloo binds this interface)"));
}

DoctorCheck CheckFreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  const bool ok =
      fd >= 0 &&
      ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  const std::string error = ok ? "" : std::strerror(errno);
  if (fd >= 0) ::close(fd);
  if (!ok) {
    return MakeCheck(kNetwork, "free port", "fail",
                     absl::StrCat("cannot bind 127.0.0.1:0: ", error),
                     "the launcher's store needs a TCP port");
  }
  return MakeCheck(kNetwork, "free port", "pass",
                   absl::StrCat("127.0.0.1:", ntohs(address.sin_port),
                                " was free"));
}

DoctorCheck CheckReachable(const std::string& name, const std::string& address,
                           int port, absl::Duration timeout) {
  const std::string target = absl::StrCat(address, ":", port);
  auto fail = [&](const std::string& why) {
    return MakeCheck(kNetwork, name, "fail",
                     absl::StrCat(target, " not reachable within ",
                                  absl::FormatDuration(timeout), ": ", why),
                     "start node 0 first, check --master_addr/--master_port, "
                     "firewalls and routes (`nc -vz ADDR PORT`)");
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string port_text = absl::StrCat(port);
  if (const int error =
          ::getaddrinfo(address.c_str(), port_text.c_str(), &hints, &result);
      error != 0) {
    return fail(::gai_strerror(error));
  }
  const int fd = ::socket(result->ai_family, SOCK_STREAM, 0);
  std::string why;
  bool connected = false;
  if (fd >= 0) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    if (::connect(fd, result->ai_addr, result->ai_addrlen) == 0) {
      connected = true;
    } else if (errno == EINPROGRESS) {
      pollfd waiting{fd, POLLOUT, 0};
      const int ready = ::poll(&waiting, 1,
                               static_cast<int>(absl::ToInt64Milliseconds(timeout)));
      if (ready == 1) {
        int error = 0;
        socklen_t length = sizeof(error);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
        connected = error == 0;
        if (!connected) why = std::strerror(error);
      } else {
        why = "timed out";
      }
    } else {
      why = std::strerror(errno);
    }
    ::close(fd);
  } else {
    why = std::strerror(errno);
  }
  ::freeaddrinfo(result);
  if (!connected) return fail(why);
  return MakeCheck(kNetwork, name, "pass", absl::StrCat(target, " accepts connections"));
}

DoctorCheck CheckLauncher(const EnvMap& env, const RankEnv& rank_env) {
  const std::string launcher = DetectedLauncher(env);
  // The variables each family is read from (launcher_env.h).
  std::string source = "RANK, WORLD_SIZE: our launcher, torchrun or by hand";
  if (launcher == "slurm") source = "SLURM_PROCID, SLURM_NTASKS: srun";
  if (launcher == "openmpi") source = "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE: mpirun";
  if (launcher == "pmi") source = "PMI_RANK, PMI_SIZE: a PMI launcher";
  const bool derived_port = launcher != "torchrun" && env.count("MASTER_PORT") == 0;
  return MakeCheck(
      "launch", "launcher", "pass",
      absl::StrCat(launcher, " (", source, "): rank ", rank_env.rank, " of ",
                   rank_env.world_size, ", local ", rank_env.local_rank, " of ",
                   rank_env.local_world_size, "; store at ", rank_env.master_addr, ":",
                   rank_env.master_port, derived_port ? " (port from the job id)" : "",
                   rank_env.HostsStore() ? ", hosted by rank 0" : ""));
}

}  // namespace mtb::doctor
