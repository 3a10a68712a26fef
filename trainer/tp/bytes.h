// The closed form of the bytes a rank sends on its tensor-parallel group in
// one optimizer step (docs/tp.md "Bytes"), checked against the collective
// layer's count (StepRecord.tp_bytes_sent vs expected_tp_bytes). Torch-free.
//
// Per micro-batch of b samples, A = b * T * D * 4 bytes (an fp32 activation),
// N = b * T rows, L blocks, over the n ranks of the group, with the traffic.h
// byte model (AR all-reduce 2(n-1)/n S, AG all-gather and RS reduce-scatter
// (n-1)/n S):
//
//   without SP  forward  AR(A) embedding + 2L AR(A) (attention and MLP g)
//                        + 3 AR(4N) (the vocab-parallel softmax: max, target
//                        logit, sum of exponentials)
//               backward 2L AR(A) (the blocks' f) + AR(A) (the head's f)
//   with SP     forward  AR(A) embedding + 2L (AG(A) + RS(A)) + AG(A) head
//                        + 3 AR(4N)
//               backward 2L (AG(A) + RS(A)) + RS(A) head + AG(A) embedding
//                        + 6L AR(4D) + 2 AR(4D) (the sequence-shared
//                        LayerNorm parameters and row-parallel biases)
//   activation checkpointing adds each block's forward collectives again.
//
// Per step: --grad_accum micro-batches, plus AR(8), the norm's sum of
// squares.
//
// Under bf16 autocast the row-parallel outputs are bf16. The collective
// layer carries a bf16 reduction as fp32 (common/collective/tensor_checks.h
// ForReduction) and counts those bytes, so every all-reduce and
// reduce-scatter above keeps its fp32 size; a copy moves 2-byte elements,
// and the one bf16 copy is, with SP, the backward all-gather of a
// row-parallel output's gradient: 2L AG(A/2) instead of 2L AG(A). Without
// SP the bytes are fp32's.
#ifndef MTB_TRAINER_TP_BYTES_H_
#define MTB_TRAINER_TP_BYTES_H_

#include <cstdint>

#include "trainer/train_result.pb.h"

namespace mtb::tp {

// 0 when --tp is 1.
int64_t ExpectedTensorParallelStepBytes(const TrainConfig& config);

// One pipeline stage's share under --pp x --tp (docs/pipeline.md): its
// `blocks` blocks, the embedding's collectives when `embed` (the first
// stage), the head's and the loss's when `head` (the last), for each of
// `micro_batches` micro-batches of --batch_size / micro_batches samples.
// No AR(8): the pipelined step sums the norm over the world, not the tp
// group. 0 when --tp is 1.
int64_t ExpectedStageTensorParallelStepBytes(const TrainConfig& config,
                                             int64_t blocks, bool embed,
                                             bool head, int micro_batches);

}  // namespace mtb::tp

#endif  // MTB_TRAINER_TP_BYTES_H_
