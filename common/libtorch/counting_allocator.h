// A counting CPU allocator: LibTorch's CPU allocator wrapped so that every
// tensor storage allocated through it is counted (current and peak bytes).
// This is how the trainer reports peak memory per rank on CPU
// (docs/trainer.md); on GPU the CUDA allocator's own peak plays this role.
//
// Process-global: c10 has one CPU allocator per process, so every thread's
// tensors count together. Ranks run as threads of one process (tests) share
// the figure; per-rank numbers need one rank per process (the launcher).
// What it counts: LibTorch tensor storage on the CPU (parameters, gradients,
// optimizer state, activations, communication buffers made as tensors). Not
// counted: oneDNN/BLAS scratch space, Gloo's transport buffers and other
// memory not allocated through c10's CPU allocator.
#ifndef MTB_COMMON_LIBTORCH_COUNTING_ALLOCATOR_H_
#define MTB_COMMON_LIBTORCH_COUNTING_ALLOCATOR_H_

#include <cstdint>

namespace mtb {

// Wraps the current CPU allocator. Idempotent; call early (before the tensors
// to be counted exist), from one thread: c10::SetAllocator is not
// thread-safe. Storage allocated before the call is never counted, also not
// when it is freed.
void InstallCountingCpuAllocator();
bool CountingCpuAllocatorInstalled();

struct CpuMemoryCounts {
  // Bytes of live storage allocated since the install.
  int64_t current_bytes = 0;
  // The highest current_bytes since the install or the last ResetCpuPeak().
  int64_t peak_bytes = 0;
  // Allocations since the install.
  int64_t allocations = 0;
};

// All zero before the install. Thread-safe.
CpuMemoryCounts CpuMemory();

// Sets the peak to the current bytes (e.g. at the start of a step).
void ResetCpuPeak();

// A second peak over intervals of time, independent of CpuMemory's peak:
// returns the highest current_bytes since the previous call (since the
// install for the first) and starts the next interval at the current bytes.
// Consecutive intervals partition time, so the largest value they return is
// the peak over their union; a caller that knows what was live during each
// interval (trainer/memory/memory_peak.h) can say what was live at the peak without
// looking inside the allocation callback. 0 before the install.
// Thread-safe.
int64_t TakeCpuIntervalPeak();

}  // namespace mtb

#endif  // MTB_COMMON_LIBTORCH_COUNTING_ALLOCATOR_H_
