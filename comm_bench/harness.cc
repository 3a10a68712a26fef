// Vocabulary: a *row* is one (op, size, placement) measurement; the *loop* is
// nccl-tests' timed back-to-back run of `iters` calls ending in one
// Synchronize, whose mean per call is averaged across ranks (nccl-tests'
// default -a 1) and also reported for the slowest rank; an *iteration* is one
// call between a barrier and its completion, timed by the backend on every
// rank, the iteration's time being the slowest rank's (the call is done when
// the last rank is). The *check pass* reruns one call on a different data set
// (seed) with the output pre-filled with a sentinel and counts the elements
// that differ from the exact expected result, summed over ranks (#wrong).
#include "comm_bench/harness.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm_bench/ceiling.h"
#include "comm_bench/shm_ceiling.h"
#include "absl/strings/str_join.h"
#include "common/report/report.h"
#include "common/base/stats.h"
#include "common/base/status.h"
#include "glog/logging.h"

namespace mtb::comm_bench {
namespace {

// What each rank measured for one row, before the exchange.
struct LocalMeasurement {
  double loop_seconds = 0;
  int64_t wrong = 0;
  std::vector<double> iteration_seconds;
};

std::string Pack(const LocalMeasurement& local) {
  std::vector<double> values = {local.loop_seconds,
                                static_cast<double>(local.wrong)};
  values.insert(values.end(), local.iteration_seconds.begin(),
                local.iteration_seconds.end());
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(double));
}

std::vector<LocalMeasurement> Unpack(const std::string& all, int world_size,
                                     int iters) {
  const size_t per_rank = 2 + static_cast<size_t>(iters);
  CHECK_EQ(all.size(), per_rank * world_size * sizeof(double));
  std::vector<double> values(per_rank * world_size);
  std::memcpy(values.data(), all.data(), all.size());
  std::vector<LocalMeasurement> ranks(world_size);
  for (int rank = 0; rank < world_size; ++rank) {
    const double* base = values.data() + rank * per_rank;
    ranks[rank].loop_seconds = base[0];
    ranks[rank].wrong = static_cast<int64_t>(base[1]);
    ranks[rank].iteration_seconds.assign(base + 2, base + per_rank);
  }
  return ranks;
}

absl::Status CopyIn(Backend& backend, void* destination, const HostArray& host) {
  if (host.bytes() == 0) return absl::OkStatus();
  return backend.CopyFromHost(destination, host.data(), host.bytes());
}

// One (size, placement): everything this rank does, then the exchange.
class RowRunner {
 public:
  RowRunner(Backend& backend, const Collective& op, const SweepOptions& options,
            const CallContext& context, const CallShape& shape)
      : backend_(backend), op_(op), options_(options), context_(context), shape_(shape) {}

  absl::StatusOr<CommBenchRow> Run(bool in_place, int seed, DeviceBuffer& send,
                                   DeviceBuffer& recv) {
    const int64_t element_size = ElementSize(context_.dtype);
    char* send_base = static_cast<char*>(send.data());
    char* recv_base = static_cast<char*>(recv.data());
    // In place, the input and output are parts of the one (recv) buffer.
    char* input = in_place
                      ? recv_base + shape_.in_place_input_offset * element_size
                      : send_base;
    char* output = in_place
                       ? recv_base + shape_.in_place_output_offset * element_size
                       : recv_base;
    LocalMeasurement local;
    RETURN_IF_ERROR(Time(input, output, &local));
    const std::string algorithm = backend_.LastAlgorithm();
    if (options_.check) {
      ASSIGN_OR_RETURN(local.wrong, Check(in_place, seed, recv_base, input, output));
    }
    ASSIGN_OR_RETURN(const std::string all,
                     backend_.AllGatherHostBytes(Pack(local)));
    CommBenchRow row = Summarize(
        Unpack(all, context_.world_size, options_.iters), in_place);
    row.set_algorithm(algorithm);
    return row;
  }

 private:
  absl::Status Time(char* input, char* output, LocalMeasurement* local) {
    HostArray data(context_.dtype, shape_.send_elements);
    op_.FillInput(context_, shape_, /*seed=*/0, &data);
    RETURN_IF_ERROR(CopyIn(backend_, input, data));
    for (int iter = 0; iter < options_.warmup_iters; ++iter) {
      RETURN_IF_ERROR(op_.Run(backend_, context_, shape_, input, output));
    }
    RETURN_IF_ERROR(backend_.Barrier());
    const auto start = std::chrono::steady_clock::now();
    for (int iter = 0; iter < options_.iters; ++iter) {
      RETURN_IF_ERROR(op_.Run(backend_, context_, shape_, input, output));
    }
    RETURN_IF_ERROR(backend_.Synchronize());
    local->loop_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count() /
        options_.iters;
    for (int iter = 0; iter < options_.iters; ++iter) {
      RETURN_IF_ERROR(backend_.Barrier());
      RETURN_IF_ERROR(backend_.BeginInterval());
      RETURN_IF_ERROR(op_.Run(backend_, context_, shape_, input, output));
      ASSIGN_OR_RETURN(const double seconds, backend_.EndInterval());
      local->iteration_seconds.push_back(seconds);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> Check(bool in_place, int seed, char* recv_base,
                                char* input, char* output) {
    HostArray sentinel(context_.dtype, in_place ? shape_.in_place_elements
                                                : shape_.recv_elements);
    sentinel.Fill(kSentinel);
    RETURN_IF_ERROR(CopyIn(backend_, in_place ? recv_base : output, sentinel));
    HostArray data(context_.dtype, shape_.send_elements);
    op_.FillInput(context_, shape_, seed, &data);
    RETURN_IF_ERROR(CopyIn(backend_, input, data));
    RETURN_IF_ERROR(op_.Run(backend_, context_, shape_, input, output));
    RETURN_IF_ERROR(backend_.Synchronize());

    HostArray actual(context_.dtype, shape_.recv_elements);
    if (actual.bytes() > 0) {
      RETURN_IF_ERROR(backend_.CopyToHost(actual.data(), output, actual.bytes()));
    }
    if (op_.name() == options_.corrupt_op &&
        context_.rank == options_.corrupt_rank && actual.size() > 0) {
      // Minus one: pattern values and sums lie in [0, ExactIntegerLimit], so
      // the result is exact in every dtype (plus one could round back in
      // bf16: 256 + 1 is 256).
      const int64_t victim = actual.size() / 2;
      actual.Set(victim, actual.Get(victim) - 1);
    }
    HostArray expected(context_.dtype, shape_.recv_elements);
    op_.FillExpected(context_, shape_, seed, &expected);
    int64_t wrong = 0;
    for (int64_t i = 0; i < actual.size(); ++i) {
      const float got = actual.Get(i);
      const float want = expected.Get(i);
      if (got == want) continue;
      if (wrong == 0) {
        LOG(ERROR) << op_.name() << " " << FormatBytes(shape_.bytes)
                   << (in_place ? " in place" : " out of place")
                   << ": first wrong element of this rank's output at index "
                   << i << " of " << actual.size() << ": got " << got
                   << ", expected " << want;
      }
      ++wrong;
    }
    return wrong;
  }

  CommBenchRow Summarize(const std::vector<LocalMeasurement>& ranks,
                         bool in_place) const {
    const int n = context_.world_size;
    CommBenchRow row;
    row.set_op(std::string(op_.name()));
    row.set_dtype(std::string(DTypeName(context_.dtype)));
    row.set_redop(op_.reduces() ? std::string(RedOpName(context_.redop)) : "");
    row.set_root(op_.has_root() ? context_.root : -1);
    row.set_count(shape_.count);
    row.set_bytes(shape_.bytes);
    row.set_placement(in_place ? "in_place" : "out_of_place");

    std::vector<double> loops;
    int64_t wrong = 0;
    for (const LocalMeasurement& rank : ranks) {
      loops.push_back(rank.loop_seconds);
      wrong += rank.wrong;
    }
    const double mean_seconds = Mean(loops);
    const auto slowest = std::max_element(loops.begin(), loops.end());
    row.set_time_us(mean_seconds * 1e6);
    row.set_slowest_rank_time_us(*slowest * 1e6);
    row.set_slowest_rank(static_cast<int>(slowest - loops.begin()));

    std::vector<double> iterations;
    for (int iter = 0; iter < options_.iters; ++iter) {
      double slowest_rank = 0;
      for (const LocalMeasurement& rank : ranks) {
        slowest_rank = std::max(slowest_rank, rank.iteration_seconds[iter]);
      }
      iterations.push_back(slowest_rank);
    }
    row.set_iteration_p50_us(Percentile(iterations, 50) * 1e6);
    row.set_iteration_p99_us(Percentile(iterations, 99) * 1e6);

    const double algbw = AlgorithmBandwidth(shape_.bandwidth_bytes, mean_seconds);
    row.set_busbw_factor(op_.BusBandwidthFactor(n));
    row.set_algbw_gbps(algbw);
    row.set_busbw_gbps(algbw * op_.BusBandwidthFactor(n));
    // The shared-memory ceiling is set by the sweep once all of its
    // measurements around the point's rows are in (SetBestCeiling).
    if (options_.has_ceiling) SetMatchingCeiling(options_.ceiling, n, &row, options_.transport);
    row.set_checked(options_.check);
    row.set_wrong(wrong);
    for (int64_t bytes : shape_.send_bytes_per_rank) row.add_send_bytes_per_rank(bytes);
    for (int64_t bytes : shape_.recv_bytes_per_rank) row.add_recv_bytes_per_rank(bytes);
    row.set_bottleneck_rank(shape_.bottleneck_rank);
    if (shape_.bottleneck_rank >= 0) row.set_bottleneck_bytes(shape_.bandwidth_bytes);
    return row;
  }

  Backend& backend_;
  const Collective& op_;
  const SweepOptions& options_;
  const CallContext context_;
  const CallShape& shape_;
};

// The shared-memory ceiling of one point (shm_ceiling.h): a warm-up, then
// `iters` runs of this rank's share between barriers; busbw from each
// rank's best run (ShmCeilingSeconds: their mean, as the row's from the mean
// over ranks of the loop's; broadcast's slowest). 0 for an op without a
// ceiling shape.
absl::StatusOr<double> MeasureShmCeiling(Backend& backend, DeviceBuffer& shared,
                                         const SweepOptions& options, const CallContext& context,
                                         const Collective& op, const CallShape& shape,
                                         DeviceBuffer& send, DeviceBuffer& recv,
                                         int64_t* step) {
  const int n = context.world_size;
  ShmCeilingCall call;
  call.op = std::string(op.name());
  if (ShmCeilingShapeOf(call.op).empty()) return 0.0;
  call.bytes = shape.bytes;
  call.root = context.root;
  const int64_t element_size = ElementSize(context.dtype);
  for (int p = 0; p < n; ++p) {
    if (!shape.send_counts.empty()) {
      call.send_bytes.push_back(shape.send_counts[p] * element_size);
      call.recv_bytes.push_back(shape.recv_counts[p] * element_size);
    } else {
      call.send_bytes.push_back(shape.send_elements * element_size / n);
      call.recv_bytes.push_back(shape.recv_elements * element_size / n);
    }
  }
  ShmCeilingWork work;
  work.world_size = n;
  work.rank = context.rank;
  work.chunk_bytes = options.shm_ceiling_chunk_bytes;
  work.shared = static_cast<char*>(shared.data());
  work.float_sum = context.dtype == DType::kFloat32;
  const char* in = static_cast<const char*>(send.data());
  char* out = static_cast<char*>(recv.data());
  RETURN_IF_ERROR(backend.Barrier());
  RunShmCeilingWork(work, call, in, out, step);  // warm-up
  double best = 0;
  for (int round = 0; round < options.iters; ++round) {
    RETURN_IF_ERROR(backend.Barrier());
    const auto start = std::chrono::steady_clock::now();
    RunShmCeilingWork(work, call, in, out, step);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = round == 0 ? seconds : std::min(best, seconds);
  }
  ASSIGN_OR_RETURN(const std::string all, backend.AllGatherHostBytes(absl::string_view(
                                              reinterpret_cast<const char*>(&best), sizeof(best))));
  std::vector<double> bests(n);
  std::memcpy(bests.data(), all.data(), n * sizeof(double));
  const double seconds = ShmCeilingSeconds(call.op, bests);
  if (seconds <= 0) return 0.0;
  return AlgorithmBandwidth(shape.bandwidth_bytes, seconds) * op.BusBandwidthFactor(n);
}

absl::StatusOr<std::unique_ptr<DeviceBuffer>> AllocateElements(
    Backend& backend, int64_t elements, DType dtype) {
  // At least one element, so every rank holds a valid pointer even when its
  // share is empty (an all_to_allv rank that receives nothing).
  return backend.Allocate(std::max<int64_t>(elements, 1) * ElementSize(dtype));
}

}  // namespace

CommBenchOptions OptionsProto(const SweepOptions& options) {
  CommBenchOptions proto;
  for (const std::string& op : options.ops) proto.add_ops(op);
  proto.set_dtype(std::string(DTypeName(options.dtype)));
  proto.set_redop(std::string(RedOpName(options.redop)));
  proto.set_root(options.root);
  proto.set_min_bytes(options.min_bytes);
  proto.set_max_bytes(options.max_bytes);
  proto.set_step_factor(options.step_factor);
  proto.set_iters(options.iters);
  proto.set_warmup_iters(options.warmup_iters);
  proto.set_check(options.check);
  proto.set_min_busbw(options.min_busbw);
  proto.set_imbalance(SkewToString(options.all_to_allv.skew));
  return proto;
}

absl::Status CheckSupported(const SupportQuery& supports,
                            const SweepOptions& options) {
  for (const std::string& name : options.ops) {
    ASSIGN_OR_RETURN(std::unique_ptr<Collective> op,
                     MakeCollective(name, options.all_to_allv));
    absl::StatusOr<Support> support =
        supports(op->kind(), options.dtype, options.redop);
    if (!support.ok()) return support.status();
  }
  return absl::OkStatus();
}

absl::Status CheckSupported(const Backend& backend,
                            const SweepOptions& options) {
  return CheckSupported(
      [&backend](OpKind op, DType dtype, RedOp redop) {
        return backend.Supports(op, dtype, redop);
      },
      options);
}

absl::StatusOr<std::vector<std::string>> SweepPointOps(const SweepOptions& options,
                                                       int world_size) {
  CallContext context;
  context.world_size = world_size;
  context.dtype = options.dtype;
  context.redop = options.redop;
  context.root = options.root;
  std::vector<std::string> ops;
  for (const std::string& name : options.ops) {
    ASSIGN_OR_RETURN(std::unique_ptr<Collective> op,
                     MakeCollective(name, options.all_to_allv));
    for (int64_t requested : op->SweepSizes(options.min_bytes, options.max_bytes,
                                            options.step_factor)) {
      if (op->Shape(requested, context).bytes > 0) ops.push_back(name);
    }
  }
  return ops;
}

absl::StatusOr<CommBenchResult> RunSweep(Backend& backend,
                                         const SweepOptions& options,
                                         SweepListener* listener,
                                         const SweepHooks& hooks) {
  bool first_point_done = false;
  int64_t point = 0;
  CHECK_GE(options.iters, 1);
  CallContext context;
  context.rank = backend.rank();
  context.world_size = backend.world_size();
  context.dtype = options.dtype;
  context.redop = options.redop;
  context.root = options.root;

  CommBenchResult result;
  if (options.has_ceiling) *result.mutable_ceiling() = options.ceiling;
  result.set_schema_version(kSchemaVersion);
  for (const std::string& note : options.notes) {
    result.add_notes(note);
    if (listener != nullptr) listener->Note(note);
  }
  std::vector<std::string> failures;
  // The region the shared-memory ceiling moves its bytes through.
  std::unique_ptr<DeviceBuffer> shared;
  int64_t ceiling_step = 0;
  if (options.shm_ceiling && options.transport == "shm" && context.world_size > 1) {
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> region = backend.AllocateShared(
        ShmCeilingSharedBytes(context.world_size, options.shm_ceiling_chunk_bytes));
    if (region.ok()) {
      shared = *std::move(region);
    } else if (!absl::IsUnimplemented(region.status())) {
      return region.status();
    }
  }
  double busbw_sum = 0;
  int busbw_rows = 0;
  int seed = 1;  // seed 0 is the timing data set
  for (const std::string& name : options.ops) {
    ASSIGN_OR_RETURN(std::unique_ptr<Collective> op,
                     MakeCollective(name, options.all_to_allv));
    ASSIGN_OR_RETURN(const Support support,
                     backend.Supports(op->kind(), options.dtype, options.redop));
    if (listener != nullptr) {
      listener->OpStarted(*op, options, context.world_size, support);
    }
    std::vector<CallShape> shapes;
    int64_t send_elements = 0;
    int64_t recv_elements = 0;
    for (int64_t requested : op->SweepSizes(options.min_bytes, options.max_bytes,
                                            options.step_factor)) {
      CallShape shape = op->Shape(requested, context);
      if (shape.bytes == 0) {
        const std::string note = absl::StrCat(
            name, ": size ", requested, " B rounds to 0 bytes at ",
            context.world_size, " ranks (", DTypeName(options.dtype),
            "); skipped");
        result.add_notes(note);
        if (listener != nullptr) listener->Note(note);
        continue;
      }
      send_elements = std::max(send_elements, shape.send_elements);
      recv_elements = std::max({recv_elements, shape.recv_elements,
                                shape.in_place_elements});
      shapes.push_back(std::move(shape));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> send,
                     AllocateElements(backend, send_elements, options.dtype));
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> recv,
                     AllocateElements(backend, recv_elements, options.dtype));

    CommBenchOpSummary summary;
    summary.set_op(name);
    double op_busbw_sum = 0;
    for (const CallShape& shape : shapes) {
      ++point;
      if (hooks.before_point) hooks.before_point(point, name);
      RowRunner runner(backend, *op, options, context, shape);
      std::vector<bool> placements = {false};
      if (op->supports_in_place()) placements.push_back(true);
      std::vector<CommBenchRow> rows;
      const auto run_row = [&](int index) -> absl::Status {
        ASSIGN_OR_RETURN(CommBenchRow row, runner.Run(placements[index], seed++, *send, *recv));
        if (!first_point_done && hooks.after_first_point) {
          RETURN_IF_ERROR(hooks.after_first_point());
        }
        first_point_done = true;
        rows.push_back(std::move(row));
        return absl::OkStatus();
      };
      // The shared-memory ceiling, measured several times around the rows
      // (one measurement can read slow: the best of them bounds).
      CeilingSamples ceiling;
      std::string ceiling_shape;
      if (shared != nullptr && !ShmCeilingShapeOf(name).empty()) {
        ASSIGN_OR_RETURN(
            ceiling,
            AlternateCeilingAndRows(
                options.shm_ceiling_measurements, static_cast<int>(placements.size()),
                [&]() {
                  return MeasureShmCeiling(backend, *shared, options, context, *op, shape,
                                           *send, *recv, &ceiling_step);
                },
                run_row));
        ceiling_shape = absl::StrCat(
            "shm ", ShmCeilingShapeOf(name), " in this sweep: ", ShmCeilingShapeText(name), "; ",
            context.world_size, " processes, ",
            ShmCeilingShapeOf(name) == "broadcast" ? "the slowest rank's" : "each rank's",
            " best of ", options.iters);
      } else {
        for (int index = 0; index < static_cast<int>(placements.size()); ++index) {
          RETURN_IF_ERROR(run_row(index));
        }
      }
      for (CommBenchRow& row : rows) {
        SetBestCeiling(ceiling, ceiling_shape, &row);
        const bool in_place = row.placement() == "in_place";
        row.set_emulated(support.emulated);
        summary.set_rows(summary.rows() + 1);
        summary.set_wrong(summary.wrong() + row.wrong());
        if (row.wrong() > 0) summary.set_rows_with_wrong(summary.rows_with_wrong() + 1);
        op_busbw_sum += row.busbw_gbps();
        if (row.ceiling_invalid()) {
          failures.push_back(absl::StrCat(
              name, ": ceiling invalid: busbw ", FormatSignificant(row.busbw_gbps()),
              " GB/s at ", row.bytes(), " B", in_place ? " in place" : "",
              " beats its ceiling ", FormatSignificant(row.ceiling_gbps()), " GB/s (",
              row.ceiling_shape(), ") by more than 10%"));
        }
        *result.add_rows() = row;
      }
      if (listener != nullptr) listener->SizeFinished(*op, rows);
    }
    if (summary.rows() > 0) {
      summary.set_avg_busbw_gbps(op_busbw_sum / summary.rows());
    }
    busbw_sum += op_busbw_sum;
    busbw_rows += summary.rows();
    if (summary.rows_with_wrong() > 0) {
      failures.push_back(absl::StrCat(name, ": ", summary.wrong(),
                                      " wrong elements in ",
                                      summary.rows_with_wrong(), " rows"));
    }
    // nccl-tests' gate: FAILED below 0.9 x NCCL_TESTS_MIN_BW.
    if (options.min_busbw > 0 && summary.rows() > 0 &&
        summary.avg_busbw_gbps() < 0.9 * options.min_busbw) {
      summary.set_below_min_busbw(true);
      failures.push_back(absl::StrCat(
          name, ": average busbw ", FormatSignificant(summary.avg_busbw_gbps()),
          " GB/s < 0.9 x --min_busbw=", options.min_busbw));
    }
    if (listener != nullptr) listener->OpFinished(summary);
    *result.add_summaries() = summary;
  }
  if (busbw_rows > 0) result.set_avg_busbw_gbps(busbw_sum / busbw_rows);
  result.set_verdict(failures.empty()
                         ? "pass"
                         : absl::StrCat("fail: ", absl::StrJoin(failures, "; ")));
  return result;
}

int VerdictExitCode(const CommBenchResult& result) {
  return result.verdict() == "pass" ? 0 : 1;
}

}  // namespace mtb::comm_bench
