// One rank of comm_bench over Gloo: rendezvous through //common/collective, run the
// sweep, and (rank 0) write the result files. LibTorch stays in the .cc.
#ifndef MTB_COMM_BENCH_GLOO_WORKER_H_
#define MTB_COMM_BENCH_GLOO_WORKER_H_

#include "absl/time/time.h"
#include "comm_bench/harness.h"
#include "comm_bench/options.h"
#include "common/faults/fault_spec.h"
#include "common/trace/window.h"
#include "common/launch/rank_env.h"
#include "common/launch/timeouts.h"
#include "common/results/results.pb.h"

namespace mtb::comm_bench {

struct GlooWorkerOptions {
  RankEnv rank_env;
  SweepOptions sweep;
  FlagValues flags;
  // common/launch/timeouts.h: the first-step timeout holds until the first
  // sweep point completes, then the steady-state collective timeout.
  TimeoutOptions timeouts;
  // Started by main (NewRunContext) so its start time is the run's.
  RunContext context;
  // --fault=, validated against the sweep (ResolveFaults).
  std::vector<Fault> faults;
  // --trace_steps (ResolveTraceWindow): the sweep points traced.
  trace::TraceWindow trace_window;
};

// Runs this rank and returns the process's exit code: 0 pass, 1 a wrong
// result, the busbw gate or a failure (rendezvous, timeout, writing files).
int RunGlooWorker(const GlooWorkerOptions& options);

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_GLOO_WORKER_H_
