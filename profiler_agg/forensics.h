// `profiler_agg forensics DIR`: reads the flight recorder dumps of a run
// (flight_<run>.attempt<a>.rank<r>.json, common/collective/flight_recorder.h)
// and names the rank and the collective where the group diverged.
//
// Vocabulary: a *group* is the dumps of one (run id, attempt); a rank's
// *issued* count says the last collective it issued is #issued-1. The group
// diverged where
//  - *mismatch*: at some sequence number the ranks issued different
//    collectives (op, dtype, size; send and recv pair up): the smallest set
//    of ranks that agree is the odd one out. For the v-collectives
//    (all_to_allv, all_gather_v, reduce_scatter_v) each rank's size is its
//    own: what must agree is the splits (what r sends to j is what j
//    receives from r; every rank's counts alike), and the rank in most
//    disagreements is named;
//  - *lagging*: a rank issued fewer collectives than the others: it never
//    issued #issued, which they did and waited in — the one the group waited
//    for;
//  - *missing*: no dumped rank lags, but a rank left no dump (a SIGKILLed
//    rank leaves none): the lost rank is the suspect;
//  - *none*: every rank issued the same collectives; the first unfinished one
//    was entered by all (the transport is the suspect).
#ifndef MTB_PROFILER_AGG_FORENSICS_H_
#define MTB_PROFILER_AGG_FORENSICS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/collective/flight_recorder.pb.h"
#include "profiler_agg/profiler_agg.pb.h"

namespace mtb::profiler_agg {

struct FlightDumpFile {
  std::string path;
  collective::FlightRecorderDump dump;
};

// Every flight_*.json in `directory`, parsed strictly. kInvalidArgument when
// the folder cannot be listed or holds none (exit 2); kDataLoss naming the
// file when one does not parse (exit 1).
absl::StatusOr<std::vector<FlightDumpFile>> ReadFlightDumps(
    const std::string& directory);

// The analysis above, per group; run_context and directory are the
// caller's.
ForensicsResult AnalyzeFlightDumps(const std::vector<FlightDumpFile>& dumps);

// Markdown: per group the verdict in words and a table of the ranks.
std::string RenderForensics(const ForensicsResult& result);

}  // namespace mtb::profiler_agg

#endif  // MTB_PROFILER_AGG_FORENSICS_H_
