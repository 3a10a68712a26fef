// The collectives that only move bits: broadcast, all_gather (flat, list,
// v), all_to_all(v), barrier, send and recv (communicator_internal.h has the
// vocabulary).
#include <string>
#include <utility>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "common/collective/communicator_internal.h"
#include "common/collective/point_to_point_collectives.h"
#include "common/base/status.h"

namespace mtb::collective {
namespace {

std::vector<int64_t> ToVector(absl::Span<const int64_t> counts) {
  return std::vector<int64_t>(counts.begin(), counts.end());
}

// kAuto's choice for an output of `bytes` (S) at `world_size` ranks, measured
// with //common/collective:reduce_scatter_benchmark --op=all_gather
// (docs/collective.md, "All-gather", two sweeps at 2 and 3 ranks on two
// shared cores): below 1 MiB the list all-gather won 7 of 8 points (direct
// send/recv pays ~1-2 ms more per call there); from 1 to 16 MiB the winner
// changed from sweep to sweep; at 64 MiB direct won 2.5-2.8x (c10d's list
// all-gather collapses there). Direct from 4 MiB up, where the list's
// S-byte temporary starts to matter, list below.
constexpr int64_t kDirectAllGatherFromBytes = int64_t{4} << 20;

AllGatherAlgorithm ChooseAllGather(int64_t bytes, int world_size) {
  (void)world_size;
  return bytes >= kDirectAllGatherFromBytes ? AllGatherAlgorithm::kDirect
                                            : AllGatherAlgorithm::kList;
}

// Consecutive row blocks of `tensor` along dim 0, counts[p] rows each.
std::vector<at::Tensor> RowBlocks(const at::Tensor& tensor, const std::vector<int64_t>& counts) {
  std::vector<at::Tensor> blocks;
  int64_t row = 0;
  for (int64_t count : counts) {
    blocks.push_back(tensor.narrow(0, row, count));
    row += count;
  }
  return blocks;
}

}  // namespace

CollectiveHandle Communicator::Impl::Broadcast(const at::Tensor& tensor,
                                               int root) {
  absl::MutexLock lock(&issue_mutex_);
  const CollectiveOp kind = CollectiveOp::kBroadcast;
  const std::string what = What(kind);
  absl::Status valid = [&]() -> absl::Status {
    RETURN_IF_ERROR(Usable(kind));
    RETURN_IF_ERROR(CheckRank(what, "root", root));
    return CheckTensor(what, "tensor", tensor, TensorUse::kCopy);
  }();
  if (!valid.ok()) return Refuse(valid);
  const at::Tensor bits = BitsView(tensor);
  CollectiveRecord record = NewRecord(kind, tensor, bits, tensor);
  record.peer = root;
  SetTraffic(record,
             BroadcastTraffic(tensor.nbytes(), world_size(), rank(), root));
  if (flat_shm()) return ShmBroadcast(std::move(record), tensor, root);
  record.algorithm = "gloo_broadcast";
  return Launch(std::move(record), [&] {
    std::vector<at::Tensor> tensors{bits};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return Launched{group_->broadcast(tensors, options), nullptr};
  });
}

CollectiveHandle Communicator::Impl::AllGather(const at::Tensor& input,
                                               const at::Tensor& output) {
  absl::MutexLock lock(&issue_mutex_);
  const CollectiveOp kind = CollectiveOp::kAllGather;
  const std::string what = What(kind);
  const int64_t k = input.defined() ? input.numel() : 0;
  absl::Status valid = [&]() -> absl::Status {
    RETURN_IF_ERROR(Usable(kind));
    RETURN_IF_ERROR(CheckTensor(what, "input", input, TensorUse::kCopy));
    RETURN_IF_ERROR(CheckTensor(what, "output", output, TensorUse::kCopy));
    RETURN_IF_ERROR(CheckSameDtype(what, "output", output, "input", input));
    if (output.numel() != world_size() * k) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": output has ", output.numel(),
                       " elements, expected world_size ", world_size(),
                       " * input ", k, " = ", world_size() * k));
    }
    return CheckNoOverlapExceptSlot(what, input, output, rank() * k);
  }();
  if (!valid.ok()) return Refuse(valid);
  if (shm_) {
    CollectiveRecord record = NewRecord(kind, input, input, output);
    SetTraffic(record, AllGatherTraffic(record.size_bytes, world_size()));
    return ShmAllGather(std::move(record), input,
                        RowBlocks(output.view({-1}), std::vector<int64_t>(world_size(), k)));
  }
  const at::Tensor flat_output = BitsView(output).view({-1});
  AllGatherAlgorithm algorithm = all_gather_algorithm_;
  if (algorithm == AllGatherAlgorithm::kAuto) {
    algorithm = ChooseAllGather(output.nbytes(), world_size());
  }
  if (algorithm == AllGatherAlgorithm::kDirect) {
    const at::Tensor flat_input = BitsView(input).view({-1});
    CollectiveRecord record = NewRecord(kind, input, flat_input, output);
    SetTraffic(record, AllGatherTraffic(record.size_bytes, world_size()));
    record.algorithm = "gloo_send_recv_direct";
    const int tag = NextReservedTag();
    return Launch(std::move(record), [&] {
      c10::intrusive_ptr<GlooProcessGroup> group = group_;
      const int me = rank();
      const int n = world_size();
      const std::vector<int64_t> blocks(n, flat_input.numel());
      return Launched{RunInBackground([group, me, blocks, flat_input,
                                       flat_output, tag] {
                        DirectAllGather(*group, me, flat_input, flat_output,
                                        blocks, tag);
                      }),
                      nullptr};
    });
  }
  std::vector<at::Tensor> blocks;
  for (int p = 0; p < world_size(); ++p) {
    blocks.push_back(flat_output.narrow(0, p * k, k));
  }
  return IssueAllGatherList(kind, input, std::move(blocks),
                            "gloo_allgather_list");
}

CollectiveHandle Communicator::Impl::AllGatherList(
    const at::Tensor& input, const std::vector<at::Tensor>& outputs) {
  absl::MutexLock lock(&issue_mutex_);
  const CollectiveOp kind = CollectiveOp::kAllGather;
  const std::string what = What(kind);
  absl::Status valid = [&]() -> absl::Status {
    RETURN_IF_ERROR(Usable(kind));
    RETURN_IF_ERROR(CheckTensor(what, "input", input, TensorUse::kCopy));
    if (static_cast<int>(outputs.size()) != world_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": outputs has ", outputs.size(),
          " tensors, expected one per rank: world_size ", world_size()));
    }
    for (int p = 0; p < world_size(); ++p) {
      const std::string name = absl::StrCat("outputs[", p, "]");
      RETURN_IF_ERROR(CheckTensor(what, name, outputs[p], TensorUse::kCopy));
      RETURN_IF_ERROR(CheckSameDtype(what, name, outputs[p], "input", input));
      if (outputs[p].sizes() != input.sizes()) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": ", name, " has shape ", c10::str(outputs[p].sizes()),
            ", expected input's ", c10::str(input.sizes())));
      }
    }
    return absl::OkStatus();
  }();
  if (!valid.ok()) return Refuse(valid);
  if (shm_) {
    CollectiveRecord record = NewRecord(kind, input, input, input);
    record.elements = input.numel() * world_size();
    record.size_bytes = input.nbytes() * world_size();
    SetTraffic(record, AllGatherTraffic(record.size_bytes, world_size()));
    return ShmAllGather(std::move(record), input, outputs);
  }
  std::vector<at::Tensor> blocks;
  for (const at::Tensor& output : outputs) blocks.push_back(BitsView(output));
  return IssueAllGatherList(kind, input, std::move(blocks),
                            "gloo_allgather_list");
}

CollectiveHandle Communicator::Impl::AllGatherV(
    const at::Tensor& input, const at::Tensor& output,
    absl::Span<const int64_t> counts) {
  absl::MutexLock lock(&issue_mutex_);
  const CollectiveOp kind = CollectiveOp::kAllGatherV;
  const std::string what = What(kind);
  absl::Status valid = [&]() -> absl::Status {
    RETURN_IF_ERROR(Usable(kind));
    RETURN_IF_ERROR(CheckCounts(what, "counts", counts, world_size()));
    RETURN_IF_ERROR(CheckRowTensors(what, input, output, TensorUse::kCopy));
    if (input.size(0) != counts[rank()]) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": input has ", input.size(0), " rows, expected counts[",
          rank(), "] = ", counts[rank()]));
    }
    if (output.size(0) != Sum(counts)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": output has ", output.size(0),
                       " rows, expected sum(counts) = ", Sum(counts)));
    }
    return CheckNoOverlapExceptSlot(
        what, input, output, Sum(counts.subspan(0, rank())) * RowNumel(input));
  }();
  if (!valid.ok()) return Refuse(valid);
  const at::Tensor bits_output = BitsView(output);
  CollectiveRecord record = NewRecord(kind, input, bits_output, output);
  SetTraffic(record,
             AllGatherVTraffic(ToVector(counts),
                               RowNumel(input) * input.element_size(), rank()));
  if (shm_) {
    record.transport_dtype = record.dtype;
    return ShmAllGather(std::move(record), input, RowBlocks(output, ToVector(counts)));
  }
  record.algorithm = "gloo_alltoall_base(replicated input)";
  record.recv_counts = ToVector(counts);
  // Every rank sends its whole input to every rank: n copies of it along
  // dim 0, one split each (c10d's allgather wants equal sizes).
  std::vector<int64_t> send_counts(world_size(), input.size(0));
  std::vector<int64_t> recv_counts = ToVector(counts);
  std::vector<int64_t> repeats(input.dim(), 1);
  repeats[0] = world_size();
  return Launch(std::move(record), [&] {
    at::Tensor replicated = BitsView(input).repeat(repeats);
    state_->temporaries.Track(replicated);
    at::Tensor recv = bits_output;
    return Launched{
        group_->alltoall_base(recv, replicated, recv_counts, send_counts),
        nullptr};
  });
}

CollectiveHandle Communicator::Impl::AllToAll(const at::Tensor& input,
                                              const at::Tensor& output) {
  absl::MutexLock lock(&issue_mutex_);
  const CollectiveOp kind = CollectiveOp::kAllToAll;
  const std::string what = What(kind);
  absl::Status valid = [&]() -> absl::Status {
    RETURN_IF_ERROR(Usable(kind));
    RETURN_IF_ERROR(CheckRowTensors(what, input, output, TensorUse::kCopy));
    if (output.sizes() != input.sizes()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": output has shape ", c10::str(output.sizes()),
                       ", expected input's ", c10::str(input.sizes())));
    }
    if (input.size(0) % world_size() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": input has ", input.size(0),
                       " rows along dim 0, not divisible by world_size ",
                       world_size(), "; use AllToAllV for uneven splits"));
    }
    return CheckNoOverlap(what, input, output);
  }();
  if (!valid.ok()) return Refuse(valid);
  const at::Tensor bits_input = BitsView(input);
  const at::Tensor bits_output = BitsView(output);
  CollectiveRecord record = NewRecord(kind, input, bits_input, input);
  SetTraffic(record, AllToAllTraffic(input.nbytes(), world_size()));
  if (flat_shm()) {
    const std::vector<int64_t> equal(world_size(), input.size(0) / world_size());
    return ShmAllToAll(std::move(record), RowBlocks(input, equal), RowBlocks(output, equal));
  }
  record.algorithm = "gloo_alltoall_base";
  return Launch(std::move(record), [&] {
    at::Tensor send = bits_input;
    at::Tensor recv = bits_output;
    std::vector<int64_t> equal;  // empty: equal splits
    return Launched{group_->alltoall_base(recv, send, equal, equal), nullptr};
  });
}

CollectiveHandle Communicator::Impl::AllToAllV(
    const at::Tensor& input, const at::Tensor& output,
    absl::Span<const int64_t> send_counts,
    absl::Span<const int64_t> recv_counts) {
  absl::MutexLock lock(&issue_mutex_);
  const CollectiveOp kind = CollectiveOp::kAllToAllV;
  const std::string what = What(kind);
  absl::Status valid = [&]() -> absl::Status {
    RETURN_IF_ERROR(Usable(kind));
    RETURN_IF_ERROR(
        CheckCounts(what, "send_counts", send_counts, world_size()));
    RETURN_IF_ERROR(
        CheckCounts(what, "recv_counts", recv_counts, world_size()));
    RETURN_IF_ERROR(CheckRowTensors(what, input, output, TensorUse::kCopy));
    if (input.size(0) != Sum(send_counts)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": input has ", input.size(0),
          " rows, expected sum(send_counts) = ", Sum(send_counts)));
    }
    if (output.size(0) != Sum(recv_counts)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": output has ", output.size(0),
          " rows, expected sum(recv_counts) = ", Sum(recv_counts)));
    }
    return CheckNoOverlap(what, input, output);
  }();
  if (!valid.ok()) return Refuse(valid);
  const at::Tensor bits_input = BitsView(input);
  const at::Tensor bits_output = BitsView(output);
  CollectiveRecord record = NewRecord(kind, input, bits_input, input);
  SetTraffic(record,
             AllToAllVTraffic(ToVector(send_counts), ToVector(recv_counts),
                              RowNumel(input) * input.element_size(), rank()));
  if (flat_shm()) {
    return ShmAllToAll(std::move(record), RowBlocks(input, ToVector(send_counts)),
                       RowBlocks(output, ToVector(recv_counts)));
  }
  record.algorithm = "gloo_alltoall_base";
  std::vector<int64_t> send = ToVector(send_counts);
  std::vector<int64_t> recv = ToVector(recv_counts);
  record.send_counts = send;
  record.recv_counts = recv;
  return Launch(std::move(record), [&] {
    at::Tensor in = bits_input;
    at::Tensor out = bits_output;
    return Launched{group_->alltoall_base(out, in, recv, send), nullptr};
  });
}

CollectiveHandle Communicator::Impl::Barrier() {
  absl::MutexLock lock(&issue_mutex_);
  const CollectiveOp kind = CollectiveOp::kBarrier;
  if (absl::Status usable = Usable(kind); !usable.ok()) return Refuse(usable);
  CollectiveRecord record;
  record.op = kind;
  if (flat_shm()) return ShmBarrier(std::move(record));
  record.algorithm = "gloo_barrier";
  return Launch(std::move(record), [&] {
    return Launched{group_->barrier(), nullptr};
  });
}

CollectiveHandle Communicator::Impl::PointToPoint(CollectiveOp kind,
                                                  const at::Tensor& tensor,
                                                  int peer, int tag) {
  absl::MutexLock lock(&issue_mutex_);
  const std::string what = What(kind);
  absl::Status valid = [&]() -> absl::Status {
    RETURN_IF_ERROR(Usable(kind));
    RETURN_IF_ERROR(CheckRank(what, "peer", peer));
    if (peer == rank()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": peer ", peer, " is this rank"));
    }
    if (tag < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": tag ", tag, " is negative"));
    }
    if (tag >= kFirstReservedTag) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": tag ", tag, " is reserved (tags from ", kFirstReservedTag,
          " up carry the communicator's own send/recv collectives)"));
    }
    return CheckTensor(what, "tensor", tensor, TensorUse::kCopy);
  }();
  if (!valid.ok()) return Refuse(valid);
  const at::Tensor bits = BitsView(tensor);
  CollectiveRecord record = NewRecord(kind, tensor, bits, tensor);
  record.peer = peer;
  const bool send = kind == CollectiveOp::kSend;
  SetTraffic(record, send ? SendTraffic(tensor.nbytes())
                          : RecvTraffic(tensor.nbytes()));
  record.algorithm = send ? "gloo_send" : "gloo_recv";
  return Launch(std::move(record), [&] {
    std::vector<at::Tensor> tensors{bits};
    return Launched{send ? group_->send(tensors, peer, tag)
                         : group_->recv(tensors, peer, tag),
                    nullptr};
  });
}

CollectiveHandle Communicator::Impl::IssueAllGatherList(
    CollectiveOp kind, const at::Tensor& input, std::vector<at::Tensor> blocks,
    absl::string_view algorithm) {
  const at::Tensor bits_input = BitsView(input);
  CollectiveRecord record = NewRecord(kind, input, bits_input, input);
  record.elements = input.numel() * world_size();
  record.size_bytes = input.nbytes() * world_size();
  SetTraffic(record, AllGatherTraffic(record.size_bytes, world_size()));
  record.algorithm = std::string(algorithm);
  return Launch(std::move(record), [&] {
    std::vector<at::Tensor> inputs{bits_input.view(blocks[0].sizes())};
    std::vector<std::vector<at::Tensor>> outputs{blocks};
    return Launched{group_->allgather(outputs, inputs), nullptr};
  });
}

}  // namespace mtb::collective
