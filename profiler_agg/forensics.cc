// forensics.h has the vocabulary.
#include "profiler_agg/forensics.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/rank_text.h"
#include "common/report/report.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"

namespace mtb::profiler_agg {
namespace {

using collective::FlightEntry;
using collective::FlightRecorderDump;

constexpr int kSchemaVersion = 1;

// RanksText at the start of a sentence.
std::string RanksCapitalized(const std::vector<int>& ranks) {
  std::string text = RanksText(ranks);
  text[0] = 'R';
  return text;
}

bool InFlight(const FlightEntry& entry) {
  return entry.state() == "issued" || entry.state() == "transfer_done";
}

// Collectives whose size is each rank's own (per-rank counts): the ranks
// must agree on the splits, not on a size.
bool IsVariable(const std::string& op) {
  return op == "all_to_allv" || op == "all_gather_v" || op == "reduce_scatter_v";
}

// What must agree across ranks at one sequence number (the group is the
// dump's): the op, the dtype, the size (except for the v-collectives, see
// SplitDisagreement). Send and recv pair up; a broadcast's root is part of
// it.
std::string Signature(const FlightEntry& entry) {
  const bool point_to_point = entry.op() == "send" || entry.op() == "recv";
  return absl::StrCat(
      point_to_point ? "send/recv" : entry.op(), " (", entry.dtype(),
      IsVariable(entry.op()) ? "" : absl::StrCat(", ", entry.size_bytes(), " bytes"),
      entry.op() == "broadcast" ? absl::StrCat(", root ", entry.peer()) : "", ")");
}

const FlightEntry* EntryAt(const FlightRecorderDump& dump, int64_t sequence) {
  for (const FlightEntry& entry : dump.entries()) {
    if (entry.sequence() == sequence) return &entry;
  }
  return nullptr;
}

struct Disagreement {
  int rank = -1;  // the odd one out
  std::string what;
};

// For a v-collective every rank issued alike (same Signature): do the
// ranks' splits agree? all_to_allv: what rank r sends to rank j is what j
// receives from r; all_gather_v: every rank has the same counts. Ranks whose
// entry fell out of the ring, or that recorded no splits, are not judged.
std::optional<Disagreement> SplitDisagreement(const std::map<int, const FlightDumpFile*>& dumped,
                                              int64_t sequence) {
  std::map<int, const FlightEntry*> entries;
  for (const auto& [rank, file] : dumped) {
    const FlightEntry* entry = EntryAt(file->dump, sequence);
    if (entry != nullptr && (entry->send_counts_size() > 0 || entry->recv_counts_size() > 0)) {
      entries[rank] = entry;
    }
  }
  if (entries.size() < 2) return std::nullopt;
  const std::string op = entries.begin()->second->op();
  std::vector<std::string> parts;
  std::map<int, int> involved;
  if (op == "all_to_allv") {
    for (const auto& [sender, sent] : entries) {
      for (const auto& [receiver, received] : entries) {
        if (receiver >= sent->send_counts_size() || sender >= received->recv_counts_size()) {
          continue;
        }
        const int64_t rows = sent->send_counts(receiver);
        const int64_t expected = received->recv_counts(sender);
        if (rows == expected) continue;
        parts.push_back(absl::StrCat("rank ", sender, " sends ", rows, " rows to rank ", receiver,
                                     ", which expects ", expected));
        ++involved[sender];
        ++involved[receiver];
      }
    }
  } else {
    std::map<std::vector<int64_t>, std::vector<int>> by_counts;
    for (const auto& [rank, entry] : entries) {
      by_counts[{entry->recv_counts().begin(), entry->recv_counts().end()}].push_back(rank);
    }
    if (by_counts.size() < 2) return std::nullopt;
    for (const auto& [counts, ranks] : by_counts) {
      parts.push_back(
          absl::StrCat(RanksText(ranks), " gave counts [", absl::StrJoin(counts, ", "), "]"));
      for (int rank : ranks) involved[rank] = static_cast<int>(entries.size() - ranks.size());
    }
  }
  if (parts.empty()) return std::nullopt;
  Disagreement found;
  int most = -1;
  for (const auto& [rank, count] : involved) {
    if (count > most) {
      most = count;
      found.rank = rank;
    }
  }
  found.what = absl::StrJoin(parts, "; ");
  return found;
}

std::string Position(int64_t step, const std::string& phase) {
  return absl::StrCat("step ", step, phase.empty() ? "" : ", phase ", phase);
}

// "all_reduce #41 (waiting, 2.0 s since issued)", "all_reduce #41 (failed:
// ...)"; "" when the rank is in none.
std::string InFlightSummary(const FlightRecorderDump& dump) {
  for (const FlightEntry& entry : dump.entries()) {
    if (!InFlight(entry) && entry.state() != "failed") continue;
    std::string detail;
    if (entry.state() == "failed") {
      detail = absl::StrCat("failed: ", entry.error());
    } else {
      detail = absl::StrFormat(
          "%s, %.1f s since issued", entry.waiting() ? "waiting" : entry.state(),
          static_cast<double>(dump.dump_time_us() - entry.issue_time_us()) / 1e6);
    }
    return absl::StrCat(entry.op(), " #", entry.sequence(), " (", detail, ")");
  }
  return "";
}

// What the ranks in `leaders` did with #sequence: "rank 0 failed it (...)",
// "ranks 1, 2 were waiting in it".
std::string WhatTheyDid(const std::map<int, const FlightDumpFile*>& dumped,
                        const std::vector<int>& leaders, int64_t sequence) {
  std::map<std::string, std::vector<int>> by_state;
  for (int rank : leaders) {
    const FlightEntry* entry = EntryAt(dumped.at(rank)->dump, sequence);
    std::string state = "no longer in its ring";
    if (entry != nullptr) {
      if (entry->state() == "failed") {
        state = absl::StrCat("failed it (", entry->error(), ")");
      } else if (entry->state() == "completed") {
        state = "completed it";
      } else {
        state = entry->waiting() ? "waiting in it" : "had it in flight";
      }
    }
    by_state[state].push_back(rank);
  }
  std::vector<std::string> parts;
  for (const auto& [state, ranks] : by_state) {
    const std::string verb =
        state == "waiting in it" ? (ranks.size() == 1 ? "was " : "were ") : "";
    parts.push_back(absl::StrCat(RanksText(ranks), " ", verb, state));
  }
  return absl::StrJoin(parts, "; ");
}

ForensicsGroup AnalyzeGroup(const std::vector<const FlightDumpFile*>& files) {
  ForensicsGroup group;
  group.set_run_id(files.front()->dump.run_id());
  group.set_attempt(files.front()->dump.attempt());
  group.set_diverged_rank(-1);
  group.set_diverged_sequence(-1);
  // The latest dump of each rank (a rank may dump at a failure and again at
  // the teardown).
  std::map<int, const FlightDumpFile*> dumped;
  int world_size = 0;
  for (const FlightDumpFile* file : files) {
    world_size = std::max(world_size, file->dump.world_size());
    const FlightDumpFile*& latest = dumped[file->dump.rank()];
    if (latest == nullptr || latest->dump.dump_time_us() <= file->dump.dump_time_us()) {
      latest = file;
    }
  }
  group.set_world_size(world_size);
  std::vector<int> missing;
  for (int rank = 0; rank < world_size; ++rank) {
    ForensicsRank* row = group.add_ranks();
    row->set_rank(rank);
    auto found = dumped.find(rank);
    if (found == dumped.end()) {
      missing.push_back(rank);
      group.add_missing_ranks(rank);
      continue;
    }
    const FlightRecorderDump& dump = found->second->dump;
    row->set_dumped(true);
    row->set_file(BaseName(found->second->path));
    row->set_reason(dump.reason());
    row->set_issued(dump.issued());
    row->set_last_completed(dump.last_completed());
    row->set_step(dump.step());
    row->set_phase(dump.phase());
    row->set_in_flight(InFlightSummary(dump));
  }
  const std::string missing_note =
      missing.empty()
          ? ""
          : absl::StrCat(" ", RanksText(missing), " left no dump (a rank killed by "
                         "SIGKILL, e.g. by the kernel or the launcher after its "
                         "grace, leaves none; so does one that never started).");

  // Mismatch: the lowest sequence number at which dumped ranks disagree.
  std::map<int64_t, std::map<std::string, std::vector<int>>> by_sequence;
  for (const auto& [rank, file] : dumped) {
    for (const FlightEntry& entry : file->dump.entries()) {
      by_sequence[entry.sequence()][Signature(entry)].push_back(rank);
    }
  }
  for (const auto& [sequence, signatures] : by_sequence) {
    const int some_rank = signatures.begin()->second.front();
    const FlightEntry* some_entry = EntryAt(dumped.at(some_rank)->dump, sequence);
    if (signatures.size() == 1 && IsVariable(some_entry->op())) {
      const std::optional<Disagreement> splits = SplitDisagreement(dumped, sequence);
      if (!splits.has_value()) continue;
      const std::string op = EntryAt(dumped.at(splits->rank)->dump, sequence)->op();
      group.set_verdict("mismatch");
      group.set_diverged_rank(splits->rank);
      group.set_diverged_sequence(sequence);
      group.set_diverged_op(op);
      group.set_finding(absl::StrCat(
          "The ranks' splits of ", op, " #", sequence, " disagree: ", splits->what, ". Rank ",
          splits->rank, " is in most of the disagreements: ",
          op == "all_to_allv" ? "every rank's send counts must match its peers' receive counts."
                              : "every rank must pass the same counts.",
          missing_note));
      return group;
    }
    if (signatures.size() < 2) continue;
    const std::vector<int>* odd = nullptr;
    std::string odd_signature;
    std::vector<std::string> parts;
    for (const auto& [signature, ranks] : signatures) {
      parts.push_back(absl::StrCat(RanksText(ranks), " issued ", signature));
      if (odd == nullptr || ranks.size() < odd->size() ||
          (ranks.size() == odd->size() && ranks.front() > odd->front())) {
        odd = &ranks;
        odd_signature = signature;
      }
    }
    group.set_verdict("mismatch");
    group.set_diverged_rank(odd->front());
    group.set_diverged_sequence(sequence);
    group.set_diverged_op(EntryAt(dumped.at(odd->front())->dump, sequence)->op());
    group.set_finding(absl::StrCat(
        "The ranks' calls diverged at #", sequence, ": ", absl::StrJoin(parts, "; "),
        ". The odd one out is ", RanksText(*odd), " (", odd_signature,
        "): every rank must issue the same collectives in the same order.",
        missing_note));
    return group;
  }

  // Lagging: a rank that issued fewer collectives than the others.
  int64_t most = 0, fewest = INT64_MAX;
  for (const auto& [rank, file] : dumped) {
    most = std::max(most, file->dump.issued());
    fewest = std::min(fewest, file->dump.issued());
  }
  if (!dumped.empty() && fewest < most) {
    std::vector<int> lagging, leaders;
    for (const auto& [rank, file] : dumped) {
      (file->dump.issued() == fewest ? lagging : leaders).push_back(rank);
    }
    const FlightRecorderDump& lagger = dumped.at(lagging.front())->dump;
    const FlightEntry* missed = nullptr;
    std::vector<int> issued_it;
    for (int rank : leaders) {
      const FlightEntry* entry = EntryAt(dumped.at(rank)->dump, fewest);
      if (entry != nullptr) {
        issued_it.push_back(rank);
        if (missed == nullptr) missed = entry;
      }
    }
    std::string last;
    if (fewest == 0) {
      last = "had issued no collective";
    } else {
      const FlightEntry* previous = EntryAt(lagger, fewest - 1);
      last = absl::StrCat("last issued #", fewest - 1,
                          previous != nullptr ? absl::StrCat(" (", previous->op(), ", ",
                                                             previous->state(), ")")
                                              : "");
    }
    group.set_verdict("lagging");
    group.set_diverged_rank(lagging.front());
    group.set_diverged_sequence(fewest);
    if (missed != nullptr) group.set_diverged_op(missed->op());
    const std::string collective =
        missed != nullptr
            ? absl::StrCat("#", fewest, " ", Signature(*missed), ", issued at ",
                           Position(missed->step(), missed->phase()))
            : absl::StrCat("#", fewest);
    group.set_finding(absl::StrCat(
        RanksCapitalized(lagging), " ", last, " and never issued ", collective,
        ", which ", RanksText(leaders), " did: ",
        WhatTheyDid(dumped, issued_it.empty() ? leaders : issued_it, fewest), ". ",
        RanksCapitalized(lagging), " was at ", Position(lagger.step(), lagger.phase()),
        " when it dumped (", lagger.reason(), "). The group waited for ",
        RanksText(lagging), " at ", missed != nullptr ? missed->op() : "collective", " #",
        fewest, ".", missing_note));
    return group;
  }

  // Every dumped rank issued the same collectives: the first one not
  // completed everywhere.
  int64_t first_open = -1;
  std::string open_op;
  for (const auto& [sequence, signatures] : by_sequence) {
    for (const auto& [rank, file] : dumped) {
      const FlightEntry* entry = EntryAt(file->dump, sequence);
      if (entry != nullptr && entry->state() != "completed") {
        first_open = sequence;
        open_op = entry->op();
        break;
      }
    }
    if (first_open >= 0) break;
  }
  std::vector<int> every_dumped;
  for (const auto& [rank, file] : dumped) every_dumped.push_back(rank);
  const std::string open_text =
      first_open < 0 ? std::string("every collective they issued completed")
                     : absl::StrCat("the first not completed everywhere is ", open_op,
                                    " #", first_open, ": ",
                                    WhatTheyDid(dumped, every_dumped, first_open));
  group.set_diverged_sequence(first_open);
  group.set_diverged_op(open_op);
  if (!missing.empty()) {
    group.set_verdict("missing");
    if (missing.size() == 1) group.set_diverged_rank(missing.front());
    group.set_finding(absl::StrCat(
        "No dumped rank lags: every dumped rank issued ", most, " collectives; ",
        open_text, ".", missing_note, " The group lost ", RanksText(missing), "."));
    return group;
  }
  group.set_verdict("none");
  group.set_finding(absl::StrCat(
      "Every rank issued the same ", most, " collectives and none lags; ", open_text,
      first_open < 0 ? "." : ". Every rank entered it: the transport (or the "
                             "network) is the suspect, not a rank."));
  return group;
}

}  // namespace

absl::StatusOr<std::vector<FlightDumpFile>> ReadFlightDumps(
    const std::string& directory) {
  absl::StatusOr<std::vector<std::string>> names =
      ListDirectory(directory, "flight_", ".json");
  if (!names.ok()) return names.status();
  if (names->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        directory, ": no flight recorder dumps (flight_*.json); give the "
        "--log_dir of a run (or the folder of its result)"));
  }
  std::vector<FlightDumpFile> dumps;
  for (const std::string& name : *names) {
    FlightDumpFile file;
    file.path = absl::StrCat(directory, "/", name);
    if (absl::Status read = ReadJsonFile(file.path, &file.dump); !read.ok()) {
      return absl::DataLossError(read.message());
    }
    if (file.dump.schema_version() < 1 || file.dump.world_size() < 1 ||
        file.dump.rank() < 0 || file.dump.rank() >= file.dump.world_size()) {
      return absl::DataLossError(absl::StrCat(
          file.path, ": not a flight recorder dump (schema_version ",
          file.dump.schema_version(), ", rank ", file.dump.rank(), " of ",
          file.dump.world_size(), ")"));
    }
    dumps.push_back(std::move(file));
  }
  return dumps;
}

ForensicsResult AnalyzeFlightDumps(const std::vector<FlightDumpFile>& dumps) {
  ForensicsResult result;
  result.set_schema_version(kSchemaVersion);
  // Groups in the order of their first dump.
  std::map<std::pair<std::string, int>, std::vector<const FlightDumpFile*>> groups;
  for (const FlightDumpFile& file : dumps) {
    groups[{file.dump.run_id(), file.dump.attempt()}].push_back(&file);
  }
  std::vector<std::pair<int64_t, const std::vector<const FlightDumpFile*>*>> ordered;
  for (const auto& [key, files] : groups) {
    int64_t first = INT64_MAX;
    for (const FlightDumpFile* file : files) first = std::min(first, file->dump.dump_time_us());
    ordered.emplace_back(first, &files);
  }
  std::sort(ordered.begin(), ordered.end());
  for (const auto& [first, files] : ordered) *result.add_groups() = AnalyzeGroup(*files);
  return result;
}

std::string RenderForensics(const ForensicsResult& result) {
  std::string text = absl::StrCat("# Flight recorder forensics: ", result.directory(), "\n");
  for (const ForensicsGroup& group : result.groups()) {
    absl::StrAppend(&text, "\n## run ", group.run_id(), ", attempt ", group.attempt(),
                    " (", group.world_size(), " ranks)\n\n**", group.verdict(), "**",
                    group.diverged_rank() >= 0
                        ? absl::StrCat(": rank ", group.diverged_rank())
                        : "",
                    group.diverged_sequence() >= 0
                        ? absl::StrCat(" at ", group.diverged_op(), " #",
                                       group.diverged_sequence())
                        : "",
                    ". ", group.finding(), "\n\n");
    MarkdownTable table;
    table.headers = {"rank", "dump", "step", "phase", "issued", "last completed",
                     "in flight", "dumped because"};
    for (const ForensicsRank& rank : group.ranks()) {
      if (!rank.dumped()) {
        table.rows.push_back({absl::StrCat(rank.rank()), "none", "", "", "", "", "", ""});
        continue;
      }
      table.rows.push_back({absl::StrCat(rank.rank()), rank.file(), absl::StrCat(rank.step()),
                            rank.phase(), absl::StrCat(rank.issued()),
                            rank.last_completed() < 0 ? "none"
                                                      : absl::StrCat("#", rank.last_completed()),
                            rank.in_flight(), rank.reason()});
    }
    absl::StrAppend(&text, table.Render());
  }
  return text;
}

}  // namespace mtb::profiler_agg
