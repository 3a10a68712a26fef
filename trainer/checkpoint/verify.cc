// Verification of a published checkpoint (docs/checkpoint.md "Integrity").
// Vocabulary:
//
//   READY     the publish marker, written after the manifest. Its whole
//             content is a function of the manifest's bytes (format, run
//             id, the manifest's SHA-256: ReadyFileContents), so a change of
//             any byte of READY or of the manifest is caught before anything
//             the manifest says is trusted.
//   manifest  manifest.json: every file's size and SHA-256, and where every
//             tensor's elements are. Trusted only once READY vouches for it.
//   structure what the manifest says checked against itself and the files'
//             sizes and headers: file names, ranks, shard headers (format,
//             rank, tensor count), byte ranges tiling each shard file,
//             elements covered exactly once, each rank's state file.
//   content   every file's SHA-256. A rank whose launcher verified the same
//             manifest digest (trusted_manifest_sha256) checks structure
//             only: each byte is hashed once per resume. A rank with no
//             launcher's verdict (torchrun) checks structure here and hashes
//             what it reads when it loads (defer_hashing,
//             HashCheckpointReads): each tensor's range by its own digest
//             (ShardPlacement.sha256), so a rank reading 8 bytes of a file
//             hashes 8 bytes. A checkpoint written before range digests has
//             none: its shard files are hashed whole, as before.
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
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/sha256.h"
#include "common/base/status.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/shard_file.h"

namespace mtb::checkpoint {
namespace {

constexpr char kManifest[] = "manifest.json";
constexpr char kReady[] = "READY";
constexpr size_t kReadChunkBytes = size_t{8} << 20;

std::string Join(const std::string& dir, const std::string& name) {
  return absl::StrCat(dir, "/", name);
}

absl::Status Corrupt(const std::string& path, absl::string_view problem) {
  return absl::DataLossError(absl::StrCat(path, ": corrupt: ", problem));
}

// What one file of the checkpoint holds, as far as verification reads it.
struct FileFacts {
  int64_t size = 0;
  std::string header;  // the first kShardHeaderBytes bytes (or fewer)
  std::string sha256;  // "" when not hashed
  std::string text;    // the whole file, for a rank's state file
};

absl::StatusOr<FileFacts> ReadFacts(const std::string& path, bool hash, bool keep_text) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, ": missing (listed in the manifest)"));
    }
    return absl::InternalError(absl::StrCat(path, ": open: ", std::strerror(errno)));
  }
  FileFacts facts;
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat(path, ": stat: ", std::strerror(errno)));
  }
  facts.size = info.st_size;
  Sha256Hasher hasher;
  std::string buffer(hash || keep_text ? kReadChunkBytes : static_cast<size_t>(kShardHeaderBytes),
                     '\0');
  int64_t at = 0;
  while (true) {
    const ssize_t n = ::pread(fd, buffer.data(), buffer.size(), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      ::close(fd);
      return absl::DataLossError(absl::StrCat(path, ": read: ", std::strerror(saved)));
    }
    if (n == 0) break;
    const absl::string_view chunk(buffer.data(), static_cast<size_t>(n));
    if (facts.header.size() < static_cast<size_t>(kShardHeaderBytes)) {
      const absl::string_view head = chunk.substr(0, kShardHeaderBytes - facts.header.size());
      facts.header.append(head.data(), head.size());
    }
    if (hash) hasher.Update(chunk);
    if (keep_text) facts.text.append(chunk.data(), chunk.size());
    at += n;
    if (!hash && !keep_text) break;
  }
  ::close(fd);
  if (hash) facts.sha256 = hasher.FinishHex();
  return facts;
}

// "rank_00003.bin" -> 3 and "bin"; -1 for any other name (only the
// names WriteRankFiles gives are accepted: a manifest cannot point outside
// its directory).
int RankOfFileName(const std::string& name, std::string* suffix) {
  for (const char* kind : {"bin", "meta"}) {
    int rank = -1;
    if (std::sscanf(name.c_str(), "rank_%d.", &rank) == 1 && rank >= 0 &&
        name == absl::StrFormat("rank_%05d.%s", rank, kind)) {
      *suffix = kind;
      return rank;
    }
  }
  return -1;
}

// READY's digest of the manifest, or why READY does not vouch for it.
absl::StatusOr<std::string> ReadyDigest(const std::string& dir, absl::string_view ready) {
  const std::string path = Join(dir, kReady);
  std::map<std::string, std::string> fields;
  for (absl::string_view line : absl::StrSplit(ready, '\n', absl::SkipEmpty())) {
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    fields[std::string(line.substr(0, space))] = std::string(line.substr(space + 1));
  }
  if (fields.count("format") == 0 || fields.count("manifest.json sha256") == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": holds no manifest digest: a checkpoint of format 1 (before manifests were "
              "protected) or a damaged READY; this build reads format ",
        kFormatVersion, " only and does not trust an unprotected manifest"));
  }
  if (fields["format"] != absl::StrCat(kFormatVersion)) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": format ", fields["format"],
                                                      ", this build reads format ",
                                                      kFormatVersion));
  }
  return fields["manifest.json sha256"];
}

absl::Status CheckStructure(const std::string& dir, const CheckpointManifest& manifest,
                            const std::map<std::string, FileFacts>& files) {
  const std::string manifest_path = Join(dir, kManifest);
  if (manifest.format_version() != static_cast<int32_t>(kFormatVersion)) {
    return Corrupt(manifest_path, absl::StrCat("format version ", manifest.format_version(),
                                               ", READY says ", kFormatVersion));
  }
  if (manifest.world_size() < 1) {
    return Corrupt(manifest_path, absl::StrCat("world size ", manifest.world_size()));
  }
  const int64_t dir_step = StepOfDirName(BaseName(dir));
  if (dir_step >= 0 && dir_step != manifest.step()) {
    return Corrupt(manifest_path, absl::StrCat("step ", manifest.step(), " in directory ",
                                               BaseName(dir)));
  }
  // Every rank wrote one shard file and one state file, named by its rank.
  std::set<std::string> expected;
  for (int rank = 0; rank < manifest.world_size(); ++rank) {
    expected.insert(absl::StrFormat("rank_%05d.bin", rank));
    expected.insert(absl::StrFormat("rank_%05d.meta", rank));
  }
  std::set<std::string> listed;
  for (const auto& [name, facts] : files) listed.insert(name);
  if (listed != expected) {
    std::vector<std::string> extra, absent;
    std::set_difference(listed.begin(), listed.end(), expected.begin(), expected.end(),
                        std::back_inserter(extra));
    std::set_difference(expected.begin(), expected.end(), listed.begin(), listed.end(),
                        std::back_inserter(absent));
    return Corrupt(manifest_path,
                   absl::StrCat("its files are not one rank_NNNNN.bin and .meta per rank of "
                                "world size ",
                                manifest.world_size(), extra.empty() ? "" : " (unexpected: ",
                                absl::StrJoin(extra, ", "), extra.empty() ? "" : ")",
                                absent.empty() ? "" : " (absent: ", absl::StrJoin(absent, ", "),
                                absent.empty() ? "" : ")"));
  }
  // Placements per shard file, to check against its header and size.
  std::map<std::string, std::vector<const ShardPlacement*>> placements;
  for (const TensorEntry& tensor : manifest.tensors()) {
    int64_t elements = 1;
    for (int64_t d : tensor.global_shape()) {
      if (d < 0 || (d > 0 && elements > (int64_t{1} << 50) / d)) {
        return Corrupt(manifest_path, absl::StrCat(tensor.name(), ": shape out of range"));
      }
      elements *= d;
    }
    const int64_t element_bytes = ElementBytes(tensor.dtype());
    if (element_bytes == 0) {
      return Corrupt(manifest_path,
                     absl::StrCat(tensor.name(), ": unknown dtype ", tensor.dtype()));
    }
    int64_t covered = 0;
    for (const ShardPlacement& shard : tensor.shards()) {
      if (shard.offset() != covered || shard.length() < 0) {
        return absl::DataLossError(absl::StrCat(
            tensor.name(), ": elements ", std::min(covered, shard.offset()), "..",
            std::max(covered, shard.offset()),
            shard.offset() > covered ? " are in no shard" : " are in two shards"));
      }
      std::string suffix;
      if (files.count(shard.file()) == 0 || RankOfFileName(shard.file(), &suffix) != shard.rank() ||
          suffix != "bin") {
        return absl::DataLossError(absl::StrCat(tensor.name(), ": shard file ", shard.file(),
                                                " of rank ", shard.rank(),
                                                " is not that rank's shard file in the manifest"));
      }
      if (shard.byte_length() != shard.length() * element_bytes ||
          shard.byte_offset() < kShardHeaderBytes ||
          shard.byte_offset() + shard.byte_length() > files.at(shard.file()).size) {
        return absl::DataLossError(absl::StrCat(tensor.name(), ": bytes [", shard.byte_offset(),
                                                ", +", shard.byte_length(), ") do not fit ",
                                                shard.file()));
      }
      placements[shard.file()].push_back(&shard);
      covered += shard.length();
    }
    if (covered != elements) {
      return absl::DataLossError(absl::StrCat(tensor.name(), ": shards cover ", covered, " of ",
                                              elements, " elements"));
    }
  }
  for (const auto& [name, facts] : files) {
    const std::string path = Join(dir, name);
    std::string suffix;
    const int rank = RankOfFileName(name, &suffix);
    if (suffix == "meta") {
      RankState state;
      if (absl::Status parsed = FromJson(facts.text, &state); !parsed.ok()) {
        return Corrupt(path, parsed.message());
      }
      if (state.rank() != rank || state.step() != manifest.step()) {
        return Corrupt(path, absl::StrCat("it is rank ", state.rank(), "'s state at step ",
                                          state.step(), ", the manifest's rank ", rank,
                                          " at step ", manifest.step()));
      }
      continue;
    }
    ASSIGN_OR_RETURN(const ShardHeader header, DecodeShardHeader(facts.header, path));
    std::vector<const ShardPlacement*>& mine = placements[name];
    if (static_cast<int>(header.rank) != rank || header.tensor_count != mine.size()) {
      return Corrupt(path, absl::StrCat("its header says rank ", header.rank, " with ",
                                        header.tensor_count, " tensors, the manifest rank ",
                                        rank, " with ", mine.size()));
    }
    // The tensors' bytes tile the file after the header, as written.
    std::sort(mine.begin(), mine.end(), [](const ShardPlacement* a, const ShardPlacement* b) {
      return a->byte_offset() < b->byte_offset();
    });
    int64_t next = kShardHeaderBytes;
    for (const ShardPlacement* shard : mine) {
      if (shard->byte_offset() != next) {
        return Corrupt(path, absl::StrCat("the manifest's byte ranges ",
                                          shard->byte_offset() < next ? "overlap" : "leave a gap",
                                          " at byte ", std::min(next, shard->byte_offset())));
      }
      next += shard->byte_length();
    }
    if (next != facts.size) {
      return Corrupt(path, absl::StrCat("the manifest's tensors end at byte ", next,
                                        ", the file at ", facts.size));
    }
  }
  return absl::OkStatus();
}

// A tensor's placement in a shard file, to be hashed by its own digest.
struct Range {
  const TensorEntry* tensor;
  const ShardPlacement* shard;
};

// Checks the bytes of `file` (of checkpoint `dir`) against the manifest:
// `ranges` (placements in that file) each against its own SHA-256 when every
// one of them has one, otherwise (a state file, a checkpoint written before
// range digests, or no ranges given) the whole file against the file's
// SHA-256. kDataLoss "corrupt" naming the file (and the tensor and its
// bytes for a range). Returns the bytes hashed.
absl::StatusOr<int64_t> HashFile(const std::string& dir, const FileEntry& file,
                                 const std::vector<Range>& ranges) {
  const std::string path = Join(dir, file.name());
  bool by_range = !ranges.empty();
  for (const Range& range : ranges) by_range &= !range.shard->sha256().empty();
  if (!by_range) {
    ASSIGN_OR_RETURN(const FileFacts facts, ReadFacts(path, /*hash=*/true, /*keep_text=*/false));
    if (facts.size != file.size()) {
      return Corrupt(path, absl::StrCat(facts.size, " bytes, the manifest says ", file.size(),
                                        facts.size < file.size() ? " (truncated)" : ""));
    }
    if (facts.sha256 != file.sha256()) return Corrupt(path, "SHA-256 differs from the manifest's");
    return facts.size;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, ": missing (listed in the manifest)"));
    }
    return absl::InternalError(absl::StrCat(path, ": open: ", std::strerror(errno)));
  }
  std::string buffer;
  int64_t hashed = 0;
  absl::Status status = absl::OkStatus();
  for (const Range& range : ranges) {
    const ShardPlacement& shard = *range.shard;
    buffer.resize(static_cast<size_t>(std::min<int64_t>(shard.byte_length(), kReadChunkBytes)));
    Sha256Hasher hasher;
    int64_t done = 0;
    while (done < shard.byte_length()) {
      const size_t want =
          static_cast<size_t>(std::min<int64_t>(shard.byte_length() - done, buffer.size()));
      const ssize_t n = ::pread(fd, buffer.data(), want, shard.byte_offset() + done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      hasher.Update(absl::string_view(buffer.data(), static_cast<size_t>(n)));
      done += n;
    }
    const std::string where = absl::StrCat("tensor ", range.tensor->name(), " (bytes [",
                                           shard.byte_offset(), ", +", shard.byte_length(),
                                           "))");
    if (done != shard.byte_length()) {
      status = Corrupt(path, absl::StrCat("truncated in ", where));
      break;
    }
    if (hasher.FinishHex() != shard.sha256()) {
      status = Corrupt(path, absl::StrCat("SHA-256 differs from the manifest's in ", where));
      break;
    }
    hashed += done;
  }
  ::close(fd);
  RETURN_IF_ERROR(status);
  return hashed;
}

}  // namespace

std::string ReadyFileContents(const std::string& run_id, absl::string_view manifest_bytes) {
  return absl::StrCat("mtb checkpoint\nformat ", kFormatVersion, "\nrun_id ", run_id,
                      "\nmanifest.json sha256 ", Sha256Hex(manifest_bytes), "\n");
}

absl::StatusOr<CheckpointManifest> ReadManifest(const std::string& dir) {
  CheckpointManifest manifest;
  const std::string path = Join(dir, kManifest);
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) return absl::NotFoundError(absl::StrCat(path, ": missing"));
    return text.status();
  }
  if (absl::Status parsed = FromJson(*text, &manifest); !parsed.ok()) {
    return absl::DataLossError(absl::StrCat(path, ": corrupt: ", parsed.message()));
  }
  return manifest;
}

absl::StatusOr<VerifiedCheckpoint> VerifyCheckpoint(const std::string& dir,
                                                    const std::string& trusted_manifest_sha256,
                                                    bool defer_hashing) {
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0) {
    return absl::NotFoundError(absl::StrCat(dir, ": not found"));
  }
  if (!S_ISDIR(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": not a directory (a checkpoint is a step_NNNNNNNN directory)"));
  }
  absl::StatusOr<std::string> ready = ReadFileToString(Join(dir, kReady));
  if (!ready.ok()) {
    if (!absl::IsNotFound(ready.status())) return ready.status();
    return absl::FailedPreconditionError(absl::StrCat(dir, ": no READY: the save never completed"));
  }
  // READY first: nothing the manifest says counts before READY vouches for
  // its bytes, and READY must be exactly what the manifest's bytes give.
  ASSIGN_OR_RETURN(const std::string recorded, ReadyDigest(dir, *ready));
  const std::string manifest_path = Join(dir, kManifest);
  absl::StatusOr<std::string> manifest_bytes = ReadFileToString(manifest_path);
  if (!manifest_bytes.ok()) {
    if (absl::IsNotFound(manifest_bytes.status())) {
      return absl::NotFoundError(absl::StrCat(manifest_path, ": missing"));
    }
    return manifest_bytes.status();
  }
  VerifiedCheckpoint verified;
  verified.manifest_sha256 = Sha256Hex(*manifest_bytes);
  if (verified.manifest_sha256 != recorded) {
    return Corrupt(manifest_path, "SHA-256 differs from the one READY records (the manifest "
                                  "was changed after the checkpoint was published)");
  }
  if (absl::Status parsed = FromJson(*manifest_bytes, &verified.manifest); !parsed.ok()) {
    return Corrupt(manifest_path, parsed.message());
  }
  if (*ready != ReadyFileContents(verified.manifest.run_id(), *manifest_bytes)) {
    return Corrupt(Join(dir, kReady),
                   absl::StrCat("it is not what the manifest (run ", verified.manifest.run_id(),
                                ") gives"));
  }
  const bool hash = !defer_hashing && trusted_manifest_sha256 != verified.manifest_sha256;
  std::map<std::string, FileFacts> files;
  std::map<std::string, const FileEntry*> entries;
  for (const FileEntry& file : verified.manifest.files()) {
    std::string suffix;
    if (RankOfFileName(file.name(), &suffix) < 0 || !entries.emplace(file.name(), &file).second) {
      return Corrupt(manifest_path, absl::StrCat("file name '", file.name(),
                                                 "' is not one rank_NNNNN.bin or .meta"));
    }
  }
  for (const auto& [name, file] : entries) {
    const std::string path = Join(dir, name);
    ASSIGN_OR_RETURN(FileFacts facts,
                     ReadFacts(path, /*hash=*/false, /*keep_text=*/absl::EndsWith(name, ".meta")));
    if (facts.size != file->size()) {
      return Corrupt(path, absl::StrCat(facts.size, " bytes, the manifest says ", file->size(),
                                        facts.size < file->size() ? " (truncated)" : ""));
    }
    files.emplace(name, std::move(facts));
  }
  RETURN_IF_ERROR(CheckStructure(dir, verified.manifest, files));
  if (hash) {
    // Content, once the ranges are known to tile each file: every tensor's
    // range by its own digest (every byte of a shard file but its header,
    // whose every field the structure checked by value), or the file whole
    // where the manifest has no range digests (an older checkpoint).
    std::map<std::string, std::vector<Range>> ranges;
    for (const TensorEntry& tensor : verified.manifest.tensors()) {
      for (const ShardPlacement& shard : tensor.shards()) {
        ranges[shard.file()].push_back(Range{&tensor, &shard});
      }
    }
    for (const auto& [name, file] : entries) {
      RETURN_IF_ERROR(HashFile(dir, *file, ranges[name]).status());
    }
  }
  verified.content_hashed = hash;
  return verified;
}

absl::Status Verify(const std::string& dir) { return VerifyCheckpoint(dir).status(); }

absl::StatusOr<int64_t> HashCheckpointReads(const std::string& dir,
                                            const CheckpointManifest& manifest,
                                            const std::vector<RangeRequest>& requests,
                                            const std::vector<std::string>& whole_files) {
  std::map<std::string, const FileEntry*> entries;
  for (const FileEntry& file : manifest.files()) entries[file.name()] = &file;
  std::map<std::string, const TensorEntry*> tensors;
  for (const TensorEntry& tensor : manifest.tensors()) tensors[tensor.name()] = &tensor;
  // Each placement holding any requested element, once, by file.
  std::map<std::string, std::vector<Range>> ranges;
  std::set<const ShardPlacement*> taken;
  for (const RangeRequest& request : requests) {
    auto found = tensors.find(request.name);
    if (found == tensors.end()) continue;  // ReadTensorRanges refuses it
    const int64_t end = request.offset + request.length;
    for (const ShardPlacement& shard : found->second->shards()) {
      if (std::max(request.offset, shard.offset()) <
              std::min(end, shard.offset() + shard.length()) &&
          taken.insert(&shard).second) {
        ranges[shard.file()].push_back(Range{found->second, &shard});
      }
    }
  }
  for (const std::string& name : whole_files) ranges[name];  // no ranges: whole
  int64_t hashed = 0;
  for (const auto& [name, held] : ranges) {
    auto entry = entries.find(name);
    if (entry == entries.end()) {
      return absl::NotFoundError(
          absl::StrCat(Join(dir, name), ": not a file the manifest lists"));
    }
    ASSIGN_OR_RETURN(const int64_t bytes, HashFile(dir, *entry->second, held));
    hashed += bytes;
  }
  return hashed;
}

}  // namespace mtb::checkpoint
