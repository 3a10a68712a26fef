#include "ckpt_tool/tool.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/report/report.h"
#include "common/results/atomic_file.h"
#include "trainer/checkpoint/checkpoint.h"

namespace mtb::ckpt_tool {

absl::StatusOr<std::string> CheckpointDirOf(const std::string& path,
                                            std::vector<std::string>* notes) {
  if (!PathExists(path)) return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
  if (PathExists(path + "/manifest.json") || PathExists(path + "/READY")) return path;
  ASSIGN_OR_RETURN(checkpoint::Resolved resolved, checkpoint::ResolveLatest(path));
  for (const std::string& note : resolved.notes) notes->push_back(note);
  return resolved.dir;
}

absl::StatusOr<std::string> VerifyPath(const std::string& path,
                                       std::vector<std::string>* notes) {
  if (!PathExists(path)) return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
  if (PathExists(path + "/manifest.json") || PathExists(path + "/READY")) {
    RETURN_IF_ERROR(checkpoint::Verify(path));
    return path;
  }
  ASSIGN_OR_RETURN(checkpoint::Resolved resolved, checkpoint::ResolveLatest(path));
  if (!resolved.latest_problem.empty()) {
    return absl::DataLossError(absl::StrCat(path, ": ", resolved.latest_problem,
                                            "; a resume would fall back to ",
                                            BaseName(resolved.dir),
                                            ", the newest checkpoint that verifies"));
  }
  for (const std::string& note : resolved.notes) notes->push_back(note);
  return resolved.dir;
}

absl::StatusOr<CheckpointSummary> Inspect(const std::string& path) {
  CheckpointSummary summary;
  std::vector<std::string> notes;
  ASSIGN_OR_RETURN(const std::string dir, CheckpointDirOf(path, &notes));
  ASSIGN_OR_RETURN(const checkpoint::CheckpointManifest manifest, checkpoint::ReadManifest(dir));
  summary.set_path(dir);
  summary.set_run_id(manifest.run_id());
  summary.set_step(manifest.step());
  summary.set_strategy(manifest.strategy());
  summary.set_world_size(manifest.world_size());
  summary.set_format_version(manifest.format_version());
  summary.set_saved_utc(manifest.saved_utc());
  summary.set_config_fingerprint(manifest.config_fingerprint());
  summary.set_config_json(manifest.config_json());
  for (const std::string& note : notes) summary.add_notes(note);
  std::map<int, RankBytes> ranks;
  for (const checkpoint::TensorEntry& tensor : manifest.tensors()) {
    TensorSummary* t = summary.add_tensors();
    t->set_name(tensor.name());
    t->set_dtype(tensor.dtype());
    for (int64_t d : tensor.global_shape()) t->add_global_shape(d);
    t->set_shards(tensor.shards_size());
    for (const checkpoint::ShardPlacement& shard : tensor.shards()) {
      t->set_bytes(t->bytes() + shard.byte_length());
    }
  }
  for (const checkpoint::FileEntry& file : manifest.files()) {
    int rank = -1;
    if (sscanf(file.name().c_str(), "rank_%d.", &rank) != 1) continue;
    RankBytes& r = ranks[rank];
    r.set_rank(rank);
    r.set_bytes(r.bytes() + file.size());
    r.set_files(r.files() + 1);
    summary.set_total_bytes(summary.total_bytes() + file.size());
  }
  for (const auto& [rank, bytes] : ranks) *summary.add_ranks() = bytes;
  return summary;
}

std::string RenderSummary(const CheckpointSummary& s) {
  std::string out = absl::StrCat(s.path(), ": step ", s.step(), " of run ", s.run_id(), ", ",
                                 s.strategy(), " on ", s.world_size(), " ranks, format ",
                                 s.format_version(), ", saved ", s.saved_utc(), ", ",
                                 FormatByteAmount(static_cast<double>(s.total_bytes())), "\n");
  for (const std::string& note : s.notes()) absl::StrAppend(&out, "note: ", note, "\n");
  MarkdownTable tensors;
  tensors.headers = {"tensor", "dtype", "shape", "shards", "bytes"};
  tensors.align = {Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight, Align::kRight};
  for (const TensorSummary& t : s.tensors()) {
    tensors.rows.push_back({t.name(), t.dtype(), absl::StrJoin(t.global_shape(), "x"),
                            absl::StrCat(t.shards()), absl::StrCat(t.bytes())});
  }
  MarkdownTable ranks;
  ranks.headers = {"rank", "files", "bytes"};
  ranks.align = {Align::kRight, Align::kRight, Align::kRight};
  for (const RankBytes& r : s.ranks()) {
    ranks.rows.push_back({absl::StrCat(r.rank()), absl::StrCat(r.files()), absl::StrCat(r.bytes())});
  }
  absl::StrAppend(&out, "\n", tensors.Render(), "\n", ranks.Render());
  return out;
}

}  // namespace mtb::ckpt_tool
