#include "trainer/checkpoint/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/sha256.h"
#include "common/base/status.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "trainer/checkpoint/shard_file.h"

namespace mtb::checkpoint {
namespace {

constexpr char kManifest[] = "manifest.json";
constexpr char kReady[] = "READY";
constexpr char kLatest[] = "latest";
// Write-back is started every this many bytes of a shard file.
constexpr size_t kWriteChunkBytes = size_t{8} << 20;

std::string Join(const std::string& dir, const std::string& name) {
  return absl::StrCat(dir, "/", name);
}

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(path, ": ", what, ": ", std::strerror(errno)));
}

absl::Status FsyncPath(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) return Errno("open for fsync", path);
  const int synced = ::fsync(fd);
  ::close(fd);
  if (synced != 0) return Errno("fsync", path);
  return absl::OkStatus();
}

// A file written in pieces, hashed as it goes (unless the caller hashes
// the same bytes itself: `hash` false), fsynced on Close.
class HashedFile {
 public:
  static absl::StatusOr<HashedFile> Create(const std::string& path, bool hash = true) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return Errno("create", path);
    return HashedFile(path, fd, hash);
  }
  HashedFile(HashedFile&& other) noexcept
      : path_(std::move(other.path_)),
        fd_(other.fd_),
        hash_(other.hash_),
        size_(other.size_),
        started_(other.started_) {
    other.fd_ = -1;
  }
  ~HashedFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  // Writes `bytes` in chunks (hashing them, unless the caller does) and
  // starts the write-back of every kWriteChunkBytes written
  // (sync_file_range, across calls: most tensors are smaller), so the disk
  // works while more is written and the final fsync only waits for the
  // tail instead of for the whole file.
  absl::Status Write(absl::string_view bytes) {
    while (!bytes.empty()) {
      const absl::string_view chunk = bytes.substr(0, kWriteChunkBytes);
      bytes.remove_prefix(chunk.size());
      if (hash_) hasher_.Update(chunk);
      size_t done = 0;
      while (done < chunk.size()) {
        const ssize_t n = ::write(fd_, chunk.data() + done, chunk.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return Errno("write", path_);
        done += static_cast<size_t>(n);
      }
      size_ += static_cast<int64_t>(chunk.size());
      if (size_ - started_ >= static_cast<int64_t>(kWriteChunkBytes)) {
        // Advisory: a failure here only loses the overlap; fsync reports
        // real errors.
        (void)::sync_file_range(fd_, started_, size_ - started_, SYNC_FILE_RANGE_WRITE);
        started_ = size_;
      }
    }
    return absl::OkStatus();
  }
  // `sha256`: the caller's hash of every byte written (with `hash` false).
  absl::StatusOr<FileEntry> Close(const std::string& name, std::string sha256 = "") {
    if (::fsync(fd_) != 0) return Errno("fsync", path_);
    if (::close(fd_) != 0) {
      fd_ = -1;
      return Errno("close", path_);
    }
    fd_ = -1;
    FileEntry entry;
    entry.set_name(name);
    entry.set_size(size_);
    entry.set_sha256(hash_ ? hasher_.FinishHex() : std::move(sha256));
    return entry;
  }

 private:
  HashedFile(std::string path, int fd, bool hash)
      : path_(std::move(path)), fd_(fd), hash_(hash) {}
  std::string path_;
  int fd_;
  bool hash_;
  int64_t size_ = 0;
  int64_t started_ = 0;  // bytes whose write-back has been started
  Sha256Hasher hasher_;
};

// A whole file written and fsynced (not hashed for a report).
absl::Status WriteDurably(const std::string& path, absl::string_view contents) {
  ASSIGN_OR_RETURN(HashedFile file, HashedFile::Create(path));
  RETURN_IF_ERROR(file.Write(contents));
  return file.Close(BaseName(path)).status();
}

absl::Status RemoveTree(const std::string& path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0) return absl::OkStatus();
  if (S_ISDIR(info.st_mode)) {
    DIR* listing = ::opendir(path.c_str());
    if (listing == nullptr) return Errno("opendir", path);
    std::vector<std::string> names;
    while (dirent* entry = ::readdir(listing)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(listing);
    for (const std::string& name : names) RETURN_IF_ERROR(RemoveTree(Join(path, name)));
    if (::rmdir(path.c_str()) != 0) return Errno("rmdir", path);
    return absl::OkStatus();
  }
  if (::unlink(path.c_str()) != 0) return Errno("unlink", path);
  return absl::OkStatus();
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* listing = ::opendir(dir.c_str());
  if (listing == nullptr) return names;
  while (dirent* entry = ::readdir(listing)) names.push_back(entry->d_name);
  ::closedir(listing);
  std::sort(names.begin(), names.end());
  return names;
}

// Step directories under `root`, newest first.
std::vector<std::pair<int64_t, std::string>> StepDirs(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> dirs;
  for (const std::string& name : ListDir(root)) {
    const int64_t step = StepOfDirName(name);
    if (step >= 0) dirs.emplace_back(step, name);
  }
  std::sort(dirs.rbegin(), dirs.rend());
  return dirs;
}

// The name `latest` holds, or "" (missing or not one line naming a step).
std::string ReadLatestName(const std::string& root, std::string* problem) {
  absl::StatusOr<std::string> text = ReadFileToString(Join(root, kLatest));
  if (!text.ok()) {
    *problem = "there is no `latest` pointer";
    return "";
  }
  const std::string name(absl::StripAsciiWhitespace(*text));
  if (StepOfDirName(name) < 0) {
    *problem = absl::StrCat("`latest` is garbage ('", absl::CEscape(name.substr(0, 40)), "')");
    return "";
  }
  return name;
}

}  // namespace

std::string StepDirName(int64_t step) { return absl::StrFormat("step_%08d", step); }
std::string StagingDirName(int64_t step) { return absl::StrFormat(".step_%08d.tmp", step); }

int64_t StepOfDirName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "step_") || name.empty()) return -1;
  for (char c : name) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return -1;
  }
  int64_t step = -1;
  return absl::SimpleAtoi(name, &step) ? step : -1;
}

int64_t ElementBytes(absl::string_view dtype) {
  if (dtype == "float32" || dtype == "int32") return 4;
  if (dtype == "bfloat16" || dtype == "float16") return 2;
  if (dtype == "int64" || dtype == "float64") return 8;
  if (dtype == "uint8") return 1;
  return 0;
}

absl::StatusOr<std::string> PrepareStaging(const std::string& root, int64_t step) {
  const std::string staging = Join(root, StagingDirName(step));
  RETURN_IF_ERROR(RemoveTree(staging));
  RETURN_IF_ERROR(CreateDirectories(staging));
  return staging;
}

absl::Status DiscardStaging(const std::string& root, int64_t step) {
  return RemoveTree(Join(root, StagingDirName(step)));
}

absl::StatusOr<RankReport> WriteRankFiles(const std::string& staging, int rank,
                                          const std::vector<TensorShard>& shards,
                                          const RankState& state,
                                          const Hooks& hooks) {
  RETURN_IF_ERROR(CreateDirectories(staging));
  for (const TensorShard& shard : shards) {
    const int64_t element_bytes = ElementBytes(shard.dtype);
    if (element_bytes == 0 ||
        static_cast<int64_t>(shard.bytes.size()) != shard.length * element_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          shard.name, ": ", shard.bytes.size(), " bytes for ", shard.length,
          " elements of ", shard.dtype));
    }
  }
  const std::string bin_name = absl::StrFormat("rank_%05d.bin", rank);
  ShardHeader header;
  header.rank = static_cast<uint32_t>(rank);
  header.tensor_count = static_cast<uint32_t>(shards.size());
  const std::string header_bytes = EncodeShardHeader(header);
  // The shard file's SHA-256 is computed on a second thread over the same
  // bytes while this one writes them (still one pass over the bytes, not a
  // second read of the file): a write that blocks on the disk then does not
  // stall the hashing, nor the hashing the disk.
  // Each tensor's range gets its own SHA-256 (the manifest's placement
  // digest: a reader hashes only the ranges it reads), on a third thread, so
  // the second digest of the same bytes costs no wall time where a core is
  // free.
  ASSIGN_OR_RETURN(HashedFile bin, HashedFile::Create(Join(staging, bin_name), /*hash=*/false));
  Sha256Hasher bin_hash;
  std::thread hashing([&] {
    bin_hash.Update(header_bytes);
    for (const TensorShard& shard : shards) bin_hash.Update(shard.bytes);
  });
  std::vector<std::string> range_digests(shards.size());
  std::thread range_hashing([&] {
    for (size_t i = 0; i < shards.size(); ++i) range_digests[i] = Sha256Hex(shards[i].bytes);
  });
  struct JoinOnExit {  // also when a test hook throws
    std::thread& thread;
    ~JoinOnExit() {
      if (thread.joinable()) thread.join();
    }
  } join_on_exit{hashing}, join_range_on_exit{range_hashing};
  RETURN_IF_ERROR(bin.Write(header_bytes));
  int64_t total = 0;
  for (const TensorShard& shard : shards) total += static_cast<int64_t>(shard.bytes.size());
  RankReport report;
  report.set_rank(rank);
  int64_t byte_offset = kShardHeaderBytes, written = 0;
  bool mid_called = false;
  for (const TensorShard& shard : shards) {
    // A crash "mid-shard" (the fault hook) happens after half the rank's
    // bytes are written.
    const int64_t size = static_cast<int64_t>(shard.bytes.size());
    if (!mid_called && written + size > total / 2) {
      const size_t first = static_cast<size_t>(total / 2 - written);
      RETURN_IF_ERROR(bin.Write(shard.bytes.substr(0, first)));
      mid_called = true;
      if (hooks.mid_shard_write) hooks.mid_shard_write();
      RETURN_IF_ERROR(bin.Write(shard.bytes.substr(first)));
    } else {
      RETURN_IF_ERROR(bin.Write(shard.bytes));
    }
    written += static_cast<int64_t>(shard.bytes.size());
    TensorEntry* tensor = report.add_tensors();
    tensor->set_name(shard.name);
    tensor->set_dtype(shard.dtype);
    for (int64_t d : shard.global_shape) tensor->add_global_shape(d);
    ShardPlacement* placement = tensor->add_shards();
    placement->set_rank(rank);
    placement->set_offset(shard.offset);
    placement->set_length(shard.length);
    placement->set_file(bin_name);
    placement->set_byte_offset(byte_offset);
    placement->set_byte_length(static_cast<int64_t>(shard.bytes.size()));
    byte_offset += static_cast<int64_t>(shard.bytes.size());
  }
  hashing.join();
  range_hashing.join();
  for (int i = 0; i < report.tensors_size(); ++i) {
    report.mutable_tensors(i)->mutable_shards(0)->set_sha256(range_digests[i]);
  }
  ASSIGN_OR_RETURN(*report.add_files(), bin.Close(bin_name, bin_hash.FinishHex()));
  const std::string meta_name = absl::StrFormat("rank_%05d.meta", rank);
  ASSIGN_OR_RETURN(HashedFile meta, HashedFile::Create(Join(staging, meta_name)));
  RankState own = state;
  own.set_rank(rank);
  RETURN_IF_ERROR(meta.Write(ToJson(own)));
  ASSIGN_OR_RETURN(*report.add_files(), meta.Close(meta_name));
  return report;
}

absl::Status Publish(const std::string& root, CheckpointManifest manifest,
                     const std::vector<RankReport>& reports, const Hooks& hooks) {
  const std::string staging = Join(root, StagingDirName(manifest.step()));
  // Merge every rank's pieces of each tensor into one entry, in name order.
  std::map<std::string, TensorEntry> tensors;
  for (const RankReport& report : reports) {
    for (const FileEntry& file : report.files()) *manifest.add_files() = file;
    for (const TensorEntry& piece : report.tensors()) {
      TensorEntry& entry = tensors[piece.name()];
      if (entry.name().empty()) {
        entry = piece;
        entry.clear_shards();
      }
      for (const ShardPlacement& shard : piece.shards()) *entry.add_shards() = shard;
    }
  }
  for (auto& [name, entry] : tensors) {
    std::sort(entry.mutable_shards()->begin(), entry.mutable_shards()->end(),
              [](const ShardPlacement& a, const ShardPlacement& b) { return a.offset() < b.offset(); });
    *manifest.add_tensors() = std::move(entry);
  }
  manifest.set_format_version(static_cast<int32_t>(kFormatVersion));
  manifest.set_saved_utc(absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()));
  // Staging is never read, so its files need no temp-and-rename: each is
  // durable (fsynced) before the next is written, and one fsync of the
  // directory makes their names durable before the rename publishes them.
  const std::string manifest_bytes = ToJson(manifest);
  RETURN_IF_ERROR(WriteDurably(Join(staging, kManifest), manifest_bytes));
  if (hooks.before_ready) hooks.before_ready();
  RETURN_IF_ERROR(
      WriteDurably(Join(staging, kReady), ReadyFileContents(manifest.run_id(), manifest_bytes)));
  RETURN_IF_ERROR(FsyncPath(staging, /*directory=*/true));
  const std::string final_dir = Join(root, StepDirName(manifest.step()));
  std::string aside;
  if (PathExists(final_dir)) {
    // Another run's checkpoint is never replaced (nor deleted).
    if (absl::StatusOr<CheckpointManifest> existing = ReadManifest(final_dir);
        existing.ok() && PathExists(Join(final_dir, kReady)) &&
        existing->run_id() != manifest.run_id()) {
      return absl::FailedPreconditionError(absl::StrCat(
          final_dir, " is a checkpoint of run ", existing->run_id(), ", not of this run (",
          manifest.run_id(), "): it is left alone and this save is not published"));
    }
    // An orphan of this step (READY, never named by `latest`) or a failed
    // earlier attempt: move it aside first, delete it only once published.
    aside = Join(root, absl::StrCat(".", StepDirName(manifest.step()), ".replaced"));
    RETURN_IF_ERROR(RemoveTree(aside));
    if (::rename(final_dir.c_str(), aside.c_str()) != 0) return Errno("rename aside", final_dir);
  }
  if (::rename(staging.c_str(), final_dir.c_str()) != 0) return Errno("rename", staging);
  RETURN_IF_ERROR(FsyncPath(root, /*directory=*/true));
  if (hooks.before_latest) hooks.before_latest();
  RETURN_IF_ERROR(WriteFileAtomically(Join(root, kLatest), absl::StrCat(StepDirName(manifest.step()), "\n")));
  if (!aside.empty()) RETURN_IF_ERROR(RemoveTree(aside));
  return absl::OkStatus();
}

absl::StatusOr<Resolved> ResolveLatest(const std::string& root,
                                       const std::string& trusted_manifest_sha256,
                                       bool defer_hashing) {
  Resolved resolved;
  auto take = [&](const std::string& dir, VerifiedCheckpoint verified) {
    resolved.dir = dir;
    resolved.manifest = std::move(verified.manifest);
    resolved.manifest_sha256 = std::move(verified.manifest_sha256);
  };
  std::string problem;
  const std::string named = ReadLatestName(root, &problem);
  if (!named.empty()) {
    const std::string dir = Join(root, named);
    absl::StatusOr<VerifiedCheckpoint> verified =
        VerifyCheckpoint(dir, trusted_manifest_sha256, defer_hashing);
    if (verified.ok()) {
      take(dir, *std::move(verified));
      for (const auto& [step, name] : StepDirs(root)) {
        if (step > resolved.manifest.step() && PathExists(Join(Join(root, name), kReady))) {
          resolved.notes.push_back(absl::StrCat(
              "ignoring ", name, ": READY but never named by `latest` (an orphan of a save "
              "interrupted before its pointer; a later save of that step replaces it)"));
        }
      }
      return resolved;
    }
    problem = absl::StrCat("`latest` names ", named, ", which fails verification (",
                           verified.status().message(), ")");
  }
  for (const auto& [step, name] : StepDirs(root)) {
    const std::string dir = Join(root, name);
    absl::StatusOr<VerifiedCheckpoint> verified =
        VerifyCheckpoint(dir, trusted_manifest_sha256, defer_hashing);
    if (!verified.ok()) {
      resolved.notes.push_back(absl::StrCat("skipping ", name, ": ", verified.status().message()));
      continue;
    }
    take(dir, *std::move(verified));
    resolved.latest_problem = problem;
    resolved.notes.insert(resolved.notes.begin(),
                          absl::StrCat(problem, ": falling back to ", name,
                                       ", the newest READY checkpoint that verifies"));
    return resolved;
  }
  return absl::NotFoundError(absl::StrCat(root, ": no usable checkpoint (", problem,
                                          "; no READY checkpoint verifies)"));
}

absl::StatusOr<RankCheckpoint> ReadRank(const std::string& dir, int rank) {
  ASSIGN_OR_RETURN(const CheckpointManifest manifest, ReadManifest(dir));
  RankCheckpoint out;
  std::map<std::string, std::string> files;
  for (const TensorEntry& tensor : manifest.tensors()) {
    for (const ShardPlacement& shard : tensor.shards()) {
      if (shard.rank() != rank) continue;
      auto file = files.find(shard.file());
      if (file == files.end()) {
        ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(Join(dir, shard.file())));
        RETURN_IF_ERROR(DecodeShardHeader(bytes, Join(dir, shard.file())).status());
        file = files.emplace(shard.file(), std::move(bytes)).first;
      }
      if (shard.byte_offset() + shard.byte_length() > static_cast<int64_t>(file->second.size())) {
        return absl::DataLossError(absl::StrCat(Join(dir, shard.file()), ": truncated"));
      }
      out.tensors[tensor.name()] = file->second.substr(shard.byte_offset(), shard.byte_length());
      out.placements[tensor.name()] = shard;
    }
  }
  const std::string meta = Join(dir, absl::StrFormat("rank_%05d.meta", rank));
  RETURN_IF_ERROR(ReadJsonFile(meta, &out.state));
  return out;
}

absl::Status ReadTensorRanges(const std::string& dir,
                              const CheckpointManifest& manifest,
                              const std::vector<RangeRequest>& requests) {
  std::map<std::string, const TensorEntry*> tensors;
  for (const TensorEntry& tensor : manifest.tensors()) tensors[tensor.name()] = &tensor;
  struct OpenFile {
    int fd = -1;
    int64_t size = 0;
  };
  std::map<std::string, OpenFile> files;
  auto close_all = [&files] {
    for (auto& [name, file] : files) ::close(file.fd);
  };
  auto open = [&](const std::string& name) -> absl::StatusOr<OpenFile> {
    auto found = files.find(name);
    if (found != files.end()) return found->second;
    const std::string path = Join(dir, name);
    OpenFile file;
    file.fd = ::open(path.c_str(), O_RDONLY);
    if (file.fd < 0) {
      if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": missing"));
      return Errno("open", path);
    }
    files[name] = file;  // closed by close_all from here on
    struct stat info;
    if (::fstat(file.fd, &info) != 0) return Errno("stat", path);
    file.size = info.st_size;
    files[name] = file;
    std::string header(kShardHeaderBytes, '\0');
    if (::pread(file.fd, header.data(), header.size(), 0) != kShardHeaderBytes) {
      return absl::DataLossError(absl::StrCat(path, ": truncated: shorter than the header"));
    }
    RETURN_IF_ERROR(DecodeShardHeader(header, path).status());
    return file;
  };
  absl::Status status = [&]() -> absl::Status {
    for (const RangeRequest& request : requests) {
      auto found = tensors.find(request.name);
      if (found == tensors.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat(dir, ": the checkpoint has no tensor ", request.name));
      }
      const TensorEntry& tensor = *found->second;
      const std::vector<int64_t> shape(tensor.global_shape().begin(),
                                       tensor.global_shape().end());
      if (tensor.dtype() != request.dtype || shape != request.global_shape) {
        return absl::FailedPreconditionError(absl::StrCat(
            dir, ": ", request.name, " is ", tensor.dtype(), " [",
            absl::StrJoin(shape, ", "), "] in the checkpoint, ", request.dtype, " [",
            absl::StrJoin(request.global_shape, ", "), "] here"));
      }
      const int64_t element_bytes = ElementBytes(tensor.dtype());
      int64_t next = request.offset;  // the first element not read yet
      const int64_t end = request.offset + request.length;
      for (const ShardPlacement& shard : tensor.shards()) {  // sorted by offset
        const int64_t from = std::max(next, shard.offset());
        const int64_t to = std::min(end, shard.offset() + shard.length());
        if (from >= to) continue;
        if (from != next) break;  // a gap: reported below
        ASSIGN_OR_RETURN(const OpenFile file, open(shard.file()));
        const int64_t at = shard.byte_offset() + (from - shard.offset()) * element_bytes;
        const int64_t bytes = (to - from) * element_bytes;
        if (at + bytes > file.size) {
          return absl::DataLossError(absl::StrCat(Join(dir, shard.file()), ": truncated: ",
                                                  file.size, " bytes, ", request.name,
                                                  " needs up to byte ", at + bytes));
        }
        char* out = request.destination + (from - request.offset) * element_bytes;
        int64_t done = 0;
        while (done < bytes) {
          const ssize_t n = ::pread(file.fd, out + done, static_cast<size_t>(bytes - done), at + done);
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) return Errno("read", Join(dir, shard.file()));
          done += n;
        }
        next = to;
      }
      if (next != end) {
        return absl::DataLossError(absl::StrCat(dir, ": ", request.name, ": elements ", next,
                                                "..", end, " are in no shard"));
      }
    }
    return absl::OkStatus();
  }();
  close_all();
  return status;
}

std::vector<CheckpointListing> ListCheckpoints(const std::string& root) {
  std::vector<CheckpointListing> listing;
  for (const auto& [step, name] : StepDirs(root)) {
    CheckpointListing entry;
    entry.step = step;
    entry.name = name;
    entry.ready = PathExists(Join(Join(root, name), kReady));
    if (absl::StatusOr<CheckpointManifest> manifest = ReadManifest(Join(root, name));
        manifest.ok()) {
      entry.run_id = manifest->run_id();
    }
    listing.push_back(entry);
  }
  return listing;
}

std::vector<PruneDecision> PlanPrune(const std::string& root, const std::string& run_id,
                                     int keep_last) {
  std::vector<PruneDecision> decisions;
  std::string problem;
  const std::string latest = ReadLatestName(root, &problem);
  int kept = 0;
  const auto dirs = StepDirs(root);
  for (size_t i = 0; i < dirs.size(); ++i) {
    PruneDecision decision;
    decision.name = dirs[i].second;
    const std::string dir = Join(root, decision.name);
    absl::StatusOr<CheckpointManifest> manifest = ReadManifest(dir);
    if (!PathExists(Join(dir, kReady))) {
      decision.why = "not READY (a save in progress or a crash's orphan): not pruned";
    } else if (!manifest.ok() || manifest->run_id() != run_id) {
      decision.why = absl::StrCat("another run (", manifest.ok() ? manifest->run_id() : "unreadable",
                                  ")");
    } else if (keep_last <= 0 || kept < keep_last) {
      ++kept;
      decision.why = absl::StrCat("one of the newest ", keep_last <= 0 ? 0 : keep_last);
      if (keep_last <= 0) decision.why = "--keep_last=0 keeps every checkpoint";
    } else if (decision.name == latest) {
      ++kept;
      decision.why = "`latest` names it";
    } else if (i == 0) {
      ++kept;
      decision.why = "the newest";
    } else {
      decision.remove = true;
      decision.why = absl::StrCat("beyond the newest ", keep_last, " of run ", run_id);
    }
    decisions.push_back(std::move(decision));
  }
  return decisions;
}

absl::StatusOr<std::vector<std::string>> Prune(const std::string& root,
                                               const std::string& run_id, int keep_last) {
  std::vector<std::string> deleted;
  if (keep_last <= 0) return deleted;
  for (const PruneDecision& decision : PlanPrune(root, run_id, keep_last)) {
    if (!decision.remove) continue;
    RETURN_IF_ERROR(RemoveTree(Join(root, decision.name)));
    deleted.push_back(decision.name);
  }
  if (!deleted.empty()) RETURN_IF_ERROR(FsyncPath(root, /*directory=*/true));
  return deleted;
}

absl::StatusOr<std::string> LatestRunId(const std::string& root) {
  std::string problem;
  const std::string latest = ReadLatestName(root, &problem);
  if (!latest.empty()) {
    if (absl::StatusOr<CheckpointManifest> manifest = ReadManifest(Join(root, latest));
        manifest.ok()) {
      return manifest->run_id();
    }
  }
  for (const CheckpointListing& entry : ListCheckpoints(root)) {
    if (entry.ready && !entry.run_id.empty()) return entry.run_id;
  }
  return absl::NotFoundError(absl::StrCat(root, ": no READY checkpoint with a readable manifest"));
}

absl::StatusOr<std::string> CorruptShardFile(const std::string& dir, int rank) {
  const std::string path = Join(dir, absl::StrFormat("rank_%05d.bin", rank));
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  struct stat info = {};
  char byte = 0;
  bool ok = ::fstat(fd, &info) == 0 && info.st_size > 0;
  const off_t middle = ok ? info.st_size / 2 : 0;
  ok = ok && ::pread(fd, &byte, 1, middle) == 1;
  byte = static_cast<char>(byte ^ 0xff);
  ok = ok && ::pwrite(fd, &byte, 1, middle) == 1 && ::fsync(fd) == 0;
  const int saved_errno = errno;
  ::close(fd);
  if (!ok) return absl::InternalError(absl::StrCat(path, ": ", std::strerror(saved_errno)));
  return path;
}

}  // namespace mtb::checkpoint
