// One rank of the trainer binary, from its rank environment to its exit code:
// join the group (when there is more than one rank), build the strategy, train
// (RunTraining), and on rank 0 write the result. The binary's main validates
// every flag first and then calls LaunchOrBecomeWorker (common/launch); a
// worker process ends up here.
#ifndef MTB_TRAINER_RUN_WORKER_H_
#define MTB_TRAINER_RUN_WORKER_H_

#include <memory>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/collective/communicator.h"
#include "common/launch/rank_env.h"
#include "common/faults/fault_spec.h"
#include "common/launch/timeouts.h"
#include "trainer/checkpoint/plan.h"
#include "common/hf/gpt2_tensors.h"
#include "trainer/run/strategy.h"
#include "trainer/strategy/sync_fault.h"
#include "trainer/tp/options.h"
#include "trainer/train_result.pb.h"

namespace mtb {

struct WorkerOptions {
  // Rank 0's result path (resolved); empty: results/trainer_<UTC>.json.
  std::string out;
  bool markdown = true;
  // Test aid: every rank writes its final parameters to
  // <dir>/rank_<r>.f32 (raw little-endian fp32, parameter after parameter in
  // model order) and rank 0 writes <dir>/manifest.txt ("<name> <offset>
  // <numel> <dims...>" per line, offsets in elements). Empty: none.
  std::string dump_parameters;
  // --trace_dir (resolved; empty: no tracing) and --trace_steps' window.
  std::string trace_dir;
  // --fault=, validated.
  std::vector<Fault> faults;
  int64_t trace_first_step = 1;
  int64_t trace_last_step = std::numeric_limits<int64_t>::max();
  // Test aid (--testonly_sync_fault): a broken synchronisation or memory
  // bound for tests that prove their checks catch one. kNone otherwise.
  SyncTestFault sync_fault;
  // Test aid (--testonly_tp_fault): a broken tensor-parallel piece.
  tp::TestFault tp_fault = tp::TestFault::kNone;
  // Test aid (--testonly_pp_resume_without_step): a pipelined resume that
  // leaves AdamW's step count unloaded on the stages after the first.
  bool pp_resume_without_step = false;
  // --connect_timeout, --first_step_timeout, --collective_timeout (set once
  // the first step has completed), --wait_progress_every.
  TimeoutOptions timeouts;
  // --kill_grace: the least time between a SIGTERM notice and SIGKILL, which
  // a save must fit in (Note [a save that cannot fit], trainer/run/preemption.h).
  absl::Duration kill_grace = absl::Seconds(5);
  // --transport (docs/collective.md, "Shared memory: ranks on one host").
  collective::Transport transport = collective::Transport::kAuto;
  // What the launcher changed in the user's flags and why
  // (FitDefaultWarmupsToSteps): rank 0 prints each before the run.
  std::vector<std::string> notes;
  // --checkpoint_dir and friends, planned (trainer/checkpoint/plan.h);
  // nothing when its options name no directory.
  checkpoint::CheckpointPlan checkpoint;
  // --init_from, read and checked (trainer/model/init_from.h); empty: the seeded
  // initialisation.
  hf::OurParameters init_parameters;
  // --metrics_jsonl (resolved): rank 0 appends a line per step; empty: none.
  std::string metrics_jsonl;
  // For the RunContext.
  int argc = 0;
  char** argv = nullptr;
};

// Runs this rank to completion and returns the process exit code
// (docs/errors.md): 0; 1 when the run failed; 3 (kExitDeterministicFailure)
// when a non-finite loss stopped every rank at the same step (each prints
// the error; the launcher then exits 1 and never restarts it); 2 for bad
// input. Installs the
// counting CPU allocator: call only in a process that is exactly one rank.
// `config` must be resolved and valid for env.world_size.
int RunWorker(const TrainConfig& config, const RankEnv& env,
              const WorkerOptions& options);

// Writes the parameter dump described at WorkerOptions::dump_parameters.
absl::Status DumpParameters(const std::vector<NamedParameter>& parameters,
                            int rank, const std::string& directory);

}  // namespace mtb

#endif  // MTB_TRAINER_RUN_WORKER_H_
