// --device: which machine trains. cpu runs the LibTorch trainer in this
// process; cuda hands the whole run to trainer_cuda (trainer/cuda), a binary
// without LibTorch, with the same command line. Torch-free: both binaries use
// the flag check, so a flag the CUDA path does not implement is refused by
// either (exit 2, one line), never ignored.
#ifndef MTB_TRAINER_CONFIG_DEVICE_H_
#define MTB_TRAINER_CONFIG_DEVICE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mtb {

// The flags trainer_cuda implements (without "--"). Their values may still be
// refused (trainer/cuda/run.h: fp32 only, one GPU, no dropout, ...).
const std::vector<std::string>& CudaTrainerFlags();

// The flag names on `argv` (after argv[0], up to "--"): "--name=v",
// "--name v", "--noname" as "name" where "name" is in `known_bools`, "-name".
std::vector<std::string> FlagNamesOnCommandLine(
    int argc, char** argv, const std::vector<std::string>& known_bools);

// kInvalidArgument naming the first flag on `argv` that trainer_cuda does not
// implement: "--fault is not supported with --device=cuda (the CUDA trainer
// takes --batch_size, ...)".
absl::Status CheckCudaFlags(int argc, char** argv);

// The trainer_cuda binary to hand a --device=cuda run to: $MTB_TRAINER_CUDA
// when set, else trainer_cuda in this executable's folder or its cuda/
// subfolder (bazel-bin/trainer/cuda/trainer_cuda beside bazel-bin/trainer/
// trainer). kFailedPrecondition when there is none, saying how to build one.
absl::StatusOr<std::string> FindCudaTrainer();

// --device=cuda: checks the flags, finds trainer_cuda and replaces this process
// with it (execv, same arguments). Returns only on failure: the exit code
// after printing one line "trainer: ..." (2 for a refused flag or no
// trainer_cuda, 1 when exec fails).
int HandOffToCudaTrainer(int argc, char** argv);

}  // namespace mtb

#endif  // MTB_TRAINER_CONFIG_DEVICE_H_
