#include "trainer/tp/strategy.h"

#include <cmath>
#include <string>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "glog/logging.h"
#include "trainer/strategy/scalars.h"
#include "trainer/tp/layout.h"

namespace mtb::tp {
namespace {

// "model/<name>", "optimizer/exp_avg/<name>", "optimizer/exp_avg_sq/<name>"
// -> <name>; "" for pieces that are no parameter's (optimizer/step).
std::string ParameterOf(const std::string& piece) {
  for (const char* prefix :
       {"model/", "optimizer/exp_avg/", "optimizer/exp_avg_sq/"}) {
    if (absl::StartsWith(piece, prefix)) {
      return piece.substr(std::string(prefix).size());
    }
  }
  return "";
}

std::vector<int64_t> GlobalShapeOf(Split split,
                                   const std::vector<int64_t>& local, int n) {
  std::vector<int64_t> shape = local;
  switch (split) {
    case Split::kReplicated:
      break;
    case Split::kRows:
    case Split::kQkvRows:
      shape[0] *= n;
      break;
    case Split::kColumns:
      shape.back() *= n;
      break;
  }
  return shape;
}

}  // namespace

TensorParallelStrategy::TensorParallelStrategy(std::unique_ptr<Strategy> inner,
                                               collective::RankMesh* mesh,
                                               int64_t expected_tp_bytes)
    : inner_(std::move(inner)),
      mesh_(mesh),
      expected_tp_bytes_(expected_tp_bytes) {
  CHECK(inner_ != nullptr);
  CHECK(mesh_ != nullptr);
}

StrategySummary TensorParallelStrategy::Summary() const {
  StrategySummary summary = inner_->Summary();
  absl::StrAppend(&summary.description, "; over the dp group of ",
                  mesh_->dp_size(), " ranks, x tp=", mesh_->tp_size(),
                  " (tensor parallel, tp innermost)");
  return summary;
}

absl::Status TensorParallelStrategy::Setup(ParameterStore& store,
                                           const AdamWOptions& optimizer) {
  store_ = &store;
  return inner_->Setup(store, optimizer);
}

absl::Status TensorParallelStrategy::BeforeBackward(int piece, int pieces,
                                                    ReductionMode mode) {
  return inner_->BeforeBackward(piece, pieces, mode);
}

absl::Status TensorParallelStrategy::AfterBackward(ReductionMode mode) {
  return inner_->AfterBackward(mode);
}

absl::StatusOr<double> TensorParallelStrategy::GlobalGradNorm() {
  ASSIGN_OR_RETURN(const double inner, inner_->GlobalGradNorm());
  ASSIGN_OR_RETURN(const double total,
                   ReduceScalarOverRanks(mesh_->tp(), inner * inner,
                                         ScalarReduction::kSum, name()));
  return std::sqrt(total);
}

absl::Status TensorParallelStrategy::OptimizerStep(double lr,
                                                   double gradient_scale) {
  return inner_->OptimizerStep(lr, gradient_scale);
}

StepCommunication TensorParallelStrategy::TakeStepCommunication() {
  StepCommunication step = inner_->TakeStepCommunication();
  const int64_t sent = mesh_->tp()->log().Totals().bytes_sent;
  step.tp_bytes_sent = sent - tp_bytes_taken_;
  step.expected_tp_bytes = expected_tp_bytes_;
  tp_bytes_taken_ = sent;
  return step;
}

std::vector<StatePiece> TensorParallelStrategy::CheckpointPieces(
    CheckpointUse use) {
  return GlobalPieces(inner_->CheckpointPieces(use), use, mesh_->tp_rank(),
                      mesh_->tp_size());
}

std::vector<StatePiece> GlobalPieces(std::vector<StatePiece> local,
                                     CheckpointUse use, int rank, int n) {
  std::vector<StatePiece> pieces;
  for (StatePiece& piece : local) {
    const std::string parameter = ParameterOf(piece.name);
    const Split split =
        parameter.empty() ? Split::kReplicated : SplitOf(parameter);
    // Replicated over the group: saved once (tp rank 0), loaded by all.
    if (split == Split::kReplicated) {
      if (use == CheckpointUse::kLoad || rank == 0) {
        pieces.push_back(std::move(piece));
      }
      continue;
    }
    const std::vector<int64_t> global =
        GlobalShapeOf(split, piece.global_shape, n);
    for (const GlobalRun& run :
         GlobalRuns(split, global, rank, n, piece.offset,
                    piece.values.numel())) {
      StatePiece mapped;
      mapped.name = piece.name;
      mapped.global_shape = global;
      mapped.offset = run.global_offset;
      mapped.values =
          piece.values.narrow(0, run.local_offset - piece.offset, run.numel);
      pieces.push_back(std::move(mapped));
    }
  }
  return pieces;
}

absl::StatusOr<std::vector<NamedParameter>> GatherGlobalParameters(
    const std::vector<NamedParameter>& parameters,
    collective::Communicator& tp) {
  std::vector<NamedParameter> global;
  global.reserve(parameters.size());
  for (const NamedParameter& p : parameters) {
    NamedParameter whole = p;
    ASSIGN_OR_RETURN(whole.tensor, GatherGlobal(SplitOf(p.name), p.tensor, tp));
    global.push_back(std::move(whole));
  }
  return global;
}

}  // namespace mtb::tp
