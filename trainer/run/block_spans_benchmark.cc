// What the per-block trace spans (trainer/run/block_spans.h) cost one forward +
// backward of the trace_overhead.py model (vocab 512, d_model 128, 2 layers,
// seq 64, batch 8, one thread), in process, so that the machine's noise
// between runs does not swamp it (docs/traces.md, "Tracing off costs
// nothing"):
//
//   bazel run --config=bench //trainer:block_spans_benchmark --
//     --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Arg 0: no hooks (tracing off, and steps outside --trace_steps' window: the
// trainer makes no BlockSpans). Arg 1: BlockSpans on an enabled recorder (2
// spans, an alias and 2 gradient hooks per block), as in a traced step.
#include <optional>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "benchmark/benchmark.h"
#include "common/nn/layers.h"
#include "common/trace/recorder.h"
#include "trainer/run/block_spans.h"
#include "trainer/model/model.h"

namespace mtb {
namespace {

void BM_ForwardBackward(benchmark::State& state) {
  at::set_num_threads(1);
  ModelShape shape;
  shape.vocab_size = 512;
  shape.d_model = 128;
  shape.n_layers = 2;
  shape.n_heads = 4;
  shape.seq_len = 64;
  const GptModel model(shape, 1);
  const at::Tensor tokens = at::remainder(at::arange(8 * 64, at::kLong), 512).view({8, 64});
  const at::Tensor targets = at::remainder(tokens + 1, 512);
  std::vector<std::string> names;
  for (const ParameterUnit& unit : model.store().units()) names.push_back(unit.name);
  trace::TraceRecorder recorder{trace::TraceRunInfo()};
  int64_t spans = 0;
  for (auto _ : state) {
    ForwardOptions options;
    std::optional<BlockSpans> block_spans;
    if (state.range(0) == 1) {
      block_spans.emplace(&recorder, names, nullptr, 0);
      options.unit_hooks.push_back(&*block_spans);
    }
    const at::Tensor loss = nn::CrossEntropy(model.Forward(tokens, options), targets);
    loss.backward();
    for (const NamedParameter& p : model.parameters()) p.tensor.mutable_grad() = at::Tensor();
    spans += block_spans ? 2 * shape.n_layers : 0;
  }
  state.counters["block_spans"] = benchmark::Counter(static_cast<double>(spans),
                                                     benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_ForwardBackward)->ArgName("off0_blockspans1")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mtb

BENCHMARK_MAIN();
