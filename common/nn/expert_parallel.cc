// The communicator and both count vectors travel to backward in the context's
// saved_data (a capsule, as tensor_parallel.cc does); Function::apply runs
// forward under no_grad.
#include "common/nn/expert_parallel.h"

#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "ATen/ATen.h"
#include "ATen/core/ivalue.h"
#include "glog/logging.h"
#include "torch/csrc/autograd/custom_function.h"

namespace mtb {
namespace nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Exchange : torch::CustomClassHolder {
  Exchange(collective::Communicator* comm, std::vector<int64_t> send,
           std::vector<int64_t> recv)
      : comm(comm), send_counts(std::move(send)), recv_counts(std::move(recv)) {}
  collective::Communicator* comm;
  std::vector<int64_t> send_counts;
  std::vector<int64_t> recv_counts;
};

at::Tensor Exchanged(const at::Tensor& rows, const std::vector<int64_t>& send,
                     const std::vector<int64_t>& recv,
                     collective::Communicator* comm) {
  std::vector<int64_t> shape = rows.sizes().vec();
  shape[0] = std::accumulate(recv.begin(), recv.end(), int64_t{0});
  const at::Tensor input = rows.contiguous();
  at::Tensor output = at::empty(shape, rows.options());
  const absl::Status status = comm->AllToAllV(input, output, send, recv);
  if (!status.ok()) throw std::runtime_error(std::string(status.message()));
  return output;
}

class AllToAllVFunction : public torch::autograd::Function<AllToAllVFunction> {
 public:
  static at::Tensor forward(AutogradContext* context, const at::Tensor& rows,
                            c10::intrusive_ptr<Exchange> exchange) {
    at::Tensor out = Exchanged(rows, exchange->send_counts,
                               exchange->recv_counts, exchange->comm);
    context->saved_data["exchange"] =
        c10::IValue::make_capsule(std::move(exchange));
    return out;
  }

  static variable_list backward(AutogradContext* context,
                                variable_list grad_outputs) {
    auto exchange = c10::static_intrusive_pointer_cast<Exchange>(
        context->saved_data["exchange"].toCapsule());
    // The reverse exchange: what came from p goes back to p.
    return {Exchanged(grad_outputs[0], exchange->recv_counts,
                      exchange->send_counts, exchange->comm),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor AllToAllVWithGrad(const at::Tensor& rows,
                             const std::vector<int64_t>& send_counts,
                             const std::vector<int64_t>& recv_counts,
                             collective::Communicator* comm) {
  CHECK(comm != nullptr);
  return AllToAllVFunction::apply(
      rows, c10::make_intrusive<Exchange>(comm, send_counts, recv_counts));
}

}  // namespace nn
}  // namespace mtb
