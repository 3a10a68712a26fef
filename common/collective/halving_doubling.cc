#include "common/collective/halving_doubling.h"

#include <numeric>
#include <stdexcept>

#include "gloo/reduce_scatter.h"

namespace mtb::collective {
namespace {

template <typename T>
const ::gloo::ReductionFunction<T>* Function(HalvingDoublingOp op) {
  switch (op) {
    case HalvingDoublingOp::kSum:
      return ::gloo::ReductionFunction<T>::sum;
    case HalvingDoublingOp::kMax:
      return ::gloo::ReductionFunction<T>::max;
    case HalvingDoublingOp::kMin:
      return ::gloo::ReductionFunction<T>::min;
  }
  throw std::logic_error("unknown HalvingDoublingOp");
}

template <typename T>
void Run(const std::shared_ptr<::gloo::Context>& context, T* data, int count,
         const std::vector<int>& recv_elements, HalvingDoublingOp op) {
  // The constructor registers send and receive buffers with every peer it
  // exchanges with (a handshake); run() moves the data.
  ::gloo::ReduceScatterHalvingDoubling<T> algorithm(
      context, std::vector<T*>{data}, count, recv_elements, Function<T>(op));
  algorithm.run();
}

}  // namespace

bool HalvingDoublingSupports(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kDouble || dtype == at::kInt ||
         dtype == at::kLong;
}

void HalvingDoublingReduceScatter(
    const std::shared_ptr<::gloo::Context>& context, const at::Tensor& buffer,
    const std::vector<int>& recv_elements, HalvingDoublingOp op) {
  const int64_t count =
      std::accumulate(recv_elements.begin(), recv_elements.end(), int64_t{0});
  if (count != buffer.numel()) {
    throw std::logic_error("halving-doubling buffer size mismatch");
  }
  switch (buffer.scalar_type()) {
    case at::kFloat:
      return Run(context, buffer.data_ptr<float>(), count, recv_elements, op);
    case at::kDouble:
      return Run(context, buffer.data_ptr<double>(), count, recv_elements, op);
    case at::kInt:
      return Run(context, buffer.data_ptr<int32_t>(), count, recv_elements, op);
    case at::kLong:
      return Run(context, buffer.data_ptr<int64_t>(), count, recv_elements, op);
    default:
      throw std::logic_error("halving-doubling: unsupported dtype");
  }
}

}  // namespace mtb::collective
