#include "common/collective/gloo_allreduce.h"

#include <stdexcept>

#include "gloo/allreduce.h"
#include "gloo/math.h"

namespace mtb::collective {
namespace {

template <typename T>
::gloo::AllreduceOptions::Func Function(HalvingDoublingOp op) {
  using Elementwise = void (*)(void*, const void*, const void*, size_t);
  switch (op) {
    case HalvingDoublingOp::kSum:
      return static_cast<Elementwise>(&::gloo::sum<T>);
    case HalvingDoublingOp::kMax:
      return static_cast<Elementwise>(&::gloo::max<T>);
    case HalvingDoublingOp::kMin:
      return static_cast<Elementwise>(&::gloo::min<T>);
  }
  throw std::logic_error("unknown HalvingDoublingOp");
}

template <typename T>
void Run(const std::shared_ptr<::gloo::Context>& context, T* data, size_t count,
         GlooAllreduceAlgorithm algorithm, HalvingDoublingOp op, uint32_t tag,
         std::chrono::milliseconds timeout) {
  ::gloo::AllreduceOptions options(context);
  options.setAlgorithm(algorithm == GlooAllreduceAlgorithm::kBcube
                           ? ::gloo::AllreduceOptions::Algorithm::BCUBE
                           : ::gloo::AllreduceOptions::Algorithm::RING);
  options.setOutput(data, count);
  options.setReduceFunction(Function<T>(op));
  options.setTag(tag);
  options.setTimeout(timeout);
  ::gloo::allreduce(options);
}

}  // namespace

bool GlooAllreduceSupports(at::ScalarType dtype) {
  return HalvingDoublingSupports(dtype);
}

void GlooAllreduce(const std::shared_ptr<::gloo::Context>& context,
                   const at::Tensor& buffer, GlooAllreduceAlgorithm algorithm,
                   HalvingDoublingOp op, uint32_t tag,
                   std::chrono::milliseconds timeout) {
  const size_t count = static_cast<size_t>(buffer.numel());
  if (count == 0) return;
  switch (buffer.scalar_type()) {
    case at::kFloat:
      return Run(context, buffer.data_ptr<float>(), count, algorithm, op, tag, timeout);
    case at::kDouble:
      return Run(context, buffer.data_ptr<double>(), count, algorithm, op, tag, timeout);
    case at::kInt:
      return Run(context, buffer.data_ptr<int32_t>(), count, algorithm, op, tag, timeout);
    case at::kLong:
      return Run(context, buffer.data_ptr<int64_t>(), count, algorithm, op, tag, timeout);
    default:
      throw std::logic_error("gloo allreduce: unsupported dtype");
  }
}

}  // namespace mtb::collective
