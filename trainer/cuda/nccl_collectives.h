// The sync plan's collectives over NCCL on device buffers (ddp's all-reduce,
// zero1's reduce-scatter and all-gather, uneven shards included), for
// trainer_cuda on the GPUs of one machine: one process, a rank thread per
// GPU, the communicators made together (ncclCommInitAll). Plain C++ header
// (no NCCL or CUDA types), so the run loop and main.cc need no CUDA headers.
#ifndef MTB_TRAINER_CUDA_NCCL_COLLECTIVES_H_
#define MTB_TRAINER_CUDA_NCCL_COLLECTIVES_H_

#include <memory>
#include <string>
#include <vector>

#include "trainer/cuda/bucket_sync.h"
#include "trainer/strategy/sync_plan.h"

namespace mtb {
namespace cuda {

// The collectives of ranks 0..n-1 on devices 0..n-1: rank r's must be used
// on a thread whose current device is r (UseDevice, gpt_cuda.h); each call
// runs on its own stream and returns when it is done. Empty and *error (one
// line) on failure, e.g. fewer than n devices.
std::vector<std::unique_ptr<SyncCollectives>> MakeNcclCollectives(int n, std::string* error);

// The stream the collectives of MakeNcclCollectives run on (BucketSync's
// overlap with backward: each bucket enqueued behind the model's event).
CollectiveStream* StreamOf(SyncCollectives* collectives);

}  // namespace cuda
}  // namespace mtb

#endif  // MTB_TRAINER_CUDA_NCCL_COLLECTIVES_H_
