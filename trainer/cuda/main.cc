// trainer_cuda: trains the GPT on one NVIDIA GPU without LibTorch, taking the
// trainer's flags (`trainer --device=cuda` hands its command line here) and
// writing the same TrainResult JSON. Flags the CUDA path does not implement
// are refused (trainer/config/device.h, run.h), as is a machine without a usable GPU:
// one line naming why, exit 2, before anything runs.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/base/flags.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/results/cuda_info.h"
#include "common/results/output_path.h"
#include "common/results/run_context.h"
#include "trainer/checkpoint/plan.h"
#include "trainer/config/config.h"
#include "trainer/cuda/gpt_cuda.h"
#include "trainer/cuda/nccl_collectives.h"
#include "trainer/cuda/peak.h"
#include "trainer/cuda/run.h"
#include "trainer/config/device.h"
#include "trainer/config/flags.h"
#include "trainer/output/output.h"
#include "trainer/data/samples.h"
#include "trainer/strategy/registry.h"

ABSL_FLAG(std::string, device, "cuda", "cuda: the only device of this binary");
ABSL_FLAG(int, nproc, 1,
          "GPUs of this machine, a rank thread each (ddp or zero1 over NCCL)");
ABSL_FLAG(std::string, out, "",
          "result JSON path (default results/trainer_cuda_<UTC time>.json in "
          "your checkout); the .md and .svg go beside it");
ABSL_FLAG(bool, markdown, true,
          "also write a Markdown summary and a loss-curve SVG beside --out");

namespace {

constexpr char kProgram[] = "trainer_cuda";
constexpr char kUsage[] =
    "trains the GPT on NVIDIA GPUs (fp32 or bf16, no LibTorch; ddp or zero1 over "
    "NCCL, a rank thread per GPU) with the trainer's flags.\n"
    "  trainer_cuda --strategy=single --data=synthetic --steps=20";

// The device model on device 0; with `watch`, the allocator watched around
// its steps (peak.h).
mtb::cuda::GptCudaFactory DeviceFactory(const mtb::cuda::AdamWSettings& adamw,
                                        mtb::cuda::AllocationStats* watch = nullptr) {
  return [adamw, watch](const mtb::cuda::GptDims& dims,
                        const mtb::cuda::ParameterLayout& layout,
                        const float* parameters, std::string* error) {
    std::vector<mtb::cuda::DeviceTensor> tensors;
    for (const mtb::cuda::TensorSlot& slot : layout.tensors()) {
      tensors.push_back({slot.offset, slot.numel, slot.weight_decay});
    }
    std::unique_ptr<mtb::cuda::GptCuda> model = mtb::cuda::CreateGptCuda(
        dims, tensors, parameters, layout.total(), adamw, error);
    if (model == nullptr || watch == nullptr) return model;
    return std::unique_ptr<mtb::cuda::GptCuda>(std::make_unique<mtb::cuda::AllocationWatch>(
        std::move(model), mtb::cuda::DeviceFreeBytes, watch));
  };
}

// Without --peak_flops: the GEMM peak in the run's precision, measured now
// (peak.h), as the CPU trainer measures its own.
constexpr int kPeakRepeats = 5;
constexpr int kPeakCalls = 10;

// ddp or zero1 on GPUs 0..n-1 of this machine: a rank thread each, its
// gradient's buckets over NCCL from backward on (run.h, CudaRanks).
// Rank 0's result; the first failure of any rank otherwise.
absl::StatusOr<mtb::TrainResult> RunOnGpus(int n, const mtb::TrainConfig& config,
                                           const mtb::SampleSource& samples,
                                           const mtb::cuda::DeviceInfo& device,
                                           const mtb::cuda::GptCudaFactory& factory,
                                           const mtb::checkpoint::CheckpointPlan& plan) {
  std::string error;
  std::vector<std::unique_ptr<mtb::SyncCollectives>> collectives =
      mtb::cuda::MakeNcclCollectives(n, &error);
  if (collectives.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("--nproc=", n, ": ", error));
  }
  mtb::cuda::ThreadAverage losses(n);
  mtb::cuda::ThreadExchange exchange(n);
  std::vector<absl::StatusOr<mtb::TrainResult>> results(
      n, absl::UnknownError("the rank did not run"));
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < n; ++rank) {
    ranks.emplace_back([&, rank] {
      if (const std::string why = mtb::cuda::UseDevice(rank); !why.empty()) {
        results[rank] = absl::FailedPreconditionError(why);
        return;
      }
      mtb::cuda::CudaRanks place;
      place.rank = rank;
      place.world_size = n;
      place.collectives = collectives[rank].get();
      place.stream = mtb::cuda::StreamOf(collectives[rank].get());
      place.average_loss = [&losses, rank](double loss) { return losses.Average(rank, loss); };
      place.sum_over_ranks = [&losses, rank](double value) { return losses.Sum(rank, value); };
      place.exchange = exchange.For(rank);
      results[rank] =
          mtb::cuda::RunCudaTraining(config, samples, device, factory, plan, place);
    });
  }
  for (std::thread& rank : ranks) rank.join();
  for (int rank = 0; rank < n; ++rank) {
    if (!results[rank].ok()) {
      return mtb::Annotate(results[rank].status(), absl::StrCat("rank ", rank));
    }
  }
  return std::move(results[0]);
}

int Refuse(const absl::Status& status) {
  return mtb::ReportAndExitCode(kProgram, status);
}

}  // namespace

int main(int argc, char** argv) {
  mtb::InitLogging(argv[0]);
  mtb::ParseCommandLineOrExit(argc, argv, kUsage);
  if (absl::Status flags = mtb::CheckCudaFlags(argc, argv); !flags.ok()) {
    return Refuse(flags);
  }
  if (absl::GetFlag(FLAGS_device) != "cuda") {
    return Refuse(absl::InvalidArgumentError(absl::StrCat(
        "--device=", absl::GetFlag(FLAGS_device),
        ": this binary trains on cuda only (the trainer runs --device=cpu)")));
  }
  // Started by a launcher as one rank of several (torchrun's LOCAL_RANK):
  // one process per GPU is not written yet; --nproc=N runs a rank thread per
  // GPU in this process.
  if (const char* local_rank = std::getenv("LOCAL_RANK"); local_rank != nullptr) {
    return Refuse(absl::InvalidArgumentError(absl::StrCat(
        "LOCAL_RANK=", local_rank,
        ": trainer_cuda does not run as one process per GPU yet; start it once "
        "with --nproc=N (a rank thread per GPU)")));
  }
  const int nproc = absl::GetFlag(FLAGS_nproc);
  if (nproc < 1) {
    return Refuse(absl::InvalidArgumentError(
        absl::StrCat("--nproc=", nproc, " must be at least 1")));
  }
  absl::StatusOr<mtb::TrainConfig> from_flags = mtb::TrainConfigFromFlags();
  if (!from_flags.ok()) return Refuse(from_flags.status());
  mtb::TrainConfig config = *std::move(from_flags);
  // One GPU: an unset --strategy means single, not the CPU trainer's ddp.
  if (!mtb::FlagWasSet("strategy") && nproc == 1) {
    config.set_strategy(mtb::TrainConfig::single);
  }
  std::vector<std::string> notes = mtb::FitDefaultWarmupsToSteps(
      &config, mtb::WarmupsGivenOnCommandLine());
  mtb::ResolveConfig(&config, /*ranks_per_host=*/nproc);
  const mtb::checkpoint::CheckpointOptions checkpoint_options =
      mtb::CheckpointOptionsFromFlags();
  for (const absl::Status& status :
       {mtb::ValidateConfig(config, mtb::ScopedFlagsOnCommandLine()),
        mtb::ValidateConfigForWorldSize(config, nproc),
        mtb::cuda::CheckCudaConfig(config, nproc)}) {
    if (!status.ok()) return Refuse(status);
  }
  // Checkpoints, planned before anything runs as the CPU trainer plans them
  // (one rank): flags, the directory, the checkpoint a resume starts from.
  if (absl::Status valid =
          mtb::checkpoint::ValidateCheckpointOptions(checkpoint_options, config);
      !valid.ok()) {
    return Refuse(valid);
  }
  absl::StatusOr<mtb::checkpoint::CheckpointPlan> checkpoint_plan =
      mtb::checkpoint::PlanCheckpoints(checkpoint_options, &config, nproc, mtb::FlagWasSet);
  if (!checkpoint_plan.ok()) return Refuse(checkpoint_plan.status());
  // A resume may take the schedule from its checkpoint: checked again.
  for (const absl::Status& status :
       {mtb::ValidateConfig(config, mtb::ScopedFlagsOnCommandLine()),
        mtb::cuda::CheckCudaConfig(config, nproc)}) {
    if (!status.ok()) return Refuse(status);
  }
  notes.insert(notes.end(), checkpoint_plan->notes.begin(), checkpoint_plan->notes.end());
  std::string out = mtb::ResolveUserPath(absl::GetFlag(FLAGS_out));
  if (absl::Status writable = mtb::CheckOutputWritable("out", out); !writable.ok()) {
    return Refuse(writable);
  }
  absl::StatusOr<std::unique_ptr<mtb::SampleSource>> samples =
      mtb::OpenSamplesFor(config);
  if (!samples.ok()) {
    std::cerr << kProgram << ": --data: " << samples.status().message() << "\n";
    return mtb::kExitUsage;
  }
  mtb::cuda::DeviceInfo device;
  if (const std::string why = mtb::cuda::ProbeDevice(&device); !why.empty()) {
    std::cerr << kProgram << ": --device=cuda: no usable GPU: " << why << "\n";
    return mtb::kExitUsage;
  }

  // Notes on the resolved config, once the run is going to happen (a refusal
  // stays one line).
  for (const std::string& note : notes) std::cerr << kProgram << ": " << note << "\n";
  mtb::cuda::AdamWSettings adamw;
  adamw.beta1 = config.beta1();
  adamw.beta2 = config.beta2();
  adamw.eps = config.eps();
  adamw.weight_decay = config.weight_decay();
  const bool bf16 = config.precision() == mtb::TrainConfig::bf16;
  std::vector<mtb::cuda::GemmTiming> peak;
  if (config.peak_flops() <= 0) {
    if (const std::string why = mtb::cuda::MeasureGemmPeak(
            bf16, mtb::cuda::PeakShapes(), kPeakRepeats, kPeakCalls, &peak);
        !why.empty()) {
      std::cerr << kProgram << ": measuring the GEMM peak: " << why << "\n";
      return mtb::kExitFailure;
    }
  }
  // ddp and zero1 run over NCCL at any world size, one GPU included (their
  // sync path at world size 1); single on one GPU alone. On one GPU the
  // device's allocations after step 1 are watched either way.
  absl::StatusOr<mtb::cuda::CudaSync> sync = mtb::cuda::CudaSyncOf(config);
  if (!sync.ok()) return Refuse(sync.status());
  const bool synchronised = *sync != mtb::cuda::CudaSync::kNone;
  mtb::cuda::AllocationStats allocations;
  mtb::cuda::AllocationStats* watch = nproc == 1 ? &allocations : nullptr;
  absl::StatusOr<mtb::TrainResult> result =
      !synchronised ? mtb::cuda::RunCudaTraining(config, **samples, device,
                                                 DeviceFactory(adamw, watch), *checkpoint_plan)
                    : RunOnGpus(nproc, config, **samples, device, DeviceFactory(adamw, watch),
                                *checkpoint_plan);
  if (!result.ok()) return Refuse(result.status());
  if (!peak.empty()) {
    mtb::cuda::ApplyMeasuredPeak(peak, bf16, kPeakRepeats, kPeakCalls, nproc, &*result);
  }
  mtb::RunContext* context = result->mutable_run_context();
  *context = mtb::NewRunContext(kProgram, argc, argv);
  mtb::FillCudaInfo(context);
  context->set_world_size(nproc);
  context->set_backend(synchronised ? "nccl" : "none");
  mtb::FinishRunContext(context);
  if (out.empty()) out = mtb::DefaultResultPath(kProgram, "json");
  absl::StatusOr<std::vector<std::string>> written =
      mtb::WriteTrainOutputs(*result, out, absl::GetFlag(FLAGS_markdown));
  if (!written.ok()) return Refuse(written.status());
  std::cout << mtb::RenderSummaryTable(*result);
  if (nproc == 1) std::cout << mtb::cuda::AllocationLine(allocations) << "\n";
  std::cout << "result: " << out << "\n";
  for (const std::string& line : *written) std::cout << line << "\n";
  return mtb::kExitOk;
}
