// The Gloo backend: //common/collective's Communicator (c10d ProcessGroupGloo with
// Gloo's gaps filled) on host buffers. LibTorch stays in gloo_backend.cc.
//
// How the calls map (docs/comm_bench.md has the table):
//  - Every call is blocking (the Communicator's call + Wait), so a
//    back-to-back loop runs one collective at a time, as on one CUDA stream;
//    Synchronize() has nothing left to wait for.
//  - Gloo's all_reduce and broadcast work in place only: out of place, the
//    backend first copies send into recv (memcpy, inside the timed call) and
//    the algorithm reads "copy+gloo_allreduce".
//  - bfloat16 is emulated by the Communicator (reductions in fp32, copies as
//    16-bit bits); rows say so.
#ifndef MTB_COMM_BENCH_GLOO_BACKEND_H_
#define MTB_COMM_BENCH_GLOO_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "comm_bench/backend.h"

namespace mtb::collective {
class Communicator;
}  // namespace mtb::collective

namespace mtb::comm_bench {

// Everything comm_bench sweeps runs on Gloo; bfloat16 is emulated.
absl::StatusOr<Support> GlooSupports(OpKind op, DType dtype, RedOp redop);

// A backend over `communicator`, which must outlive it.
std::unique_ptr<Backend> NewGlooBackend(collective::Communicator& communicator);

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_GLOO_BACKEND_H_
