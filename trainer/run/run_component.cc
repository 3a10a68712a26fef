#include "trainer/run/run_component.h"

#include "common/base/status.h"

namespace mtb {

absl::Status RunComponents::RunStart(RunState& state) {
  for (auto& c : components_) RETURN_IF_ERROR(c->OnRunStart(state));
  return absl::OkStatus();
}

void RunComponents::StepBegin(int64_t step) {
  for (auto& c : components_) c->OnStepBegin(step);
}

bool RunComponents::PhaseBegin(int64_t step, const char* phase) {
  bool poison = false;
  for (auto& c : components_) poison |= c->OnPhaseBegin(step, phase);
  return poison;
}

void RunComponents::Mark(const char* what, int index) {
  for (auto& c : components_) c->OnMark(what, index);
}

void RunComponents::ContributeScalars(int64_t step, StepScalars& scalars) {
  for (auto& c : components_) c->ContributeScalars(step, scalars);
}

void RunComponents::ReadScalars(int64_t step,
                                const StepScalars::Gathered& all) {
  for (auto& c : components_) c->ReadScalars(step, all);
}

std::string RunComponents::NonFiniteNote(int64_t step) const {
  std::string note;
  for (const auto& c : components_) note += c->NonFiniteNote(step);
  return note;
}

void RunComponents::StepEnd(int64_t step, StepRecord& record) {
  for (auto& c : components_) c->OnStepEnd(step, record);
}

absl::Status RunComponents::AfterStep(RunState& state, StepRecord& record) {
  for (auto& c : components_) RETURN_IF_ERROR(c->AfterStep(state, record));
  return absl::OkStatus();
}

absl::Status RunComponents::RunEnd(RunState& state) {
  for (auto& c : components_) RETURN_IF_ERROR(c->OnRunEnd(state));
  return absl::OkStatus();
}

absl::Status RunComponents::TrainingEnd(RunState& state) {
  for (auto& c : components_) RETURN_IF_ERROR(c->OnTrainingEnd(state));
  return absl::OkStatus();
}

}  // namespace mtb
