// Megatron-LM's tensor- and sequence-parallel communication as autograd
// functions, plus the vocabulary-parallel embedding and cross-entropy: the
// pieces that turn the functional layers of common/nn into their sharded
// versions (Shoeybi et al. 2019, "Megatron-LM", §3; Korthikanti et al. 2022,
// "Reducing Activation Recomputation", §4.2). tp_check proves each against the
// unsharded layer; the trainer can build tensor parallelism from them.
//
// Vocabulary. n = comm->world_size() ranks form one tensor-parallel group;
// r = comm->rank(). A *region* is the part of a layer where each rank holds a
// different shard. Entering and leaving a region are conjugate pairs: what one
// does in forward, the other does in backward.
//
//   function                           forward              backward
//   CopyToTensorParallelRegion (f)     identity             all-reduce
//   ReduceFromTensorParallelRegion (g) all-reduce           identity
//   GatherFromTensorParallelRegion     all-gather, last dim split, last dim
//   ScatterToTensorParallelRegion      split, last dim      all-gather, last dim
//   GatherFromSequenceParallelRegion   all-gather, dim d    reduce-scatter, dim d
//   ScatterToSequenceParallelRegion    split, dim d         all-gather, dim d
//   ReduceScatterToSequenceParallel... reduce-scatter, d    all-gather, dim d
//
// Rank r's shard along a dimension of global size S is the r-th of n equal
// contiguous blocks, [r*S/n, (r+1)*S/n); n must divide S (the caller checks,
// before any communication). All reductions are sums.
//
// Collective contract: every rank of `comm` must call these functions, and run
// the backward passes that go through them, in the same order with the same
// shapes (Communicator's ordering contract); n = 1 still issues every
// collective, so its records look like any other world size's. A failed
// collective throws std::runtime_error carrying the communicator's message
// (which names the collective, its sequence number, the rank and any timeout):
// autograd can only throw, so callers wrap forward and backward in CallGuarded
// (common/libtorch/torch_status.h) to get the Status back. `comm` must outlive the
// autograd graph.
//
// Tensors are float CPU tensors; inputs need not be contiguous.
#ifndef MTB_COMMON_NN_TENSOR_PARALLEL_H_
#define MTB_COMMON_NN_TENSOR_PARALLEL_H_

#include <cstdint>
#include <functional>

#include "ATen/core/Tensor.h"
#include "common/collective/communicator.h"

namespace mtb {
namespace nn {

// f: the input of a column-parallel layer. x: any shape, replicated.
at::Tensor CopyToTensorParallelRegion(const at::Tensor& x,
                                      collective::Communicator* comm);

// g: the partial sums of a row-parallel layer, summed over ranks. x: any
// shape, same on every rank.
at::Tensor ReduceFromTensorParallelRegion(const at::Tensor& x,
                                          collective::Communicator* comm);

// x: (..., k) -> (..., n*k); rank p's x fills columns [p*k, (p+1)*k).
at::Tensor GatherFromTensorParallelRegion(const at::Tensor& x,
                                          collective::Communicator* comm);

// x: (..., n*k) -> (..., k): this rank's block of the last dimension.
at::Tensor ScatterToTensorParallelRegion(const at::Tensor& x,
                                         collective::Communicator* comm);

// Sequence parallelism along `dim` (the sequence dimension).
// x: (..., k, ...) -> (..., n*k, ...): every rank's shard, in rank order.
at::Tensor GatherFromSequenceParallelRegion(const at::Tensor& x, int64_t dim,
                                            collective::Communicator* comm);

// x: (..., n*k, ...), the same on every rank -> (..., k, ...): this rank's
// block along `dim`; backward all-gathers the gradient (Megatron's
// scatter_to_sequence_parallel_region: entering the sequence-parallel
// region from a replicated tensor).
at::Tensor ScatterToSequenceParallelRegion(const at::Tensor& x, int64_t dim,
                                           collective::Communicator* comm);

// x: (..., n*k, ...), a partial sum on every rank -> (..., k, ...): this
// rank's block of the sum over ranks.
at::Tensor ReduceScatterToSequenceParallelRegion(const at::Tensor& x,
                                                 int64_t dim,
                                                 collective::Communicator* comm);

// The non-differentiable collectives the functions above are made of, for
// code that reduces gradients by hand (e.g. sequence-parallel LayerNorm
// parameters). Same contract and errors.
//
// A new tensor: the sum of x over ranks.
at::Tensor AllReduceSum(const at::Tensor& x, collective::Communicator* comm);
// x: (..., k, ...) -> (..., n*k, ...) along `dim`.
at::Tensor AllGatherAlongDim(const at::Tensor& x, int64_t dim,
                             collective::Communicator* comm);
// x: (..., n*k, ...) -> this rank's block along `dim` of the sum over ranks.
at::Tensor ReduceScatterAlongDim(const at::Tensor& x, int64_t dim,
                                 collective::Communicator* comm);
// This rank's block of x along `dim` (no communication), contiguous.
at::Tensor ShardAlongDim(const at::Tensor& x, int64_t dim, int rank,
                         int world_size);

// --- The vocabulary split across ranks (Megatron's VocabParallelEmbedding
// and vocab-parallel cross-entropy). Rank r holds rows [r*V/n, (r+1)*V/n) of
// the (V, D) token embedding, which is also the LM head when tied.

// tokens: (...) int64 in [0, V). embedding_shard: (V/n, D), this rank's rows.
// Returns (..., D), the full lookup on every rank: each rank looks up the
// tokens it owns (zeros elsewhere) and g sums the ranks' results. One
// all-reduce of the output forward, none backward.
at::Tensor VocabParallelEmbedding(const at::Tensor& tokens,
                                  const at::Tensor& embedding_shard,
                                  collective::Communicator* comm);

// Called with every tensor of vocabulary width that VocabParallelCrossEntropy
// creates (forward and backward), so a caller can prove that no rank ever
// holds more than V/n columns of logits.
using VocabTensorObserver = std::function<void(const at::Tensor&)>;

// Cross-entropy of each row without gathering the logits.
// logits_shard: (N, V/n) float, this rank's columns of the logits.
// targets: (N) int64 in [0, V). Returns the per-row loss (N), equal on every
// rank: log(sum_v exp(logit_v)) - logit_target, computed as Megatron does with
// three all-reduces of N values forward (max, the target logit, the sum of
// exponentials) and none backward (the gradient softmax - one_hot is local to
// each rank's columns).
at::Tensor VocabParallelCrossEntropy(const at::Tensor& logits_shard,
                                     const at::Tensor& targets,
                                     collective::Communicator* comm,
                                     const VocabTensorObserver& observer = {});

}  // namespace nn
}  // namespace mtb

#endif  // MTB_COMMON_NN_TENSOR_PARALLEL_H_
