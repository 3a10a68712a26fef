#include "trainer/model/init_from.h"

#include <map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/hf/gpt2.h"
#include "common/hf/safetensors.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "glog/logging.h"

namespace mtb {
namespace {

constexpr char kModelPrefix[] = "model/";

// config.json's sizes against this run's flags, every difference named.
absl::Status CheckSizes(const hf::Gpt2Config& gpt2, const TrainConfig& config) {
  std::vector<std::string> differences;
  auto compare = [&](const char* field, int64_t file, const char* flag, int64_t run) {
    if (file != run)
      differences.push_back(absl::StrCat(field, "=", file, " vs --", flag, "=", run));
  };
  compare("vocab_size", gpt2.vocab_size(), "vocab_size", config.vocab_size());
  compare("n_positions", gpt2.n_positions(), "seq_len", config.seq_len());
  compare("n_embd", gpt2.n_embd(), "d_model", config.d_model());
  compare("n_layer", gpt2.n_layer(), "n_layers", config.n_layers());
  compare("n_head", gpt2.n_head(), "n_heads", config.n_heads());
  if (differences.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("config.json differs from this run: ", absl::StrJoin(differences, "; "),
                   " (set the flags to the model's sizes)"));
}

}  // namespace

absl::StatusOr<hf::OurParameters> ReadInitFrom(const std::string& path, const TrainConfig& config) {
  const auto invalid = [&path](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--init_from=", path, ": ", why));
  };
  if (!PathExists(path)) return invalid("no such file or directory");
  std::string model_path = path;
  std::string config_path;
  if (absl::EndsWith(path, ".safetensors")) {
    if (PathExists(DirectoryOf(path) + "/config.json")) {
      config_path = DirectoryOf(path) + "/config.json";
    }
  } else {
    model_path = path + "/model.safetensors";
    config_path = path + "/config.json";
    if (!PathExists(config_path)) {
      return invalid(
          "no config.json there (a directory needs model.safetensors and "
          "config.json; or name the .safetensors file itself)");
    }
  }
  if (!PathExists(model_path)) return invalid(absl::StrCat(model_path, " does not exist"));
  if (!config_path.empty()) {
    hf::Gpt2Config gpt2;
    absl::StatusOr<std::string> text = ReadFileToString(config_path);
    if (!text.ok()) return invalid(text.status().message());
    if (absl::Status parsed = FromJsonIgnoringUnknownFields(*text, &gpt2); !parsed.ok()) {
      return invalid(absl::StrCat(config_path, ": ", parsed.message()));
    }
    if (absl::Status ours = hf::CheckGpt2Config(gpt2, config_path); !ours.ok()) {
      return invalid(ours.message());
    }
    if (absl::Status sizes = CheckSizes(gpt2, config); !sizes.ok()) {
      return invalid(absl::StrCat(config_path, ": ", sizes.message()));
    }
  }
  absl::StatusOr<hf::SafetensorsFile> file = hf::ReadSafetensors(model_path);
  if (!file.ok()) return invalid(file.status().message());
  const hf::Gpt2Shape shape = {config.vocab_size(), config.seq_len(), config.d_model(),
                               config.n_layers(), config.n_heads()};
  absl::StatusOr<hf::OurParameters> parameters =
      hf::DecodeGpt2Safetensors(*file, shape, model_path);
  if (!parameters.ok()) return invalid(parameters.status().message());
  return parameters;
}

absl::Status InitializeParameters(const hf::OurParameters& parameters, Strategy& strategy) {
  std::map<std::string, at::Tensor> flat;  // by "model/<name>"
  for (const auto& [name, tensor] : parameters) {
    flat.emplace(absl::StrCat(kModelPrefix, name), tensor.reshape({-1}));
  }
  int64_t written = 0;
  for (StatePiece& piece : strategy.CheckpointPiecesToLoad()) {
    if (!absl::StartsWith(piece.name, kModelPrefix)) continue;  // optimizer: as Setup made it
    auto found = flat.find(piece.name);
    CHECK(found != flat.end()) << piece.name << " is not a GPT-2 parameter";
    const int64_t length = piece.values.numel();
    CHECK_LE(piece.offset + length, found->second.numel()) << piece.name;
    piece.values.copy_(found->second.slice(0, piece.offset, piece.offset + length));
    written += length;
  }
  CHECK_GT(written, 0) << strategy.name() << " holds no model piece";
  return strategy.FinishCheckpointLoad();
}

namespace {

class InitFromComponent : public RunComponent {
 public:
  explicit InitFromComponent(const hf::OurParameters* parameters) : parameters_(parameters) {}
  absl::Status OnRunStart(RunState& state) override {
    if (!state.resumed_from.empty()) {
      if (state.rank.rank == 0) {
        LOG(INFO) << "--init_from: not applied: the run resumed from " << state.resumed_from;
      }
      return absl::OkStatus();
    }
    return InitializeParameters(*parameters_, *state.strategy);
  }

 private:
  const hf::OurParameters* parameters_;
};

}  // namespace

std::unique_ptr<RunComponent> MakeInitFromComponent(const hf::OurParameters* parameters) {
  return std::make_unique<InitFromComponent>(parameters);
}

}  // namespace mtb
