// Expert parallelism's one communication primitive as an autograd function:
// an uneven all-to-all along dim 0 whose backward is the reverse all-to-all
// (the gradient of the rows a rank received goes back to the rank that sent
// them, with the send and receive counts swapped). moe_comm's dispatch and
// combine are both this function.
#ifndef MTB_COMMON_NN_EXPERT_PARALLEL_H_
#define MTB_COMMON_NN_EXPERT_PARALLEL_H_

#include <cstdint>
#include <vector>

#include "ATen/core/Tensor.h"
#include "common/collective/communicator.h"

namespace mtb {
namespace nn {

// rows: (sum(send_counts), D...) packed in destination-rank order;
// send_counts[p] rows go to rank p, recv_counts[p] rows come from it. Returns
// (sum(recv_counts), D...). Collective: every rank calls it (and its backward
// runs where autograd reaches it, on every rank in the same order). Throws
// std::runtime_error with the communicator's message on failure (autograd
// cannot carry a Status). `comm` must outlive the backward pass.
at::Tensor AllToAllVWithGrad(const at::Tensor& rows,
                             const std::vector<int64_t>& send_counts,
                             const std::vector<int64_t>& recv_counts,
                             collective::Communicator* comm);

}  // namespace nn
}  // namespace mtb

#endif  // MTB_COMMON_NN_EXPERT_PARALLEL_H_
