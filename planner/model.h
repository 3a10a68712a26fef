// The models the planner plans for: the trainer's GPT shape (trainer/model/model.h)
// by its flags or by a name, with the trainer's parameter count and model
// FLOPs per token.
#ifndef MTB_PLANNER_MODEL_H_
#define MTB_PLANNER_MODEL_H_

#include <string>

#include "absl/status/statusor.h"
#include "planner/planner.pb.h"

namespace mtb::planner {

// Fills parameters (trainer/memory/memory_estimate.h's GptParameterCount) and
// flops_per_token (the trainer's 6 (P - T d) + 12 L T d, GptModel::
// FlopsPerToken). kInvalidArgument naming the field for a shape the trainer
// refuses (non-positive, d_model not divisible by n_heads).
absl::StatusOr<ModelSpec> ModelFromShape(const std::string& name, int vocab_size, int d_model,
                                         int n_layers, int n_heads, int seq_len);

// "gpt2-124m", "gpt2-350m", "gpt2-774m", "gpt2-1.5b" (Radford et al. 2019,
// vocab 50257, context 1024), "gpt3-2.7b", "gpt3-6.7b", "gpt3-13b",
// "gpt3-175b" (Brown et al. 2020, context 2048) and the strategy matrix's
// "tiny" and "small" (trainer/bench/strategy_matrix.h).
absl::StatusOr<ModelSpec> NamedModel(const std::string& name);
std::string NamedModelChoices();

}  // namespace mtb::planner

#endif  // MTB_PLANNER_MODEL_H_
