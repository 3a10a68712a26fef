#include "trainer/strategy.h"

#include <cmath>
#include <memory>

#include "ATen/ATen.h"

namespace mtb {

double GradNorm(const std::vector<NamedParameter>& parameters) {
  double sum_of_squares = 0;
  for (const NamedParameter& p : parameters) {
    const at::Tensor& grad = p.tensor.grad();
    if (!grad.defined()) continue;
    const double norm = grad.norm().item<double>();
    sum_of_squares += norm * norm;
  }
  return std::sqrt(sum_of_squares);
}

void ScaleGrads(const std::vector<NamedParameter>& parameters, double factor) {
  at::NoGradGuard no_grad;
  for (const NamedParameter& p : parameters) {
    if (p.tensor.grad().defined()) p.tensor.mutable_grad().mul_(factor);
  }
}

std::string SingleStrategy::Describe() const {
  return "single: one rank, gradients used as computed (no buckets, no "
         "hooks)";
}

absl::Status SingleStrategy::Setup(
    const std::vector<NamedParameter>& parameters,
    const AdamWOptions& optimizer) {
  parameters_ = parameters;
  optimizer_ = std::make_unique<AdamW>(parameters, optimizer);
  return absl::OkStatus();
}

absl::Status SingleStrategy::BeforeBackward(int, int) {
  return absl::OkStatus();
}

absl::Status SingleStrategy::AfterBackward() { return absl::OkStatus(); }

absl::StatusOr<double> SingleStrategy::GlobalGradNorm() {
  return GradNorm(parameters_);
}

absl::Status SingleStrategy::ScaleGradients(double factor) {
  ScaleGrads(parameters_, factor);
  return absl::OkStatus();
}

absl::StatusOr<double> SingleStrategy::ReduceScalar(double value,
                                                    ScalarReduction) {
  return value;
}

absl::StatusOr<std::vector<double>> SingleStrategy::GatherScalars(
    const std::vector<double>& values) {
  return values;
}

absl::Status SingleStrategy::OptimizerStep(double lr) {
  optimizer_->Step(lr);
  return absl::OkStatus();
}

}  // namespace mtb
