// gemm_benchmark: GFLOP/s of every GEMM library (common/libtorch/
// matmul_peak.h) at the DDP benchmark models' forward shapes and 1024³, on
// --threads intra-op threads (default 1, as each trainer rank runs). Not a
// test: prints a Markdown table and the load average, which says whether
// the figures are noisy.
//   bazel run --config=bench //common/gemm:gemm_benchmark -- --threads=1
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "ATen/Parallel.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "common/base/flags.h"
#include "common/libtorch/matmul_peak.h"

ABSL_FLAG(int32_t, threads, 1, "intra-op threads (oneDNN and OpenBLAS)");
ABSL_FLAG(int32_t, repeats, 10, "timed runs per product; the best counts");

int main(int argc, char** argv) {
  mtb::ParseCommandLineOrExit(argc, argv,
                              "GFLOP/s of every GEMM library at the model's "
                              "shapes: gemm_benchmark [--threads=1]");
  at::set_num_threads(absl::GetFlag(FLAGS_threads));
  // The DDP benchmark's models (trainer/bench/ddp_bench.py), batch 8.
  struct Model {
    const char* name;
    int64_t tokens, d_model, vocab;
  };
  std::vector<mtb::GemmShape> shapes;
  for (const Model& model : {Model{"tiny", 8 * 64, 128, 512}, Model{"small", 8 * 128, 256, 4096}}) {
    for (const mtb::GemmShape& shape :
         mtb::ModelGemmShapes(model.tokens, model.d_model, model.vocab)) {
      if (shape.m != 1024 || shape.k != 1024) shapes.push_back(shape);
    }
  }
  shapes.push_back({1024, 1024, 1024});
  std::cout << "| library | precision | M x N x K | GFLOP/s |\n"
               "| --- | --- | --- | ---: |\n";
  for (const char* precision : {"fp32", "bf16"}) {
    for (const mtb::GemmSpeed& speed :
         mtb::MeasureGemms(precision, shapes, absl::GetFlag(FLAGS_repeats))) {
      std::cout << absl::StrFormat("| %s | %s | %dx%dx%d | %.1f |\n", speed.library,
                                   speed.precision, speed.shape.m, speed.shape.n, speed.shape.k,
                                   speed.flops_per_second / 1e9);
    }
  }
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::cout << absl::StrFormat("\n%d intra-op thread(s); load average %.2f %.2f %.2f%s\n",
                               absl::GetFlag(FLAGS_threads), load[0], load[1], load[2],
                               load[0] >= 1 ? " (noisy: the machine is busy)" : "");
  return 0;
}
