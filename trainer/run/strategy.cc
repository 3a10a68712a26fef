#include "trainer/run/strategy.h"

#include <cmath>
#include <memory>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "common/collective/communicator.h"
#include "trainer/model/state_pieces.h"

namespace mtb {

double GradNorm(const std::vector<NamedParameter>& parameters) {
  double sum_of_squares = 0;
  for (const NamedParameter& p : parameters) {
    const at::Tensor& grad = p.tensor.grad();
    if (!grad.defined() || !p.counted_in_norm) continue;
    const double norm = grad.norm().item<double>();
    sum_of_squares += norm * norm;
  }
  return std::sqrt(sum_of_squares);
}

int64_t StorageBytes(const at::Tensor& tensor) {
  return tensor.defined() ? static_cast<int64_t>(tensor.storage().nbytes())
                          : 0;
}

HeldMemory SingleStrategy::Held() const {
  HeldMemory held;
  held.parameters = StorageBytes(store_->flat_parameters());
  held.gradients = StorageBytes(store_->flat_gradients());
  held.optimizer_state = optimizer_->state_bytes();
  return held;
}

StrategySummary SingleStrategy::Summary() const {
  return {"single",
          "single: one rank, gradients used as computed (no buckets, no "
          "hooks)",
          {}};
}

int Strategy::world_size() const {
  const collective::Communicator* c = communicator();
  return c == nullptr ? 1 : c->world_size();
}

std::string Strategy::backend() const {
  const collective::Communicator* c = communicator();
  return c != nullptr && c->world_size() > 1 ? std::string(c->backend())
                                             : "none";
}

absl::Status SingleStrategy::Setup(ParameterStore& store,
                                   const AdamWOptions& optimizer) {
  store_ = &store;
  store.AttachGradients();
  optimizer_ = std::make_unique<FlatAdamW>(
      store, std::vector<FlatAdamW::Range>{{0, store.numel()}}, optimizer,
      kOptimizerPieceElements);
  return absl::OkStatus();
}

void SingleStrategy::ZeroGradients() { store_->ZeroGradients(); }


std::vector<ExactGroup> SingleStrategy::ExactGroups() {
  ExactGroup all;
  all.numel = store_->numel();
  all.destination = store_->flat_gradients();
  return {all};
}

absl::StatusOr<double> SingleStrategy::GlobalGradNorm() {
  return GradNorm(store_->parameters());
}

absl::Status SingleStrategy::OptimizerStep(double lr, double gradient_scale) {
  if (gradient_scale != 1) {
    at::NoGradGuard no_grad;
    store_->flat_gradients().mul_(gradient_scale);
  }
  optimizer_->Step(lr, {store_->flat_gradients()});
  return absl::OkStatus();
}

std::vector<StatePiece> SingleStrategy::CheckpointPieces(CheckpointUse) {
  const std::vector<FlatRange> all = {{0, store_->numel()}};
  std::vector<StatePiece> pieces = ModelPieces(*store_, all);
  std::vector<StatePiece> state = OptimizerPieces(*store_, *optimizer_, all);
  pieces.insert(pieces.end(), state.begin(), state.end());
  pieces.push_back(OptimizerStepPiece(*optimizer_));
  return pieces;
}

}  // namespace mtb
