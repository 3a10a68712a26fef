// The LibTorch side of provenance: versions, BLAS and threads.
#ifndef MTB_COMMON_LIBTORCH_TORCH_INFO_H_
#define MTB_COMMON_LIBTORCH_TORCH_INFO_H_

#include <string>

#include "common/results/results.pb.h"

namespace mtb {

// Sets libtorch_version, gloo_version, blas_library and the thread counts.
// Call after the tool has set its thread counts (LibTorch starts with one
// intra-op thread on this machine), so the record says what ran.
void FillTorchInfo(RunContext* context);

// The BLAS library mapped into this process, as "<description> (<path>)";
// e.g. "OpenBLAS 0.3.21 ... (/usr/lib/x86_64-linux-gnu/openblas-openmp/
// libblas.so.3)" or "reference BLAS (.../blas/libblas.so.3)".
std::string DescribeBlasLibrary();

}  // namespace mtb

#endif  // MTB_COMMON_LIBTORCH_TORCH_INFO_H_
