// doctor_gpu: the GPU side of doctor, built with --config=cuda and linked
// without LibTorch (as comm_bench_nccl), so it runs on a GPU machine that has
// only the driver, the CUDA runtime and NCCL. Prints the table, writes a
// DoctorResult JSON to --out when given, exits 1 if a check failed.
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "common/base/flags.h"
#include "common/results/cuda_info.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "common/results/run_context.h"
#include "doctor/check_table.h"
#include "doctor/gpu_checks.h"

ABSL_FLAG(std::string, out, "", "also write the DoctorResult JSON here");

int main(int argc, char** argv) {
  mtb::ParseCommandLineOrExit(
      argc, argv, "checks the CUDA driver, runtime, NCCL and visible GPUs.\n"
                  "  doctor_gpu [--out=PATH]");
  const std::string out = mtb::ResolveUserPath(absl::GetFlag(FLAGS_out));
  if (absl::Status writable = mtb::CheckOutputWritable("out", out); !writable.ok()) {
    return mtb::ReportAndExitCode("doctor_gpu", writable);
  }
  mtb::RunContext context = mtb::NewRunContext("doctor_gpu", argc, argv);
  mtb::FillCudaInfo(&context);
  mtb::doctor::DoctorResult result;
  result.set_schema_version(1);
  for (const mtb::doctor::DoctorCheck& check : mtb::doctor::GpuChecks(context)) {
    *result.add_checks() = check;
  }
  result.set_verdict(mtb::doctor::Verdict(result));
  mtb::FinishRunContext(&context);
  *result.mutable_run_context() = context;
  std::cout << mtb::doctor::RenderTable(result) << "\nverdict: " << result.verdict() << "\n";
  if (!out.empty()) {
    if (absl::Status written = mtb::WriteJsonFile(result, out); !written.ok()) {
      return mtb::ReportAndExitCode("doctor_gpu", written);
    }
    std::cout << "result: " << out << "\n";
  }
  return result.verdict() == "pass" ? 0 : 1;
}
