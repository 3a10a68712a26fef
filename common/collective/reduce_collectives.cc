// all_reduce and reduce_scatter(_v): the collectives that combine values
// (communicator_internal.h has the vocabulary).
#include <algorithm>
#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/collective/communicator_internal.h"
#include "common/collective/gloo_allreduce.h"
#include "common/collective/halving_doubling.h"
#include "common/collective/point_to_point_collectives.h"
#include "common/collective/store_impl.h"
#include "common/libtorch/dtype.h"
#include "common/base/status.h"
#include "glog/logging.h"

namespace mtb::collective {

namespace {

c10d::ReduceOp ToC10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return c10d::ReduceOp(c10d::ReduceOp::SUM);
    case ReduceOp::kMax:
      return c10d::ReduceOp(c10d::ReduceOp::MAX);
    case ReduceOp::kMin:
      return c10d::ReduceOp(c10d::ReduceOp::MIN);
  }
  LOG(FATAL) << "unknown ReduceOp";
  return c10d::ReduceOp(c10d::ReduceOp::SUM);
}

HalvingDoublingOp ToHalvingDoubling(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return HalvingDoublingOp::kSum;
    case ReduceOp::kMax:
      return HalvingDoublingOp::kMax;
    case ReduceOp::kMin:
      return HalvingDoublingOp::kMin;
  }
  LOG(FATAL) << "unknown ReduceOp";
  return HalvingDoublingOp::kSum;
}

// Combines the n blocks of `blocks` (n, k) into `out` (k elements) in rank
// order, ((b0 op b1) op b2) ..., so every rank computes bit-identical
// results; one pass per block, the first straight into `out`.
void ReduceBlocks(const at::Tensor& blocks, at::Tensor out, ReduceOp op) {
  if (blocks.size(0) == 1) {
    out.copy_(blocks[0]);
    return;
  }
  for (int64_t p = 1; p < blocks.size(0); ++p) {
    const at::Tensor running = p == 1 ? blocks[0] : out;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        at::add_out(out, running, blocks[p]);
        break;
      case ReduceOp::kMax:
        at::maximum_out(out, running, blocks[p]);
        break;
      case ReduceOp::kMin:
        at::minimum_out(out, running, blocks[p]);
        break;
    }
  }
}

// kAuto's choice for an input of `bytes` (S) at `world_size` ranks, measured
// with //common/collective:reduce_scatter_benchmark (docs/collective.md,
// "Reduce-scatter": sweeps at 2 and 3 ranks, in and out of place, on two
// shared cores). Since the second tuning pass the chunked algorithm runs at
// the speed of the bare exchange (a direct all-gather of the same bytes):
// at 2 ranks it won from 4 MiB in every sweep (2 MiB was a toss-up, 1 MiB
// alltoall's); at 3 ranks alltoall held up to 8 MiB in one of two sweeps and
// chunked won from 16 MiB in both, where alltoall falls (0.10-0.19 GB/s at
// 64 MiB against 0.28-0.45). Halving-doubling lost everywhere. So alltoall
// below 4 MiB at 2 ranks and below 16 MiB from 3 ranks (its S-byte
// temporary stays small), chunked above.
constexpr int64_t kChunkedReduceScatterFromBytesTwoRanks = int64_t{4} << 20;
constexpr int64_t kChunkedReduceScatterFromBytes = int64_t{16} << 20;

ReduceScatterAlgorithm ChooseReduceScatter(int64_t bytes, int world_size) {
  if (world_size == 1) return ReduceScatterAlgorithm::kAllToAll;
  const int64_t from = world_size == 2 ? kChunkedReduceScatterFromBytesTwoRanks
                                       : kChunkedReduceScatterFromBytes;
  return bytes >= from ? ReduceScatterAlgorithm::kChunked
                       : ReduceScatterAlgorithm::kAllToAll;
}

// kAuto's choice for an all-reduce of `bytes` at `world_size` ranks, measured
// with reduce_scatter_benchmark --op=all_reduce (docs/collective.md,
// "All-reduce"): Gloo's ring (c10d's) won at 2 ranks at every size from
// 64 KiB to 64 MiB, and from 4 MiB up at 3 and 4 ranks; below that, at 3
// and 4 ranks, Gloo's bcube won every point (1.3-2.2x: the ring's latency
// floor, ~4.5 ms at 3 ranks on these loaded cores, is its 2(n-1) steps); at
// 2 MiB they tied. Our reduce-scatter + all-gather never won twice.
constexpr int64_t kRingAllReduceFromBytes = int64_t{2} << 20;

AllReduceAlgorithm ChooseAllReduce(int64_t bytes, int world_size) {
  return world_size >= 3 && bytes < kRingAllReduceFromBytes ? AllReduceAlgorithm::kBcube
                                                            : AllReduceAlgorithm::kRing;
}

// Elements of each rank's block when `numel` is split as evenly as it goes:
// the first numel % n ranks hold one more.
std::vector<int64_t> EvenBlocks(int64_t numel, int n) {
  std::vector<int64_t> blocks(n, numel / n);
  for (int p = 0; p < numel % n; ++p) ++blocks[p];
  return blocks;
}

absl::Status CheckReduceOp(absl::string_view what, ReduceOp op,
                           const at::Tensor& tensor) {
  if (op == ReduceOp::kAvg && !at::isFloatingType(tensor.scalar_type())) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": avg needs a floating dtype, got ",
                     DtypeName(tensor.scalar_type())));
  }
  return absl::OkStatus();
}

}  // namespace

CollectiveHandle Communicator::Impl::AllReduce(const at::Tensor& tensor,
                                               ReduceOp op) {
  absl::MutexLock lock(&issue_mutex_);
  const CollectiveOp kind = CollectiveOp::kAllReduce;
  const std::string what = What(kind);
  absl::Status valid = [&]() -> absl::Status {
    RETURN_IF_ERROR(Usable(kind));
    RETURN_IF_ERROR(CheckTensor(what, "tensor", tensor, TensorUse::kReduce));
    return CheckReduceOp(what, op, tensor);
  }();
  if (!valid.ok()) return Refuse(valid);
  const TransportTensor transport = ForReduction(tensor);
  if (transport.emulated) state_->temporaries.Track(transport.tensor);
  CollectiveRecord record = NewRecord(kind, tensor, transport.tensor, tensor);
  SetReduction(record, op, transport);
  SetTraffic(record, AllReduceTraffic(transport.tensor.nbytes(), world_size()));
  const at::Tensor flat = transport.tensor.view({-1});
  AllReduceAlgorithm algorithm = all_reduce_algorithm_;
  if (algorithm == AllReduceAlgorithm::kAuto) {
    algorithm = ChooseAllReduce(transport.tensor.nbytes(), world_size());
    // The default never names an algorithm it cannot run.
    if (!GlooAllreduceSupports(flat.scalar_type())) algorithm = AllReduceAlgorithm::kRing;
  }
  if (world_size() == 1 || flat.numel() == 0) algorithm = AllReduceAlgorithm::kRing;
  const std::function<void()> finish = FinishReduction(transport, tensor, op);
  if (shm_) return ShmAllReduce(std::move(record), flat, op, finish);
  if (algorithm == AllReduceAlgorithm::kBcube &&
      GlooAllreduceSupports(flat.scalar_type())) {
    record.algorithm = "gloo_allreduce_bcube";
    const int tag = NextReservedTag();
    return Launch(std::move(record), [&] {
      const std::shared_ptr<::gloo::Context> context = HalvingDoublingContext();
      const std::chrono::milliseconds timeout = ToChronoMs(timeout_);
      const HalvingDoublingOp gloo_op = ToHalvingDoubling(op);
      return Launched{RunInBackground([context, flat, gloo_op, tag, timeout] {
                        GlooAllreduce(context, flat, GlooAllreduceAlgorithm::kBcube,
                                      gloo_op, static_cast<uint32_t>(tag), timeout);
                      }),
                      finish};
    });
  }
  if (algorithm == AllReduceAlgorithm::kReduceScatterAllGather) {
    const int64_t element_size = flat.element_size();
    const int64_t chunk_elements =
        std::max<int64_t>(1, reduce_scatter_chunk_bytes_ / element_size);
    const int depth = reduce_scatter_depth_;
    record.algorithm = absl::StrCat(
        "reduce_scatter(gloo_send_recv_chunked(", chunk_elements * element_size,
        " B/peer, depth ", depth, "), in place)+all_gather(gloo_send_recv_direct)");
    const int tag = NextReservedTag();
    return Launch(std::move(record), [&] {
      c10::intrusive_ptr<GlooProcessGroup> group = group_;
      const int me = rank();
      const std::vector<int64_t> blocks = EvenBlocks(flat.numel(), world_size());
      int64_t offset = 0;
      for (int p = 0; p < me; ++p) offset += blocks[p];
      const at::Tensor shard = flat.narrow(0, offset, blocks[me]);
      auto phases = std::make_shared<ReduceScatterPhases>();
      return Launched{
          RunInBackground([group, me, flat, blocks, shard, chunk_elements, depth,
                           op, tag, phases] {
            // One tag for both halves: the all-gather's messages follow the
            // reduce-scatter's on every pair, in order.
            ChunkedReduceScatter(*group, me, flat, blocks, shard, chunk_elements,
                                 depth, op, tag, phases.get());
            DirectAllGather(*group, me, shard, flat, blocks, tag);
          }),
          finish, phases};
    });
  }
  record.algorithm = "gloo_allreduce";
  if (algorithm == AllReduceAlgorithm::kBcube) {
    absl::StrAppend(&record.algorithm, " (bcube does not take ",
                    DtypeName(flat.scalar_type()), ")");
  }
  return Launch(std::move(record), [&] {
    std::vector<at::Tensor> tensors{transport.tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = ToC10d(op);
    return Launched{group_->allreduce(tensors, options), finish};
  });
}

CollectiveHandle Communicator::Impl::ReduceScatter(const at::Tensor& input,
                                                   const at::Tensor& output,
                                                   ReduceOp op) {
  absl::MutexLock lock(&issue_mutex_);
  const CollectiveOp kind = CollectiveOp::kReduceScatter;
  const std::string what = What(kind);
  const int64_t k = output.defined() ? output.numel() : 0;
  absl::Status valid = [&]() -> absl::Status {
    RETURN_IF_ERROR(Usable(kind));
    RETURN_IF_ERROR(CheckTensor(what, "input", input, TensorUse::kReduce));
    RETURN_IF_ERROR(CheckTensor(what, "output", output, TensorUse::kReduce));
    RETURN_IF_ERROR(CheckSameDtype(what, "output", output, "input", input));
    RETURN_IF_ERROR(CheckReduceOp(what, op, input));
    if (input.numel() != world_size() * k) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": input has ", input.numel(),
                       " elements, expected world_size ", world_size(),
                       " * output ", k, " = ", world_size() * k));
    }
    return absl::OkStatus();
  }();
  if (!valid.ok()) return Refuse(valid);
  CollectiveRecord record = NewRecord(kind, input, input, input);
  return IssueReduceScatter(std::move(record), input, output,
                            std::vector<int64_t>(world_size(), k), op);
}

CollectiveHandle Communicator::Impl::ReduceScatterV(
    const at::Tensor& input, const at::Tensor& output,
    absl::Span<const int64_t> counts, ReduceOp op) {
  absl::MutexLock lock(&issue_mutex_);
  const CollectiveOp kind = CollectiveOp::kReduceScatterV;
  const std::string what = What(kind);
  absl::Status valid = [&]() -> absl::Status {
    RETURN_IF_ERROR(Usable(kind));
    RETURN_IF_ERROR(CheckCounts(what, "counts", counts, world_size()));
    RETURN_IF_ERROR(CheckRowTensors(what, input, output, TensorUse::kReduce));
    RETURN_IF_ERROR(CheckReduceOp(what, op, input));
    if (input.size(0) != Sum(counts)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": input has ", input.size(0),
                       " rows, expected sum(counts) = ", Sum(counts)));
    }
    if (output.size(0) != counts[rank()]) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": output has ", output.size(0), " rows, expected counts[",
          rank(), "] = ", counts[rank()]));
    }
    return absl::OkStatus();
  }();
  if (!valid.ok()) return Refuse(valid);
  CollectiveRecord record = NewRecord(kind, input, input, input);
  std::vector<int64_t> block_elements;
  for (int64_t count : counts) {
    block_elements.push_back(count * RowNumel(input));
  }
  return IssueReduceScatter(std::move(record), input, output,
                            std::move(block_elements), op);
}

void Communicator::Impl::SetReduction(CollectiveRecord& record, ReduceOp op,
                                      const TransportTensor& transport) {
  record.reduce_op = std::string(ReduceOpName(op));
  record.emulated = transport.emulated;
  record.transport_dtype =
      std::string(DtypeName(transport.tensor.scalar_type()));
}

std::function<void()> Communicator::Impl::FinishReduction(
    const TransportTensor& transport, const at::Tensor& caller,
    ReduceOp op) const {
  if (op != ReduceOp::kAvg && !transport.emulated) return nullptr;
  const int64_t n = world_size();
  return [transport, caller, op, n] {
    if (op == ReduceOp::kAvg) transport.tensor.div_(n);
    if (transport.emulated) caller.copy_(transport.tensor);
  };
}

CollectiveHandle Communicator::Impl::IssueReduceScatter(
    CollectiveRecord record, const at::Tensor& input, const at::Tensor& output,
    std::vector<int64_t> block_elements, ReduceOp op) {
  const int n = world_size();
  const int64_t mine = block_elements[rank()];
  const TransportTensor transport = ForReduction(input);
  const at::Tensor flat_input = transport.tensor.view({-1});
  // Where the reduction lands before avg and the copy back.
  const TransportTensor result{transport.emulated
                                   ? at::empty({mine}, flat_input.options())
                                   : output.view({-1}),
                               transport.emulated};
  if (transport.emulated) {
    state_->temporaries.Track(transport.tensor);
    state_->temporaries.Track(result.tensor);
  }
  SetReduction(record, op, transport);
  const int64_t element_size = flat_input.element_size();
  if (record.op == CollectiveOp::kReduceScatter) {
    SetTraffic(record, ReduceScatterTraffic(flat_input.nbytes(), n));
  } else {
    std::vector<int64_t> counts = block_elements;
    SetTraffic(record, ReduceScatterVTraffic(counts, element_size, rank()));
  }
  const std::function<void()> finish_result =
      FinishReduction(result, output.view({-1}), op);
  if (shm_) {
    return ShmReduceScatter(std::move(record), flat_input, std::move(block_elements),
                            result.tensor, op, finish_result);
  }

  ReduceScatterAlgorithm algorithm = reduce_scatter_algorithm_;
  if (algorithm == ReduceScatterAlgorithm::kAuto) {
    algorithm = ChooseReduceScatter(flat_input.nbytes(), n);
  }
  // Why Gloo's algorithm cannot take this call, or "" when it can.
  std::string unfit;
  if (!HalvingDoublingSupports(flat_input.scalar_type())) {
    unfit = absl::StrCat("does not take ", DtypeName(flat_input.scalar_type()));
  } else if (flat_input.numel() > INT_MAX) {
    unfit = "takes at most 2^31-1 elements";
  } else if (std::find(block_elements.begin(), block_elements.end(), 0) !=
             block_elements.end()) {
    // Gloo 0.5's distribution phase hangs on some empty blocks (n=3,
    // counts {2, 0, 3}); see docs/collective.md.
    unfit = "skipped for empty blocks";
  }
  if (algorithm == ReduceScatterAlgorithm::kHalvingDoubling && unfit.empty()) {
    record.algorithm = "gloo_reduce_scatter_halving_doubling";
    std::vector<int> recv_elements(block_elements.begin(),
                                   block_elements.end());
    return RunNow(std::move(record), [&] {
      const std::shared_ptr<::gloo::Context> context = HalvingDoublingContext();
      // The algorithm works in place; the emulated input is already ours.
      at::Tensor buffer = transport.emulated ? flat_input : flat_input.clone();
      state_->temporaries.Track(buffer);
      HalvingDoublingReduceScatter(context, buffer, recv_elements,
                                   ToHalvingDoubling(op));
      result.tensor.copy_(buffer.narrow(0, 0, mine));
      if (finish_result) finish_result();
    });
  }
  if (algorithm == ReduceScatterAlgorithm::kChunked) {
    const int64_t chunk_elements =
        std::max<int64_t>(1, reduce_scatter_chunk_bytes_ / element_size);
    const int depth = reduce_scatter_depth_;
    record.algorithm =
        absl::StrCat("gloo_send_recv_chunked(", chunk_elements * element_size,
                     " B/peer", depth == 2 ? "" : absl::StrCat(", depth ", depth),
                     ")+overlapped_reduce");
    const int tag = NextReservedTag();
    return Launch(std::move(record), [&] {
      c10::intrusive_ptr<GlooProcessGroup> group = group_;
      const at::Tensor reduced = result.tensor;
      const int me = rank();
      auto phases = std::make_shared<ReduceScatterPhases>();
      c10::intrusive_ptr<c10d::Work> work = RunInBackground(
          [group, me, flat_input, block_elements, reduced, chunk_elements,
           depth, op, tag, phases] {
            ChunkedReduceScatter(*group, me, flat_input, block_elements,
                                 reduced, chunk_elements, depth, op, tag,
                                 phases.get());
          });
      return Launched{work, finish_result, phases};
    });
  }
  record.algorithm = "gloo_alltoall_base+local_reduce";
  if (algorithm == ReduceScatterAlgorithm::kHalvingDoubling) {
    absl::StrAppend(&record.algorithm, " (halving_doubling ", unfit, ")");
  }
  std::vector<int64_t> send_counts = block_elements;
  std::vector<int64_t> recv_counts(n, mine);
  return Launch(std::move(record), [&] {
    // blocks: (n, mine); row p is rank p's contribution to this rank.
    at::Tensor blocks = at::empty({n * mine}, flat_input.options());
    state_->temporaries.Track(blocks);
    at::Tensor in = flat_input;
    c10::intrusive_ptr<c10d::Work> work =
        group_->alltoall_base(blocks, in, recv_counts, send_counts);
    const at::Tensor reduced = result.tensor;
    auto phases = std::make_shared<ReduceScatterPhases>();
    return Launched{work,
                    [blocks, reduced, n, mine, op, finish_result, phases] {
                      const absl::Time begin = absl::Now();
                      ReduceBlocks(blocks.view({n, mine}), reduced, op);
                      phases->reduce = absl::Now() - begin;
                      if (finish_result) finish_result();
                    },
                    phases};
  });
}

std::shared_ptr<::gloo::Context> Communicator::Impl::HalvingDoublingContext() {
  if (!halving_doubling_context_) {
    const Store store = store_.WithPrefix(
        absl::StrCat("halving_doubling_", halving_doubling_generation_));
    absl::StatusOr<std::shared_ptr<::gloo::rendezvous::Context>> context =
        CreateGlooContext(store.impl()->store, rank(), world_size(), timeout_,
                          devices_);
    // Thrown inside RunNow's CallGuarded, which makes it the call's status.
    if (!context.ok()) throw std::runtime_error(context.status().ToString());
    halving_doubling_context_ = *std::move(context);
  }
  return halving_doubling_context_;
}

}  // namespace mtb::collective
