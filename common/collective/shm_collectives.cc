// The collectives over shared memory (shm_transport.h): the Communicator's
// methods check arguments and build the record as for Gloo, then hand the
// caller's tensors (raw bytes; bfloat16 reductions as their float32 transport
// tensor) to the ShmGroup on the serial worker. The record's algorithm starts
// with "shm_", and its byte counts keep the model of traffic.h (what each
// rank contributes and receives), whatever the transport.
#include <cstring>
#include <utility>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "common/collective/communicator_internal.h"
#include "glog/logging.h"

namespace mtb::collective {
namespace {

ShmDtype ToShmDtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return ShmDtype::kFloat32;
    case at::kDouble:
      return ShmDtype::kFloat64;
    case at::kHalf:
      return ShmDtype::kFloat16;
    case at::kInt:
      return ShmDtype::kInt32;
    case at::kLong:
      return ShmDtype::kInt64;
    case at::kChar:
      return ShmDtype::kInt8;
    case at::kByte:
      return ShmDtype::kUint8;
    default:
      break;
  }
  LOG(FATAL) << "no shared-memory reduction for " << type
             << " (CheckTensor admits only reducible dtypes)";
  return ShmDtype::kUint8;
}

ShmReduceOp ToShmOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:  // divided afterwards (FinishReduction)
      return ShmReduceOp::kSum;
    case ReduceOp::kMax:
      return ShmReduceOp::kMax;
    case ReduceOp::kMin:
      return ShmReduceOp::kMin;
  }
  return ShmReduceOp::kSum;
}

c10d::ReduceOp ToGlooOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return c10d::ReduceOp(c10d::ReduceOp::MAX);
    case ReduceOp::kMin:
      return c10d::ReduceOp(c10d::ReduceOp::MIN);
    default:
      return c10d::ReduceOp(c10d::ReduceOp::SUM);
  }
}

// Hierarchical all-reduce of `flat`: within the host through shared memory,
// among the hosts' leaders through Gloo (`leaders` null on the others), then
// from each leader to its host through shared memory. Every rank of the host
// runs the same steps, so the host's step numbering stays aligned.
void HierarchicalAllReduce(ShmGroup& shm, GlooProcessGroup* leaders, const at::Tensor& flat,
                           ReduceOp op, absl::Time deadline) {
  shm.AllReduce(flat.data_ptr(), flat.numel(), ToShmDtype(flat.scalar_type()), ToShmOp(op),
                deadline);
  if (leaders != nullptr) {
    std::vector<at::Tensor> tensors{flat};
    c10d::AllreduceOptions options;
    options.reduceOp = ToGlooOp(op);
    leaders->allreduce(tensors, options)->wait();
  }
  shm.Broadcast(flat.data_ptr(), static_cast<int64_t>(flat.nbytes()), 0, deadline);
}

}  // namespace

CollectiveHandle Communicator::Impl::ShmAllReduce(CollectiveRecord record, const at::Tensor& flat,
                                                  ReduceOp op, std::function<void()> finish) {
  const ShmDtype dtype = ToShmDtype(flat.scalar_type());
  record.algorithm =
      shm_->NaiveAllReduce(flat.nbytes()) ? "shm_allreduce_naive" : "shm_allreduce_sliced";
  if (hierarchical()) {
    record.algorithm =
        absl::StrCat("hierarchical(", record.algorithm, "+gloo_allreduce(leaders)+shm_broadcast)");
    return LaunchShm(
        std::move(record),
        [flat, op, leaders = leaders_](ShmGroup& shm, absl::Time deadline) {
          HierarchicalAllReduce(shm, leaders.get(), flat, op, deadline);
        },
        std::move(finish));
  }
  const ShmReduceOp shm_op = ToShmOp(op);
  return LaunchShm(
      std::move(record),
      [flat, dtype, shm_op](ShmGroup& shm, absl::Time deadline) {
        shm.AllReduce(flat.data_ptr(), flat.numel(), dtype, shm_op, deadline);
      },
      std::move(finish));
}

CollectiveHandle Communicator::Impl::ShmReduceScatter(CollectiveRecord record,
                                                      const at::Tensor& flat_input,
                                                      std::vector<int64_t> block_elements,
                                                      const at::Tensor& result, ReduceOp op,
                                                      std::function<void()> finish) {
  const ShmDtype dtype = ToShmDtype(flat_input.scalar_type());
  record.algorithm = "shm_reduce_scatter_sliced";
  if (hierarchical()) {
    // The whole input all-reduced hierarchically, then this rank's block.
    record.algorithm = "hierarchical(all_reduce of the input)+own block";
    at::Tensor whole = flat_input.clone();
    state_->temporaries.Track(whole);
    int64_t offset = 0;
    for (int p = 0; p < rank(); ++p) offset += block_elements[p];
    const int64_t mine = block_elements[rank()];
    return LaunchShm(
        std::move(record),
        [whole, offset, mine, result, op, leaders = leaders_](ShmGroup& shm, absl::Time deadline) {
          HierarchicalAllReduce(shm, leaders.get(), whole, op, deadline);
          result.copy_(whole.narrow(0, offset, mine));
        },
        std::move(finish));
  }
  const ShmReduceOp shm_op = ToShmOp(op);
  return LaunchShm(
      std::move(record),
      [flat_input, block_elements, result, dtype, shm_op](ShmGroup& shm, absl::Time deadline) {
        std::vector<const void*> inputs;
        const char* base = static_cast<const char*>(flat_input.data_ptr());
        int64_t offset = 0;
        for (int64_t elements : block_elements) {
          inputs.push_back(base + offset * flat_input.element_size());
          offset += elements;
        }
        shm.ReduceScatter(inputs, block_elements, result.data_ptr(), dtype, shm_op, deadline);
      },
      std::move(finish));
}

CollectiveHandle Communicator::Impl::ShmAllGather(CollectiveRecord record, const at::Tensor& input,
                                                  std::vector<at::Tensor> outputs) {
  record.transport_dtype = record.dtype;
  record.algorithm = "shm_allgather_direct_read";
  if (hierarchical()) {
    // Bit-exact for any dtype: every byte is one rank's plus zeros.
    record.algorithm = "hierarchical(uint8 all_reduce of the zero-filled output)";
    int64_t total = 0, offset = 0;
    for (int p = 0; p < static_cast<int>(outputs.size()); ++p) {
      if (p == rank()) offset = total;
      total += static_cast<int64_t>(outputs[p].nbytes());
    }
    at::Tensor bytes = at::zeros({total}, at::kByte);
    state_->temporaries.Track(bytes);
    return LaunchShm(
        std::move(record),
        [bytes, offset, input, outputs = std::move(outputs), leaders = leaders_](
            ShmGroup& shm, absl::Time deadline) {
          std::memcpy(static_cast<char*>(bytes.data_ptr()) + offset, input.data_ptr(),
                      input.nbytes());
          HierarchicalAllReduce(shm, leaders.get(), bytes, ReduceOp::kSum, deadline);
          int64_t at = 0;
          for (const at::Tensor& output : outputs) {
            std::memcpy(output.data_ptr(), static_cast<const char*>(bytes.data_ptr()) + at,
                        output.nbytes());
            at += static_cast<int64_t>(output.nbytes());
          }
        },
        nullptr);
  }
  return LaunchShm(
      std::move(record),
      [input, outputs = std::move(outputs)](ShmGroup& shm, absl::Time deadline) {
        std::vector<void*> pointers;
        std::vector<int64_t> bytes;
        for (const at::Tensor& output : outputs) {
          pointers.push_back(output.data_ptr());
          bytes.push_back(static_cast<int64_t>(output.nbytes()));
        }
        shm.AllGather(input.data_ptr(), pointers, bytes, deadline);
      },
      nullptr);
}

CollectiveHandle Communicator::Impl::ShmBroadcast(CollectiveRecord record, const at::Tensor& tensor,
                                                  int root) {
  record.transport_dtype = record.dtype;
  record.algorithm = "shm_broadcast";
  return LaunchShm(
      std::move(record),
      [tensor, root](ShmGroup& shm, absl::Time deadline) {
        shm.Broadcast(tensor.data_ptr(), static_cast<int64_t>(tensor.nbytes()), root, deadline);
      },
      nullptr);
}

CollectiveHandle Communicator::Impl::ShmAllToAll(CollectiveRecord record,
                                                 std::vector<at::Tensor> inputs,
                                                 std::vector<at::Tensor> outputs) {
  record.transport_dtype = record.dtype;
  record.algorithm = "shm_alltoall";
  return LaunchShm(
      std::move(record),
      [inputs = std::move(inputs), outputs = std::move(outputs)](ShmGroup& shm,
                                                                 absl::Time deadline) {
        std::vector<const void*> in;
        std::vector<void*> out;
        std::vector<int64_t> send_bytes;
        std::vector<int64_t> recv_bytes;
        for (const at::Tensor& tensor : inputs) {
          in.push_back(tensor.data_ptr());
          send_bytes.push_back(static_cast<int64_t>(tensor.nbytes()));
        }
        for (const at::Tensor& tensor : outputs) {
          out.push_back(tensor.data_ptr());
          recv_bytes.push_back(static_cast<int64_t>(tensor.nbytes()));
        }
        shm.AllToAll(in, send_bytes, out, recv_bytes, deadline);
      },
      nullptr);
}

CollectiveHandle Communicator::Impl::ShmBarrier(CollectiveRecord record) {
  record.algorithm = "shm_barrier";
  return LaunchShm(
      std::move(record), [](ShmGroup& shm, absl::Time deadline) { shm.Barrier(deadline); },
      nullptr);
}

}  // namespace mtb::collective
