// The closed forms of a training step's communication and schedule that the
// planner costs (docs/planner.md, "The model of a step"). Torch-free.
//
// Vocabulary. n is a group's size; S a collective's buffer in bytes under
// nccl-tests' convention (common/collective/traffic.h); alpha a link's
// latency per algorithm step (seconds) and beta its bus bandwidth (bytes/s).
// A ring all-reduce takes 2(n-1) steps and sends 2(n-1)/n S per rank, so it
// costs alpha 2(n-1) + 2(n-1)/n S / beta; an all-gather or reduce-scatter
// n-1 steps and (n-1)/n S; a point-to-point send one step and S. The bytes
// are the collective layer's byte model (the trainer's strategies are tested
// against the same functions), not a copy of it.
//
// Tensor and pipeline parallelism (Megatron-LM: Shoeybi et al. 2019,
// Narayanan et al. 2021, Korthikanti et al. 2022), which the trainer does
// not run yet, are costed here so that its TP/PP can share them later:
//   tp  per block and micro-batch, 2 all-reduces of B T D activations in the
//       forward and 2 in the backward (+2 in the recomputed forward with
//       activation checkpointing); with sequence parallelism each becomes an
//       all-gather plus a reduce-scatter of the same S: the same bytes.
//   pp  per micro-batch and stage boundary, one send of B T D activations
//       forward and one of their gradient backward.
//   bubble  1F1B with p stages, m micro-batches and v model chunks per stage
//       (interleaved; v = 1 plain) idles (p-1)/v micro-batch slots:
//       a fraction (p-1)/(v m + p - 1) of the step.
#ifndef MTB_PLANNER_COST_MODEL_H_
#define MTB_PLANNER_COST_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

namespace mtb::planner {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kSendRecv };

// "all_reduce", "all_gather", "reduce_scatter", "send_recv" (the names of
// cluster files' fits and comm_bench's rows).
std::string CollectiveName(Collective op);

struct LinkCost {
  double latency_s = 0;              // alpha, per algorithm step
  double bandwidth_bytes_per_s = 0;  // beta, bus bandwidth
};

// Algorithm steps of the ring (or pairwise) algorithm: all_reduce 2(n-1),
// all_gather and reduce_scatter n-1, send_recv 1; 0 for n = 1.
int AlgorithmSteps(Collective op, int n);

// Bytes one rank sends for one call with buffer S (traffic.h's byte model).
int64_t WireBytes(Collective op, int64_t bytes, int n);

// alpha steps + wire bytes / beta; 0 for n = 1 (nothing to move).
double CollectiveSeconds(Collective op, int64_t bytes, int n, const LinkCost& link);

// (p-1) / (v m + p - 1): the share of a 1F1B step the pipeline idles.
double PipelineBubbleFraction(int stages, int micro_batches, int chunks);

// Tensor-parallel bytes per block per micro-batch: `all_reduces` collectives
// of micro_batch * seq_len * d_model elements (4 without recomputation, 6
// with; sequence parallelism turns each into an all-gather and a
// reduce-scatter with the same buffer).
int TensorParallelCollectivesPerBlock(bool activation_checkpointing);
int64_t ActivationBytes(int64_t micro_batch, int64_t seq_len, int64_t d_model,
                        int64_t bytes_per_element);

// One piece of communication the schedule runs behind computation: it may
// start once `ready_s` (from the start of the computation it hides behind)
// and takes `cost_s`; pieces run one at a time in order.
struct QueuedTransfer {
  double ready_s = 0;
  double cost_s = 0;
};

// How far the last piece ends after the computation (`compute_s` long) it
// overlaps: max(0, end of the queue - compute_s). DDP's buckets behind
// backward and ZeRO-2's (and ZeRO-1's, FSDP's) reduce-scatter per bucket or
// unit use it.
double ExposedAfterQueue(const std::vector<QueuedTransfer>& transfers, double compute_s);

// FSDP's parameter gathers: unit i's gather (gather_s[i]) must finish before
// its computation (compute_s[i]). Without prefetch each gather is issued when
// its unit starts, so all of it is exposed; with prefetch unit i+1's gather
// is issued when unit i starts and hides behind its computation. Returns the
// exposed seconds.
double ExposedGathers(const std::vector<double>& gather_s, const std::vector<double>& compute_s,
                      bool prefetch);

}  // namespace mtb::planner

#endif  // MTB_PLANNER_COST_MODEL_H_
