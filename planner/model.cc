#include "planner/model.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "trainer/memory/memory_estimate.h"

namespace mtb::planner {
namespace {

struct NamedShape {
  const char* name;
  int vocab_size, d_model, n_layers, n_heads, seq_len;
};

const std::vector<NamedShape>& NamedShapes() {
  static const auto* shapes = new std::vector<NamedShape>{
      {"tiny", 512, 128, 2, 4, 64},
      {"small", 4096, 256, 4, 4, 128},
      {"gpt2-124m", 50257, 768, 12, 12, 1024},
      {"gpt2-350m", 50257, 1024, 24, 16, 1024},
      {"gpt2-774m", 50257, 1280, 36, 20, 1024},
      {"gpt2-1.5b", 50257, 1600, 48, 25, 1024},
      {"gpt3-2.7b", 50257, 2560, 32, 32, 2048},
      {"gpt3-6.7b", 50257, 4096, 32, 32, 2048},
      {"gpt3-13b", 50257, 5120, 40, 40, 2048},
      {"gpt3-175b", 50257, 12288, 96, 96, 2048},
  };
  return *shapes;
}

}  // namespace

absl::StatusOr<ModelSpec> ModelFromShape(const std::string& name, int vocab_size, int d_model,
                                         int n_layers, int n_heads, int seq_len) {
  for (const auto& [flag, value] :
       std::vector<std::pair<const char*, int>>{{"vocab_size", vocab_size},
                                                {"d_model", d_model},
                                                {"n_layers", n_layers},
                                                {"n_heads", n_heads},
                                                {"seq_len", seq_len}}) {
    if (value <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, " must be positive"));
    }
  }
  if (d_model % n_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--d_model=", d_model, " must be divisible by --n_heads=", n_heads));
  }
  ModelSpec model;
  model.set_name(name);
  model.set_vocab_size(vocab_size);
  model.set_d_model(d_model);
  model.set_n_layers(n_layers);
  model.set_n_heads(n_heads);
  model.set_seq_len(seq_len);
  TrainConfig config;
  config.set_vocab_size(vocab_size);
  config.set_d_model(d_model);
  config.set_n_layers(n_layers);
  config.set_n_heads(n_heads);
  config.set_seq_len(seq_len);
  model.set_parameters(GptParameterCount(config));
  const double t_d = static_cast<double>(seq_len) * d_model;
  model.set_flops_per_token(6.0 * (static_cast<double>(model.parameters()) - t_d) +
                            12.0 * n_layers * t_d);
  return model;
}

absl::StatusOr<ModelSpec> NamedModel(const std::string& name) {
  for (const NamedShape& shape : NamedShapes()) {
    if (name == shape.name) {
      return ModelFromShape(name, shape.vocab_size, shape.d_model, shape.n_layers, shape.n_heads,
                            shape.seq_len);
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--model=", name, " is not a named model: use ", NamedModelChoices(),
                   ", or give --vocab_size, --d_model, --n_layers, --n_heads, --seq_len"));
}

std::string NamedModelChoices() {
  std::vector<std::string> names;
  for (const NamedShape& shape : NamedShapes()) names.push_back(shape.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace mtb::planner
