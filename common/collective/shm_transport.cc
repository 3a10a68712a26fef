// The shared-memory transport (shm_transport.h has the vocabulary).
//
// Layout of the segment: local_size control blocks (one cache line per
// counter, so a rank's stores never share a line with a peer's), then for
// each local rank `slots` slots of [64-byte header | slot_bytes data]. The
// header carries the small per-step metadata an algorithm needs (all-to-all's
// step count).
#include "common/collective/shm_transport.h"

#include "common/collective/communicator.h"
#include "common/collective/shared_region.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

namespace mtb::collective {

// A rank's counters. A waiter that has spun long enough registers in
// `sleepers` and sleeps on the counter's low 32 bits (a futex shared between
// processes: the counter changes by one per step, so its low word changes
// too); the owner, after storing a counter, wakes the counter's sleepers if
// there are any (sequentially consistent store and load on both sides, so
// either the waiter sees the new value or the owner sees the sleeper).
struct ShmGroup::Control {
  alignas(64) std::atomic<uint64_t> copied;
  alignas(64) std::atomic<uint64_t> reduced;
  alignas(64) std::atomic<uint64_t> done;
  alignas(64) std::atomic<int64_t> pid;
  alignas(64) std::atomic<uint32_t> sleepers;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

namespace {

constexpr int64_t kSlotHeaderBytes = 64;
// Broadcast's piece progress: bytes 8-15 of the root's slot header (all-to-all
// uses bytes 0-7); 16 pieces per slot (64 KiB of a 1 MiB slot).
constexpr int64_t kBroadcastProgressOffset = 8;
constexpr int64_t kBroadcastPieces = 16;

// The futex word of a counter: its low 32 bits (little-endian x86-64).
uint32_t* FutexWord(const std::atomic<uint64_t>& counter) {
  return reinterpret_cast<uint32_t*>(const_cast<std::atomic<uint64_t>*>(&counter));
}

// Sleeps while the counter's low word is `expected`, at most `timeout`
// (spurious and early wake-ups are the caller's to handle).
void FutexWait(const std::atomic<uint64_t>& counter, uint32_t expected, absl::Duration timeout) {
  const int64_t nanos = std::max<int64_t>(0, absl::ToInt64Nanoseconds(timeout));
  timespec relative{static_cast<time_t>(nanos / 1000000000), static_cast<long>(nanos % 1000000000)};
  syscall(SYS_futex, FutexWord(counter), FUTEX_WAIT, expected, &relative, nullptr, 0);
}

void FutexWakeAll(const std::atomic<uint64_t>& counter) {
  syscall(SYS_futex, FutexWord(counter), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}
constexpr int64_t kMinSlotBytes = 4096;

std::atomic<ShmSetupHook> setup_hook{nullptr};

void AtSetupStage(const char* stage) {
  if (ShmSetupHook hook = setup_hook.load()) hook(stage);
}

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string ErrnoText(absl::string_view what) {
  return absl::StrCat(what, ": ", std::strerror(errno));
}

// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

sockaddr_un AbstractAddress(const std::string& name, socklen_t* length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  // Abstract namespace: a leading NUL; the name never appears in any
  // filesystem and goes away with the socket.
  address.sun_path[0] = '\0';
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return address;
}

absl::Status SendFd(int socket_fd, int fd) {
  char byte = 'm';
  iovec io{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  if (sendmsg(socket_fd, &message, MSG_NOSIGNAL) != 1) {
    return absl::UnavailableError(ErrnoText("shm: sendmsg(SCM_RIGHTS)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ReceiveFd(int socket_fd) {
  char byte = 0;
  iovec io{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  const ssize_t received = recvmsg(socket_fd, &message, MSG_CMSG_CLOEXEC);
  if (received == 0) {
    return absl::UnavailableError(
        "shm: Connection closed before the segment came (its creator exited or gave up)");
  }
  if (received != 1) return absl::UnavailableError(ErrnoText("shm: recvmsg(SCM_RIGHTS)"));
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  if (header == nullptr || header->cmsg_type != SCM_RIGHTS) {
    return absl::UnavailableError("shm: the segment's creator sent no descriptor");
  }
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(header), sizeof(int));
  return fd;
}

// Waits until `fd` is readable or `deadline` passes.
bool PollReadable(int fd, absl::Time deadline) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd entry{fd, POLLIN, 0};
    const int ready = poll(
        &entry, 1, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000)));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

std::string RandomToken() {
  std::random_device device;
  return absl::StrFormat("%08x%08x%08x%08x", device(), device(), device(), device());
}

int GlobalRank(const ShmGroupOptions& options, int local_rank) {
  return local_rank < static_cast<int>(options.global_ranks.size())
             ? options.global_ranks[local_rank]
             : local_rank;
}

// Local rank 0: creates the segment and hands it to every peer that
// connects (peers of another user are refused); each peer first says which
// rank it is, so that a failure names it. With `pid_offset` >= 0 this
// process's pid is written there before any peer sees the segment, so a peer
// that maps it sees the creator's death while it waits (PeerGone), even if
// the creator dies before mapping it itself.
absl::StatusOr<int> CreateAndShare(Store store, const ShmGroupOptions& options,
                                   int64_t segment_bytes, int64_t pid_offset = -1) {
  Fd memory(memfd_create("mtb-collective-shm", MFD_CLOEXEC));
  if (memory.get() < 0) return absl::InternalError(ErrnoText("shm: memfd_create"));
  if (ftruncate(memory.get(), segment_bytes) != 0) {
    return absl::ResourceExhaustedError(
        ErrnoText(absl::StrCat("shm: ftruncate to ", segment_bytes, " bytes")));
  }
  if (pid_offset >= 0) {
    const int64_t pid = getpid();
    if (pwrite(memory.get(), &pid, sizeof(pid), pid_offset) != sizeof(pid)) {
      return absl::InternalError(ErrnoText("shm: writing the creator's pid"));
    }
  }
  AtSetupStage("created");
  if (options.local_size > 1) {
    const std::string name = absl::StrCat("mtb-shm-", getpid(), "-", RandomToken());
    Fd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (listener.get() < 0) return absl::InternalError(ErrnoText("shm: socket"));
    socklen_t length = 0;
    sockaddr_un address = AbstractAddress(name, &length);
    if (bind(listener.get(), reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        listen(listener.get(), options.local_size) != 0) {
      return absl::InternalError(ErrnoText("shm: bind/listen on an abstract socket"));
    }
    if (absl::Status set = store.Set("shm_socket", name); !set.ok()) return set;
    const absl::Time deadline = absl::Now() + options.connect_timeout;
    for (int served = 1; served < options.local_size; ++served) {
      if (!PollReadable(listener.get(), deadline)) {
        return absl::DeadlineExceededError(
            absl::StrCat("shm: timed out after ", absl::FormatDuration(options.connect_timeout),
                         " waiting for the host's ranks to connect (", served - 1, " of ",
                         options.local_size - 1, " did)"));
      }
      Fd peer(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (peer.get() < 0) return absl::InternalError(ErrnoText("shm: accept"));
      ucred credentials{};
      socklen_t size = sizeof(credentials);
      if (getsockopt(peer.get(), SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0 ||
          credentials.uid != getuid()) {
        LOG(WARNING) << "shm: refused a connection from uid " << credentials.uid;
        --served;
        continue;
      }
      int32_t rank = -1;
      if (!PollReadable(peer.get(), deadline) ||
          recv(peer.get(), &rank, sizeof(rank), MSG_WAITALL) != sizeof(rank)) {
        return absl::UnavailableError(absl::StrCat(
            "shm: Connection closed: a rank of this host (pid ", credentials.pid,
            ") connected for the segment and went away before saying which rank it is"));
      }
      if (absl::Status sent = SendFd(peer.get(), memory.get()); !sent.ok()) {
        return absl::UnavailableError(absl::StrCat("shm: handing the segment to rank ", rank,
                                                   " (pid ", credentials.pid,
                                                   "): ", sent.message()));
      }
      if (served == 1 && options.local_size > 2) AtSetupStage("served");
    }
  }
  return dup(memory.get());
}

absl::StatusOr<int> ReceiveSharedFrom(Store store, const ShmGroupOptions& options);

// A peer: the segment from local rank 0; a failure names that rank.
absl::StatusOr<int> ReceiveShared(Store store, const ShmGroupOptions& options) {
  absl::StatusOr<int> fd = ReceiveSharedFrom(std::move(store), options);
  if (fd.ok()) return fd;
  return absl::Status(fd.status().code(),
                      absl::StrCat("shm: waiting for rank ", GlobalRank(options, 0),
                                   " (local rank 0, which creates this host's segment): ",
                                   fd.status().message()));
}

absl::StatusOr<int> ReceiveSharedFrom(Store store, const ShmGroupOptions& options) {
  absl::StatusOr<std::string> name = store.Get("shm_socket", options.connect_timeout);
  if (!name.ok()) return name.status();
  Fd connection(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (connection.get() < 0) return absl::InternalError(ErrnoText("shm: socket"));
  socklen_t length = 0;
  sockaddr_un address = AbstractAddress(*name, &length);
  if (connect(connection.get(), reinterpret_cast<sockaddr*>(&address), length) != 0) {
    return absl::UnavailableError(ErrnoText(
        absl::StrCat("shm: connect to local rank 0's socket '", *name,
                     "' (ranks that share a host identity must share a network namespace)")));
  }
  const int32_t rank = GlobalRank(options, options.local_rank);
  if (send(connection.get(), &rank, sizeof(rank), MSG_NOSIGNAL) != sizeof(rank)) {
    return absl::UnavailableError(ErrnoText("shm: Connection closed: saying which rank this is"));
  }
  AtSetupStage("connected");
  if (!PollReadable(connection.get(), absl::Now() + options.connect_timeout)) {
    return absl::DeadlineExceededError("shm: timed out waiting for the segment");
  }
  return ReceiveFd(connection.get());
}

}  // namespace

void SetShmSetupHookForTesting(ShmSetupHook hook) { setup_hook.store(hook); }

std::string HostIdentity() {
  char hostname[256] = {};
  gethostname(hostname, sizeof(hostname) - 1);
  char net[128] = {};
  const ssize_t n = readlink("/proc/self/ns/net", net, sizeof(net) - 1);
  return absl::StrCat(hostname, "/", ReadFirstLine("/proc/sys/kernel/random/boot_id"), "/",
                      n > 0 ? std::string(net, n) : std::string("net:?"));
}

absl::StatusOr<std::unique_ptr<ShmGroup>> ShmGroup::Create(const Store& store,
                                                           const ShmGroupOptions& options) {
  ShmGroupOptions resolved = options;
  resolved.slot_bytes = std::max<int64_t>(kMinSlotBytes, options.slot_bytes / 64 * 64);
  // The pipelined loop's next chunk is copied into the other slot
  // (RunPipelined), which needs a second one.
  resolved.slots = std::max(2, options.slots);
  if (resolved.global_ranks.empty()) {
    for (int l = 0; l < options.local_size; ++l) resolved.global_ranks.push_back(l);
  }
  const int64_t control_bytes = resolved.local_size * static_cast<int64_t>(sizeof(Control));
  const int64_t slot_stride = kSlotHeaderBytes + resolved.slot_bytes;
  const int64_t segment_bytes = control_bytes + resolved.local_size * resolved.slots * slot_stride;
  absl::StatusOr<int> fd =
      resolved.local_rank == 0
          ? CreateAndShare(store, resolved, segment_bytes, offsetof(Control, pid))
          : ReceiveShared(store, resolved);
  if (!fd.ok()) return fd.status();
  Fd memory(*fd);
  struct stat info {};
  if (fstat(memory.get(), &info) != 0 || info.st_size != segment_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("shm: the segment has ", info.st_size, " bytes, expected ", segment_bytes,
                     " (every rank of a host needs the same shm slot size)"));
  }
  void* base = mmap(nullptr, segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memory.get(), 0);
  if (base == MAP_FAILED) return absl::ResourceExhaustedError(ErrnoText("shm: mmap"));
  std::unique_ptr<ShmGroup> group(new ShmGroup(resolved, base, segment_bytes));
  group->control_bytes_ = control_bytes;
  group->slot_stride_ = slot_stride;
  group->control(resolved.local_rank).pid.store(getpid(), std::memory_order_release);
  return group;
}

ShmGroup::ShmGroup(ShmGroupOptions options, void* base, int64_t segment_bytes)
    : options_(std::move(options)), base_(base), segment_bytes_(segment_bytes) {}

ShmGroup::~ShmGroup() { munmap(base_, segment_bytes_); }

std::string ShmGroup::Describe() const {
  return absl::StrCat("shm (", options_.local_size, " ranks, ", options_.slots, " slots x ",
                      options_.slot_bytes >> 10, " KiB per rank)");
}

void ShmGroup::Abort() { aborted_.store(true); }

SharedMemoryRegion::~SharedMemoryRegion() { munmap(data_, bytes_); }

absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> MapSharedRegion(
    const Communicator& communicator, absl::string_view name, int64_t bytes) {
  if (communicator.transport() != "shm") {
    return absl::FailedPreconditionError(
        absl::StrCat("MapSharedRegion: the transport is ", communicator.transport(),
                     "; a region shared by every rank needs every rank on one host (shm)"));
  }
  if (bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("MapSharedRegion: bytes must be > 0, got ", bytes));
  }
  ShmGroupOptions options;
  options.local_rank = communicator.rank();
  options.local_size = communicator.world_size();
  options.connect_timeout = communicator.timeout();
  const Store store = communicator.store().WithPrefix(absl::StrCat("region/", name, "/"));
  absl::StatusOr<int> fd = options.local_rank == 0 ? CreateAndShare(store, options, bytes)
                                                   : ReceiveShared(store, options);
  if (!fd.ok()) return fd.status();
  Fd memory(*fd);
  struct stat info {};
  if (fstat(memory.get(), &info) != 0 || info.st_size != bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "MapSharedRegion: the region has ", info.st_size, " bytes, expected ", bytes,
        " (every rank must ask for the same size)"));
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memory.get(), 0);
  if (data == MAP_FAILED) return absl::ResourceExhaustedError(ErrnoText("shm: mmap of a region"));
  return std::make_unique<SharedMemoryRegion>(data, bytes);
}

ShmGroup::Control& ShmGroup::control(int local_rank) const {
  return static_cast<Control*>(base_)[local_rank];
}

char* ShmGroup::slot(int local_rank, uint64_t step) const {
  const int64_t index = local_rank * options_.slots + static_cast<int64_t>(step % options_.slots);
  return static_cast<char*>(base_) + control_bytes_ + index * slot_stride_ + kSlotHeaderBytes;
}

uint64_t ShmGroup::BeginStep(absl::Time deadline) {
  if (aborted_.load()) throw std::runtime_error("shm: aborted (the communicator was given up)");
  const uint64_t step = ++step_;
  if (step > static_cast<uint64_t>(options_.slots)) {
    WaitPeers(Phase::kDone, step - options_.slots, deadline);
  }
  return step;
}

void ShmGroup::Publish(Phase phase, uint64_t step) {
  Control& mine = control(options_.local_rank);
  std::atomic<uint64_t>& counter =
      phase == Phase::kCopied ? mine.copied : (phase == Phase::kReduced ? mine.reduced : mine.done);
  counter.store(step, std::memory_order_seq_cst);
  if (mine.sleepers.load(std::memory_order_seq_cst) > 0) FutexWakeAll(counter);
}

void ShmGroup::WaitPeers(Phase phase, uint64_t step, absl::Time deadline, int only) {
  for (int peer = 0; peer < options_.local_size; ++peer) {
    if (peer == options_.local_rank || (only >= 0 && peer != only)) continue;
    WaitOne(peer, phase, step, deadline);
  }
}

bool ShmGroup::PeerGone(int peer) const {
  const int64_t pid = control(peer).pid.load(std::memory_order_acquire);
  if (pid <= 0) return false;  // not attached yet
  if (pid == getpid()) return false;
  const std::string stat = ReadFirstLine(absl::StrCat("/proc/", pid, "/stat"));
  if (stat.empty()) return true;
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  const char state = stat[paren + 2];
  return state == 'Z' || state == 'X';
}

void ShmGroup::WaitOne(int peer, Phase phase, uint64_t step, absl::Time deadline) {
  const Control& theirs = control(peer);
  const std::atomic<uint64_t>& counter =
      phase == Phase::kCopied ? theirs.copied
                              : (phase == Phase::kReduced ? theirs.reduced : theirs.done);
  // Spin (a peer a few microseconds behind), then yield a few times (a
  // loaded host), then sleep on the counter until the peer's Publish wakes
  // it: no core burned while a peer computes, and no nap's latency either.
  // The sleep is cut every 10 ms to check the deadline, the abort flag and
  // whether the peer still lives.
  for (int spin = 0; spin < 4000; ++spin) {
    if (counter.load(std::memory_order_acquire) >= step) return;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  for (int round = 0; round < 8; ++round) {
    if (counter.load(std::memory_order_acquire) >= step) return;
    sched_yield();
  }
  std::atomic<uint32_t>& sleepers = control(peer).sleepers;
  absl::Time next_liveness_check = absl::InfinitePast();
  while (true) {
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint64_t seen = counter.load(std::memory_order_seq_cst);
    if (seen >= step) {
      sleepers.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    const absl::Time now = absl::Now();
    const char* phase_name =
        phase == Phase::kCopied ? "copied" : (phase == Phase::kReduced ? "reduced" : "done");
    if (aborted_.load()) {
      sleepers.fetch_sub(1, std::memory_order_relaxed);
      throw std::runtime_error("shm: aborted (the communicator was given up)");
    }
    if (now >= next_liveness_check) {
      if (PeerGone(peer)) {
        sleepers.fetch_sub(1, std::memory_order_relaxed);
        throw std::runtime_error(
            absl::StrCat("shm: Connection closed: rank ", options_.global_ranks[peer], " (pid ",
                         theirs.pid.load(), ") exited while this rank waited for it (step ", step,
                         ", ", phase_name, ")"));
      }
      next_liveness_check = now + absl::Milliseconds(10);
    }
    if (now >= deadline) {
      sleepers.fetch_sub(1, std::memory_order_relaxed);
      throw std::runtime_error(
          absl::StrCat("shm: timed out waiting for rank ", options_.global_ranks[peer], " (pid ",
                       theirs.pid.load(), ") at step ", step, " (", phase_name, ")"));
    }
    FutexWait(counter, static_cast<uint32_t>(seen),
              std::min(absl::Milliseconds(10), deadline - now));
    sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

// ---------------------------------------------------------------------------
// Algorithms. Byte offsets of block p are the prefix sums of the sizes before
// it; elements [begin, begin + len) of a chunk are `Split`'s even parts.

namespace {

// Part `index` of `count` elements split into `parts` as evenly as it goes
// (the first count % parts parts one longer): {begin, length}.
std::pair<int64_t, int64_t> Split(int64_t count, int parts, int index) {
  const int64_t base = count / parts;
  const int64_t extra = count % parts;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  return {begin, base + (index < extra ? 1 : 0)};
}

int64_t Clamp(int64_t total, int64_t offset, int64_t chunk) {
  return std::max<int64_t>(0, std::min(chunk, total - offset));
}

}  // namespace

template <typename Produce, typename Consume>
void ShmGroup::RunPipelined(int64_t* chunks, absl::Time deadline, Produce produce,
                            Consume consume) {
  const uint64_t first = step_ + 1;
  int64_t produced = 0;
  for (int64_t index = 0; index < std::max<int64_t>(*chunks, 1); ++index) {
    // BeginStep(t) waits for the peers' done(t - slots); a rank has
    // published done up to t - 2 here and slots >= 2, so no rank waits for a
    // step that waits for it.
    while (produced < std::min<int64_t>(index + 2, std::max<int64_t>(*chunks, 1))) {
      const uint64_t step = BeginStep(deadline);
      DCHECK_EQ(step, first + produced);
      produce(produced, step);
      ++produced;
    }
    consume(index, first + index);
  }
}

void ShmGroup::AllReduce(void* data, int64_t count, ShmDtype dtype, ShmReduceOp op,
                         absl::Time deadline) {
  const int n = options_.local_size;
  const int me = options_.local_rank;
  const int64_t element = ShmDtypeSize(dtype);
  const int64_t chunk_elements = options_.slot_bytes / element;
  char* bytes = static_cast<char*>(data);
  const bool naive = NaiveAllReduce(count * element);
  std::vector<const void*> inputs(n);
  int64_t chunks = (count + chunk_elements - 1) / chunk_elements;
  if (chunks == 0) return;
  const auto chunk_of = [&](int64_t index) {
    return std::min(chunk_elements, count - index * chunk_elements);
  };
  const auto produce = [&](int64_t index, uint64_t step) {
    const int64_t chunk = chunk_of(index);
    char* mine = slot(me, step);
    char* here = bytes + index * chunk_elements * element;
    if (naive) {
      std::memcpy(mine, here, chunk * element);
    } else {
      // Only the slices the peers reduce.
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        const auto [part_begin, part_length] = Split(chunk, n, p);
        std::memcpy(mine + part_begin * element, here + part_begin * element,
                    part_length * element);
      }
    }
    Publish(Phase::kCopied, step);
  };
  const auto consume = [&](int64_t index, uint64_t step) {
    const int64_t chunk = chunk_of(index);
    char* mine = slot(me, step);
    char* here = bytes + index * chunk_elements * element;  // this chunk of the caller's tensor
    WaitPeers(Phase::kCopied, step, deadline);
    if (naive) {
      // Naive: every rank reduces every input, straight into its output.
      int inputs_used = n;
      if (fault_ == ShmTestOnlyFault::kMisassignSlices && n > 1) inputs_used = n - 1;
      for (int p = 0; p < inputs_used; ++p) inputs[p] = slot(p, step);
      ShmReduce(here, inputs.data(), inputs_used, chunk, dtype, op);
    } else {
      // Sliced: reduce this rank's slice (its own part read from the
      // caller's tensor) into its slot; then read every reduced slice from
      // its owner's slot.
      const int owned = fault_ == ShmTestOnlyFault::kMisassignSlices ? (me + 1) % n : me;
      const auto [begin, length] = Split(chunk, n, owned);
      for (int p = 0; p < n; ++p) {
        inputs[p] = p == me && owned == me ? here + begin * element : slot(p, step) + begin * element;
      }
      ShmReduce(mine + begin * element, inputs.data(), n, length, dtype, op);
      Publish(Phase::kReduced, step);
      WaitPeers(Phase::kReduced, step, deadline);
      for (int p = 0; p < n; ++p) {
        const auto [part_begin, part_length] = Split(chunk, n, p);
        std::memcpy(here + part_begin * element, slot(p, step) + part_begin * element,
                    part_length * element);
      }
    }
    Publish(Phase::kDone, step);
  };
  RunPipelined(&chunks, deadline, produce, consume);
}

void ShmGroup::ReduceScatter(const std::vector<const void*>& inputs,
                             const std::vector<int64_t>& block_elements, void* output,
                             ShmDtype dtype, ShmReduceOp op, absl::Time deadline) {
  const int n = options_.local_size;
  const int me = options_.local_rank;
  const int64_t element = ShmDtypeSize(dtype);
  // Sub-slot p of every slot carries chunks of block p.
  const int64_t sub_elements = options_.slot_bytes / n / element;
  const int64_t longest = *std::max_element(block_elements.begin(), block_elements.end());
  const int owned = fault_ == ShmTestOnlyFault::kMisassignSlices ? (me + 1) % n : me;
  std::vector<const void*> sources(n);
  for (int64_t offset = 0; offset < longest; offset += sub_elements) {
    const uint64_t step = BeginStep(deadline);
    char* mine = slot(me, step);
    // Only the blocks the peers reduce; this rank's own is read in place.
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      const int64_t length = Clamp(block_elements[p], offset, sub_elements);
      std::memcpy(mine + p * sub_elements * element,
                  static_cast<const char*>(inputs[p]) + offset * element, length * element);
    }
    Publish(Phase::kCopied, step);
    WaitPeers(Phase::kCopied, step, deadline);
    const int64_t length = Clamp(block_elements[me], offset, sub_elements);
    for (int q = 0; q < n; ++q) {
      sources[q] = q == me && owned == me
                       ? static_cast<const char*>(inputs[me]) + offset * element
                       : slot(q, step) + owned * sub_elements * element;
    }
    ShmReduce(static_cast<char*>(output) + offset * element, sources.data(), n, length, dtype, op);
    Publish(Phase::kDone, step);
  }
}

void ShmGroup::AllGather(const void* input, const std::vector<void*>& outputs,
                         const std::vector<int64_t>& block_bytes, absl::Time deadline) {
  const int n = options_.local_size;
  const int me = options_.local_rank;
  const int64_t chunk = options_.slot_bytes;
  const int64_t longest = *std::max_element(block_bytes.begin(), block_bytes.end());
  const char* in = static_cast<const char*>(input);
  if (outputs[me] != input && block_bytes[me] > 0) {
    std::memcpy(outputs[me], input, block_bytes[me]);
  }
  for (int64_t offset = 0; offset < longest; offset += chunk) {
    const uint64_t step = BeginStep(deadline);
    std::memcpy(slot(me, step), in + offset, Clamp(block_bytes[me], offset, chunk));
    Publish(Phase::kCopied, step);
    WaitPeers(Phase::kCopied, step, deadline);
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      const int target = fault_ == ShmTestOnlyFault::kMisassignSlices ? (p + 1) % n : p;
      const int64_t length =
          std::min(Clamp(block_bytes[p], offset, chunk), Clamp(block_bytes[target], offset, chunk));
      std::memcpy(static_cast<char*>(outputs[target]) + offset, slot(p, step), length);
    }
    Publish(Phase::kDone, step);
  }
}

void ShmGroup::Broadcast(void* data, int64_t bytes, int root, absl::Time deadline) {
  const int me = options_.local_rank;
  const int64_t chunk = options_.slot_bytes;
  char* buffer = static_cast<char*>(data);
  int64_t chunks = (bytes + chunk - 1) / chunk;
  if (chunks == 0) return;
  // Within a chunk the root copies in pieces and after each stores
  // (step << 24) | pieces done in its slot header; a reader copies piece k
  // out as soon as it is there, so the readers copy chunk k's pieces while
  // the root copies the next ones (one copy in, one copy out, overlapped even
  // for a one-chunk message). A reader that spins too long waits for the
  // whole chunk (`copied`, futex) instead.
  const int64_t piece = std::max<int64_t>(64, chunk / kBroadcastPieces / 64 * 64);
  const auto progress = [&](uint64_t step) {
    return reinterpret_cast<std::atomic<uint64_t>*>(slot(root, step) - kSlotHeaderBytes +
                                                    kBroadcastProgressOffset);
  };
  // The root only produces: it is done with a chunk once it is in its slot,
  // and runs up to `slots` chunks ahead of the slowest reader.
  const auto produce = [&](int64_t index, uint64_t step) {
    if (me != root) return;
    const int64_t offset = index * chunk;
    const int64_t length = std::min(chunk, bytes - offset);
    uint64_t done = 0;
    for (int64_t at = 0; at < length; at += piece) {
      std::memcpy(slot(me, step) + at, buffer + offset + at, std::min(piece, length - at));
      progress(step)->store((step << 24) | ++done, std::memory_order_release);
    }
    Publish(Phase::kCopied, step);
    Publish(Phase::kDone, step);
  };
  const auto consume = [&](int64_t index, uint64_t step) {
    if (me == root) return;
    const int64_t offset = index * chunk;
    const int64_t length = std::min(chunk, bytes - offset);
    bool whole = false;
    uint64_t done = 0;
    for (int64_t at = 0; at < length; at += piece) {
      const uint64_t needed = (step << 24) | ++done;
      for (int spin = 0; !whole && progress(step)->load(std::memory_order_acquire) < needed;
           ++spin) {
        if (spin >= 4000) {
          WaitPeers(Phase::kCopied, step, deadline, root);
          whole = true;
        }
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      }
      // The planted fault: each chunk's first piece read one byte off (in
      // this piece path, so the tests see the path that runs).
      const int64_t shift =
          fault_ == ShmTestOnlyFault::kMisassignSlices && at == 0 ? std::min<int64_t>(1, length) : 0;
      std::memcpy(buffer + offset + at, slot(root, step) + at + shift,
                  std::min(piece, length - at) - shift);
    }
    Publish(Phase::kDone, step);
  };
  RunPipelined(&chunks, deadline, produce, consume);
}

void ShmGroup::AllToAll(const std::vector<const void*>& inputs,
                        const std::vector<int64_t>& send_bytes, const std::vector<void*>& outputs,
                        const std::vector<int64_t>& recv_bytes, absl::Time deadline) {
  const int n = options_.local_size;
  const int me = options_.local_rank;
  const int64_t sub = options_.slot_bytes / n / 64 * 64;
  // Only the pairs this rank is part of are known here; the step count is
  // the largest any rank needs, exchanged in the first step's slot header.
  int64_t longest = 0;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    longest = std::max({longest, send_bytes[p], recv_bytes[p]});
  }
  if (send_bytes[me] > 0) std::memcpy(outputs[me], inputs[me], send_bytes[me]);
  uint64_t steps = static_cast<uint64_t>((longest + sub - 1) / sub);
  for (uint64_t index = 0; index < std::max<uint64_t>(steps, 1); ++index) {
    const int64_t offset = static_cast<int64_t>(index) * sub;
    const uint64_t step = BeginStep(deadline);
    char* mine = slot(me, step);
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      std::memcpy(mine + p * sub, static_cast<const char*>(inputs[p]) + offset,
                  Clamp(send_bytes[p], offset, sub));
    }
    if (index == 0) std::memcpy(mine - kSlotHeaderBytes, &steps, sizeof(steps));
    Publish(Phase::kCopied, step);
    WaitPeers(Phase::kCopied, step, deadline);
    if (index == 0) {
      for (int p = 0; p < n; ++p) {
        uint64_t theirs = 0;
        std::memcpy(&theirs, slot(p, step) - kSlotHeaderBytes, sizeof(theirs));
        steps = std::max(steps, theirs);
      }
    }
    for (int q = 0; q < n; ++q) {
      if (q == me) continue;
      const int source = fault_ == ShmTestOnlyFault::kMisassignSlices ? (me + 1) % n : me;
      std::memcpy(static_cast<char*>(outputs[q]) + offset, slot(q, step) + source * sub,
                  Clamp(recv_bytes[q], offset, sub));
    }
    Publish(Phase::kDone, step);
  }
}

void ShmGroup::Barrier(absl::Time deadline) {
  const uint64_t step = BeginStep(deadline);
  Publish(Phase::kCopied, step);
  WaitPeers(Phase::kCopied, step, deadline);
  Publish(Phase::kDone, step);
}

}  // namespace mtb::collective
