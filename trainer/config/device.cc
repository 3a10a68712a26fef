#include "trainer/config/device.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/flags.h"

namespace mtb {
namespace {

constexpr char kCudaTrainerEnv[] = "MTB_TRAINER_CUDA";

// The flags trainer_cuda defines that are booleans (a --noname form).
const std::vector<std::string>& CudaBoolFlags() {
  static const auto* flags =
      new std::vector<std::string>{"markdown", "overwrite_checkpoints", "allow_data_change"};
  return *flags;
}

bool IsExecutable(const std::string& path) {
  return !path.empty() && access(path.c_str(), X_OK) == 0;
}

std::string ThisExecutableFolder() {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return "";
  std::string path(buffer, n);
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

}  // namespace

const std::vector<std::string>& CudaTrainerFlags() {
  static const auto* flags = new std::vector<std::string>{
      // Model and data.
      "vocab_size", "d_model", "n_layers", "n_heads", "seq_len", "batch_size",
      "data", "seed",
      // Values checked by trainer_cuda (fp32, one GPU, no dropout, K = 1).
      "precision", "strategy", "dropout", "grad_accum", "nproc",
      // Optimizer and schedule.
      "lr", "beta1", "beta2", "eps", "weight_decay", "lr_schedule",
      "lr_warmup_steps", "lr_decay_steps", "min_lr", "max_grad_norm",
      // Run and output.
      "steps", "timing_warmup_steps", "log_every", "peak_flops", "out",
      "markdown", "device",
      // Checkpoints (synchronous saves).
      "checkpoint_dir", "save_every", "keep_last", "resume",
      "overwrite_checkpoints", "allow_data_change", "data_fingerprint"};
  return *flags;
}

std::vector<std::string> FlagNamesOnCommandLine(
    int argc, char** argv, const std::vector<std::string>& known_bools) {
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;  // a value or an operand
    arg = arg.substr(arg[1] == '-' ? 2 : 1);
    std::string name = arg.substr(0, arg.find('='));
    if (absl::StartsWith(name, "no") &&
        std::find(known_bools.begin(), known_bools.end(), name.substr(2)) !=
            known_bools.end()) {
      name = name.substr(2);
    }
    names.push_back(name);
  }
  return names;
}

absl::Status CheckCudaFlags(int argc, char** argv) {
  const std::vector<std::string>& supported = CudaTrainerFlags();
  for (const std::string& name :
       FlagNamesOnCommandLine(argc, argv, CudaBoolFlags())) {
    if (std::find(supported.begin(), supported.end(), name) ==
        supported.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", name,
          " is not supported with --device=cuda (the CUDA trainer takes --",
          absl::StrJoin(supported, ", --"), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FindCudaTrainer() {
  if (const char* env = std::getenv(kCudaTrainerEnv);
      env != nullptr && *env != '\0') {
    if (!IsExecutable(env)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--device=cuda: ", kCudaTrainerEnv, "=", env,
          " is not an executable file"));
    }
    return std::string(env);
  }
  const std::string folder = ThisExecutableFolder();
  for (const std::string& candidate :
       {folder + "/trainer_cuda", folder + "/cuda/trainer_cuda"}) {
    if (IsExecutable(candidate)) return candidate;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "--device=cuda: this trainer was built without CUDA (no trainer_cuda "
      "beside it); build one with `./bazelw build --config=cuda //trainer "
      "//trainer/cuda:trainer_cuda` (needs /usr/local/cuda, docs/gpu.md) or "
      "set ",
      kCudaTrainerEnv, " to a trainer_cuda binary"));
}

int HandOffToCudaTrainer(int argc, char** argv) {
  constexpr char kProgram[] = "trainer";
  if (absl::Status flags = CheckCudaFlags(argc, argv); !flags.ok()) {
    return ReportAndExitCode(kProgram, flags);
  }
  absl::StatusOr<std::string> binary = FindCudaTrainer();
  if (!binary.ok()) {
    std::cerr << kProgram << ": " << binary.status().message() << "\n";
    return kExitUsage;
  }
  std::vector<char*> args(argv, argv + argc);
  args[0] = binary->data();
  args.push_back(nullptr);
  execv(binary->c_str(), args.data());
  std::cerr << kProgram << ": --device=cuda: cannot start " << *binary << ": "
            << std::strerror(errno) << "\n";
  return kExitFailure;
}

}  // namespace mtb
