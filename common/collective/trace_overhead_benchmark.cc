// What tracing costs per span site and per collective, in isolation
// (docs/traces.md, "Tracing off costs nothing"): the paths the trainer takes
// with no --trace_dir (a null recorder), with a recorder outside
// --trace_steps' window (disabled) and with tracing on.
//
//   bazel run --config=bench //common/collective:trace_overhead_benchmark
//
// Spans: a ScopedSpan on the compute track (the trainer's data, forward,
// backward and optimizer sites). Collectives: one CollectiveLog Issue +
// Complete of a bucket all-reduce's record, the bookkeeping every collective
// goes through, with no observer / the trace observer on a disabled recorder
// / on an enabled one. The recorder grows while enabled, as in a traced run.
#include <memory>

#include "benchmark/benchmark.h"
#include "common/collective/collective_log.h"
#include "common/collective/trace_collectives.h"
#include "common/trace/recorder.h"

namespace mtb::collective {
namespace {

enum Tracing { kOff = 0, kDisabled = 1, kOn = 2 };

std::unique_ptr<trace::TraceRecorder> RecorderFor(int tracing) {
  if (tracing == kOff) return nullptr;
  auto recorder = std::make_unique<trace::TraceRecorder>(trace::TraceRunInfo());
  recorder->set_enabled(tracing == kOn);
  return recorder;
}

void BM_ScopedSpan(benchmark::State& state) {
  const std::unique_ptr<trace::TraceRecorder> recorder = RecorderFor(state.range(0));
  for (auto _ : state) {
    const trace::ScopedSpan span(recorder.get(), "forward", "compute");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ScopedSpan)->ArgName("off0_disabled1_on2")->Arg(kOff)->Arg(kDisabled)->Arg(kOn);

void BM_CollectiveRecord(benchmark::State& state) {
  const std::unique_ptr<trace::TraceRecorder> recorder = RecorderFor(state.range(0));
  CollectiveLog log(/*keep_records=*/false);
  if (recorder != nullptr) TraceCollectives(log, recorder.get());
  CollectiveRecord record;
  record.op = CollectiveOp::kAllReduce;
  record.dtype = record.transport_dtype = "float32";
  record.elements = 65536;
  record.size_bytes = 262144;
  record.algorithm = "gloo_allreduce";
  record.reduce_op = "sum";
  for (auto _ : state) {
    CollectiveRecord issued = log.Issue(record);
    issued.completed = true;
    issued.transfer_done_time = issued.wait_return_time = issued.issue_time;
    log.Complete(issued);
  }
}
BENCHMARK(BM_CollectiveRecord)->ArgName("off0_disabled1_on2")->Arg(kOff)->Arg(kDisabled)->Arg(kOn);

}  // namespace
}  // namespace mtb::collective

BENCHMARK_MAIN();
