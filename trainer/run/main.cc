// trainer: trains the GPT (docs/trainer.md) with a distribution strategy (ddp by
// default) on --nproc ranks (default 2), and writes a TrainResult JSON, a
// Markdown summary and a loss curve. Every flag is validated here, before the
// launcher starts any rank; each rank then runs RunWorker (trainer/run/worker.h).
#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/base/flags.h"
#include "common/faults/fault_spec.h"
#include "common/launch/launch.h"
#include "common/launch/launch_options.h"
#include "common/base/logging.h"
#include "common/collective/transport_flag.h"
#include "common/results/output_path.h"
#include "common/launch/rank_env.h"
#include "common/launch/timeouts.h"
#include "common/trace/window.h"
#include "glog/logging.h"
#include "trainer/config/config.h"
#include "trainer/data/data.h"
#include "trainer/config/device.h"
#include "trainer/config/flags.h"
#include "trainer/model/init_from.h"
#include "trainer/memory/memory_estimate.h"
#include "trainer/strategy/sync_fault.h"
#include "trainer/strategy/registry.h"
#include "trainer/tp/options.h"
#include "trainer/run/worker.h"

ABSL_FLAG(std::string, out, "",
          "result JSON path (default results/trainer_<UTC time>.json in your "
          "checkout); the .md and .svg go beside it");
ABSL_FLAG(bool, markdown, true,
          "also write a Markdown summary and a loss-curve SVG beside --out");
ABSL_FLAG(std::string, fault, "",
          "inject faults (docs/faults.md): kill:rank=R,step=S,phase=P; "
          "nan:rank=R,step=S; hang:rank=R,step=S[,phase=P]; "
          "slow:rank=R,ms=M[,every=K]; exit:rank=R,step=S,code=C; "
          "several separated by ';'");
ABSL_FLAG(std::string, trace_dir, "",
          "each rank writes a Chrome trace-event file DIR/rank_<r>.trace.json "
          "(Perfetto, chrome://tracing; bazel run //profiler_agg -- DIR): step, "
          "data, forward, backward, optimizer and every collective");
ABSL_FLAG(std::string, trace_steps, "",
          "A:B: trace only steps A..B of the first run (default: all)");
ABSL_FLAG(std::string, dump_parameters, "",
          "test aid: every rank writes its final parameters as raw fp32 to "
          "DIR/rank_<r>.f32, rank 0 a DIR/manifest.txt");

ABSL_FLAG(std::string, init_from, "",
          "start from a GPT-2-layout safetensors model instead of the seeded "
          "initialisation: DIR (model.safetensors + config.json, as ckpt_tool export "
          "--format=safetensors writes) or FILE.safetensors; names, shapes, orientation "
          "and config are checked before any rank starts");
ABSL_FLAG(std::string, metrics_jsonl, "",
          "append one JSON line per step to FILE as the run goes (step, loss, lr, "
          "tokens/s, grad norm, comm wait, memory): for tail -f, jq, pandas");

ABSL_FLAG(std::string, testonly_tp_fault, "",
          "testing only: break a tensor-parallel piece on purpose to prove "
          "that tests catch it: row_parallel_unreduced, layernorm_unsynced "
          "(--sequence_parallel), norm_double_counted, "
          "replicated_dropout_per_rank, sharded_dropout_shared (--dropout > 0; "
          "docs/tp.md)");
ABSL_FLAG(bool, testonly_pp_resume_without_step, false,
          "testing only, with --pp > 1: a resume leaves AdamW's step count "
          "unloaded on the stages after the first (the checkpoint holds it "
          "once, from stage 0), to prove that restart tests catch it");
ABSL_FLAG(std::string, device, "cpu",
          "cpu (LibTorch, this binary) or cuda: hand the run to trainer_cuda "
          "(one NVIDIA GPU, fp32; it refuses the flags it does not implement; "
          "docs/gpu.md)");

ABSL_FLAG(bool, estimate_memory, false,
          "print every strategy's closed-form memory per rank for this model, "
          "batch and world size (--nproc), and exit without training");

ABSL_FLAG(std::string, testonly_sync_fault, "",
          "testing only: break the gradient synchronisation or a memory bound "
          "on purpose to prove that tests catch it: sum_not_average or "
          "bucket_never_synced:B (ddp, zero1, zero2), parameter_unreduced:NAME "
          "(ddp), keep_full_gradients (zero2), keep_gathered_units (fsdp)");

namespace {

constexpr char kUsage[] =
    "trains a GPT decoder on --nproc ranks and reports loss, throughput,\n"
    "communication and memory.\n"
    "  bazel run //trainer                      # the default job: 2 ranks, "
    "ddp, shipped corpus\n"
    "  bazel run //trainer -- --nproc=4 --data=synthetic --precision=bf16";

constexpr char kProgram[] = "trainer";
// The launcher's validated config fingerprint, for its ranks.
constexpr char kValidatedFingerprintEnv[] = "MTB_TRAINER_VALIDATED_CONFIG";

}  // namespace

int main(int argc, char** argv) {
  mtb::InitLogging(argv[0]);
  mtb::ParseCommandLineOrExit(argc, argv, kUsage);
  if (const std::string device = absl::GetFlag(FLAGS_device); device == "cuda") {
    return mtb::HandOffToCudaTrainer(argc, argv);
  } else if (device != "cpu") {
    return mtb::ReportAndExitCode(
        kProgram, absl::InvalidArgumentError(absl::StrCat(
                      "--device=", device, " is not one of cpu, cuda")));
  }

  // Two ranks unless told otherwise; the ranks report heartbeats. A run
  // that saves checkpoints from step 0 restarts (--max_restarts) from its
  // newest one: --resume=latest (none yet: from step 0 again). A run
  // resumed from a PATH restarts from that PATH; one started with
  // --overwrite_checkpoints restarts as it started (docs/checkpoint.md).
  mtb::LaunchDefaults launch_defaults;
  launch_defaults.nproc = 2;
  launch_defaults.reports_heartbeats = true;
  if (const mtb::checkpoint::CheckpointOptions saving = mtb::CheckpointOptionsFromFlags();
      !saving.dir.empty() && saving.resume.empty() && !saving.overwrite) {
    launch_defaults.restart_args = {"--resume=latest"};
  }
  absl::StatusOr<mtb::PlannedWorld> world =
      mtb::PlanWorld(mtb::ProcessEnvironment(), launch_defaults);
  if (!world.ok()) return mtb::ReportAndExitCode(kProgram, world.status());
  const mtb::TimeoutOptions timeouts = mtb::TimeoutOptionsFromFlags();
  if (absl::Status valid = mtb::ValidateTimeoutOptions(timeouts); !valid.ok()) {
    return mtb::ReportAndExitCode(kProgram, valid);
  }
  if (absl::Status tp = mtb::TensorParallelFlagError(); !tp.ok()) {
    return mtb::ReportAndExitCode(kProgram, tp);
  }
  if (absl::Status valid = mtb::ValidatePipelineFlags(); !valid.ok()) {
    return mtb::ReportAndExitCode(kProgram, valid);
  }
  absl::StatusOr<mtb::TrainConfig> from_flags = mtb::TrainConfigFromFlags();
  if (!from_flags.ok()) {
    return mtb::ReportAndExitCode(kProgram, from_flags.status());
  }
  mtb::TrainConfig config = *std::move(from_flags);
  std::vector<std::string> notes = mtb::FitDefaultWarmupsToSteps(
      &config, mtb::WarmupsGivenOnCommandLine());
  mtb::ResolveConfig(&config, world->ranks_per_host);
  // One validation pass: the launcher validates and hands its ranks the
  // config's fingerprint; a rank whose config has the same fingerprint
  // trusts it instead of validating again.
  const std::string fingerprint = mtb::ConfigFingerprint(config);
  const char* launcher_fingerprint = std::getenv(kValidatedFingerprintEnv);
  const bool validated = launcher_fingerprint != nullptr &&
                         fingerprint == launcher_fingerprint;
  for (const absl::Status& status :
       {validated ? absl::OkStatus()
                  : mtb::ValidateConfig(config,
                                        mtb::ScopedFlagsOnCommandLine()),
        validated ? absl::OkStatus()
                  : mtb::ValidateConfigForWorldSize(config,
                                                    world->world_size)}) {
    if (!status.ok()) return mtb::ReportAndExitCode(kProgram, status);
  }
  if (absl::GetFlag(FLAGS_estimate_memory)) {
    // Each strategy resolves --grad_sync=auto its own way (zero2: every).
    mtb::TrainConfig unresolved_sync = config;
    unresolved_sync.set_grad_sync(mtb::TrainConfigFromFlags()->grad_sync());
    std::cout << mtb::RenderMemoryEstimates(unresolved_sync,
                                            world->world_size);
    return 0;
  }
  absl::StatusOr<mtb::SyncTestFault> sync_fault =
      mtb::ParseSyncTestFault(absl::GetFlag(FLAGS_testonly_sync_fault));
  if (!sync_fault.ok()) {
    return mtb::ReportAndExitCode(kProgram, sync_fault.status());
  }
  // Under --pp the strategy runs over each stage's dp group: a fault needs one.
  if (config.pp() > 1 && mtb::FlagWasSet("testonly_sync_fault") &&
      world->world_size == config.pp() * mtb::tp::TensorParallelSize(config)) {
    return mtb::ReportAndExitCode(
        kProgram, absl::InvalidArgumentError(absl::StrCat(
                      "--testonly_sync_fault acts on the stages' data-parallel "
                      "groups: with --pp=", config.pp(), " it needs --nproc > ",
                      config.pp() * mtb::tp::TensorParallelSize(config))));
  }
  if (absl::StatusOr<mtb::StrategyKind> kind =
          mtb::ParseStrategy(mtb::ConfigName(config.strategy()));
      kind.ok()) {
    if (absl::Status applies = mtb::CheckSyncTestFaultApplies(*sync_fault, *kind);
        !applies.ok()) {
      return mtb::ReportAndExitCode(kProgram, applies);
    }
  }
  // A run the host cannot hold is refused now: Linux overcommits, so it
  // would otherwise be SIGKILLed by the kernel in the middle of a step.
  if (absl::StatusOr<mtb::HostMemory> host = mtb::ReadHostMemory();
      !validated && host.ok()) {
    std::string warning;
    if (absl::Status fits = mtb::CheckMemoryFits(
            mtb::EstimateRankMemory(config, world->world_size),
            world->ranks_per_host, *host, &warning);
        !fits.ok()) {
      return mtb::ReportAndExitCode(kProgram, fits);
    }
    if (!warning.empty()) notes.push_back(warning);
  }
  // An output that cannot be written fails now, not after the run.
  for (const auto& [flag, path] :
       {std::pair<const char*, std::string>{"out", absl::GetFlag(FLAGS_out)},
        {"dump_parameters", absl::GetFlag(FLAGS_dump_parameters)}}) {
    if (absl::Status writable =
            mtb::CheckOutputWritable(flag, mtb::ResolveUserPath(path));
        !writable.ok()) {
      return mtb::ReportAndExitCode(kProgram, writable);
    }
  }
  absl::StatusOr<mtb::tp::TestFault> tp_fault =
      mtb::tp::ParseTestFault(absl::GetFlag(FLAGS_testonly_tp_fault));
  if (!tp_fault.ok()) return mtb::ReportAndExitCode(kProgram, tp_fault.status());
  if (*tp_fault != mtb::tp::TestFault::kNone &&
      mtb::tp::TensorParallelSize(config) == 1) {
    return mtb::ReportAndExitCode(
        kProgram, absl::InvalidArgumentError(
                      "--testonly_tp_fault needs --tp > 1"));
  }
  if (absl::GetFlag(FLAGS_testonly_pp_resume_without_step) && config.pp() < 2) {
    return mtb::ReportAndExitCode(
        kProgram, absl::InvalidArgumentError(
                      "--testonly_pp_resume_without_step needs --pp > 1"));
  }
  absl::StatusOr<std::vector<mtb::Fault>> faults =
      mtb::ParseFaults(absl::GetFlag(FLAGS_fault), mtb::TrainerFaultGrammar());
  if (!faults.ok()) return mtb::ReportAndExitCode(kProgram, faults.status());
  for (const absl::Status& valid :
       {mtb::ValidateFaults(*faults, world->world_size, config.steps()),
        mtb::ValidateSlowFaults(*faults, config.steps(), timeouts.first_step_timeout,
                                timeouts.collective_timeout)}) {
    if (!valid.ok()) return mtb::ReportAndExitCode(kProgram, valid);
  }
  // Checkpoints: flags, the directory, whose checkpoints it holds, the one
  // a resume starts from and whether it fits (which may set the schedule and
  // timing warm-up to the checkpoint's): all before any rank starts.
  const mtb::checkpoint::CheckpointOptions checkpoint_options =
      mtb::CheckpointOptionsFromFlags();
  if (absl::Status valid = mtb::checkpoint::ValidateCheckpointOptions(
          checkpoint_options, config);
      !valid.ok()) {
    return mtb::ReportAndExitCode(kProgram, valid);
  }
  absl::StatusOr<mtb::checkpoint::CheckpointPlan> checkpoint_plan =
      mtb::checkpoint::PlanCheckpoints(checkpoint_options, &config,
                                       world->world_size, mtb::FlagWasSet);
  if (!checkpoint_plan.ok()) {
    return mtb::ReportAndExitCode(kProgram, checkpoint_plan.status());
  }
  // A resume may take schedule values from its checkpoint: a config the
  // plan changed is validated again.
  const bool planned_as_validated =
      validated && mtb::ConfigFingerprint(config) == fingerprint;
  for (const absl::Status& status :
       {planned_as_validated ? absl::OkStatus() : mtb::ValidateConfig(config),
        mtb::checkpoint::ValidateCheckpointFaults(*faults, *checkpoint_plan,
                                                  config.steps())}) {
    if (!status.ok()) return mtb::ReportAndExitCode(kProgram, status);
  }
  notes.insert(notes.end(), checkpoint_plan->notes.begin(),
               checkpoint_plan->notes.end());
  const absl::StatusOr<mtb::trace::TraceWindow> trace_window =
      mtb::trace::ParseTraceWindow(absl::GetFlag(FLAGS_trace_steps),
                                   absl::GetFlag(FLAGS_trace_dir), config.steps(),
                                   absl::StrCat("--steps=", config.steps()));
  if (!trace_window.ok()) return mtb::ReportAndExitCode(kProgram, trace_window.status());
  if (!absl::GetFlag(FLAGS_trace_dir).empty()) {
    if (absl::Status writable = mtb::CheckOutputWritable(
            "trace_dir",
            mtb::ResolveUserPath(absl::GetFlag(FLAGS_trace_dir)) + "/rank_0.trace.json");
        !writable.ok()) {
      return mtb::ReportAndExitCode(kProgram, writable);
    }
  }
  // A model to start from is read and checked now (names, shapes,
  // orientation, config.json against these flags).
  mtb::hf::OurParameters init_parameters;
  if (const std::string init_from = absl::GetFlag(FLAGS_init_from); !init_from.empty()) {
    if (config.repeat() > 1) {
      return mtb::ReportAndExitCode(
          kProgram, absl::InvalidArgumentError(absl::StrCat(
                        "--init_from=", init_from, " starts one run; --repeat=", config.repeat(),
                        " would start the others from the seeded initialisation")));
    }
    absl::StatusOr<mtb::hf::OurParameters> read =
        mtb::ReadInitFrom(mtb::ResolveUserPath(init_from), config);
    if (!read.ok()) return mtb::ReportAndExitCode(kProgram, read.status());
    init_parameters = *std::move(read);
  }
  const std::string metrics_jsonl = mtb::ResolveUserPath(absl::GetFlag(FLAGS_metrics_jsonl));
  if (!metrics_jsonl.empty()) {
    if (absl::Status writable = mtb::CheckOutputWritable("metrics_jsonl", metrics_jsonl);
        !writable.ok()) {
      return mtb::ReportAndExitCode(kProgram, writable);
    }
  }
  // No output may overwrite an input (the data, the resume checkpoint) or
  // another output, by any spelling, symlink or hard link.
  {
    const std::string out = mtb::ResolveUserPath(absl::GetFlag(FLAGS_out));
    std::vector<mtb::NamedPath> outputs = mtb::ResultFileSet(
        out, absl::GetFlag(FLAGS_markdown) && !out.empty()
                 ? std::vector<std::string>{"md", "svg"}
                 : std::vector<std::string>{});
    if (out.empty()) outputs.clear();
    for (std::vector<mtb::NamedPath> more :
         {mtb::RankTraceFiles(mtb::ResolveUserPath(absl::GetFlag(FLAGS_trace_dir)),
                              world->world_size),
          mtb::checkpoint::CheckpointOutputs(*checkpoint_plan)}) {
      outputs.insert(outputs.end(), more.begin(), more.end());
    }
    if (!metrics_jsonl.empty()) outputs.push_back({"--metrics_jsonl", metrics_jsonl});
    std::vector<mtb::NamedPath> inputs = mtb::checkpoint::CheckpointInputs(*checkpoint_plan);
    if (config.data() != "synthetic") {
      inputs.push_back({"--data", mtb::ResolveUserPath(config.data())});
    }
    if (const std::string init_from = absl::GetFlag(FLAGS_init_from); !init_from.empty()) {
      inputs.push_back({"--init_from", mtb::ResolveUserPath(init_from)});
    }
    if (absl::Status distinct = mtb::CheckOutputsAgainstInputs(outputs, inputs);
        !distinct.ok()) {
      return mtb::ReportAndExitCode(kProgram, distinct);
    }
  }
  // A missing or corrupt input file is a usage error: nothing starts.
  if (absl::Status data = mtb::OpenSamplesFor(config).status(); !data.ok()) {
    std::cerr << kProgram << ": --data: " << data.message() << "\n";
    return mtb::kExitUsage;
  }

  if (!validated) {
    setenv(kValidatedFingerprintEnv, fingerprint.c_str(), /*overwrite=*/1);
  } else {
    LOG(INFO) << "config fingerprint " << fingerprint.substr(0, 12)
              << " is the one the launcher validated: not validated again";
  }
  absl::StatusOr<mtb::LaunchDecision> launch =
      mtb::LaunchOrBecomeWorker(argc, argv, launch_defaults);
  if (!launch.ok()) return mtb::ReportAndExitCode(kProgram, launch.status());
  if (launch->is_launcher()) return launch->exit_code;

  mtb::WorkerOptions options;
  options.out = mtb::ResolveUserPath(absl::GetFlag(FLAGS_out));
  options.markdown = absl::GetFlag(FLAGS_markdown);
  options.dump_parameters = absl::GetFlag(FLAGS_dump_parameters);
  options.trace_dir = mtb::ResolveUserPath(absl::GetFlag(FLAGS_trace_dir));
  options.trace_first_step = trace_window->first;
  options.faults = *faults;
  options.trace_last_step = trace_window->last;
  options.sync_fault = *sync_fault;
  options.tp_fault = *tp_fault;
  options.pp_resume_without_step =
      absl::GetFlag(FLAGS_testonly_pp_resume_without_step);
  options.timeouts = timeouts;
  options.kill_grace = mtb::LaunchOptionsFromFlags(launch_defaults).kill_grace;
  options.transport = absl::GetFlag(FLAGS_transport);
  options.notes = notes;
  options.checkpoint = *std::move(checkpoint_plan);
  options.init_parameters = std::move(init_parameters);
  options.metrics_jsonl = metrics_jsonl;
  options.argc = argc;
  options.argv = argv;
  return mtb::RunWorker(config, launch->rank_env, options);
}
