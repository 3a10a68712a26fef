// Which part of each GPT parameter a tensor-parallel rank holds (Megatron's
// split; docs/tp.md). n = ranks of the tp group, r = this rank's index in it.
//
//   wte                         rows        vocab-parallel embedding and
//                                           the tied LM head: (V/n, D)
//   h.L.attn.c_attn.weight/bias qkv rows    its heads' query, key and value
//                                           rows: (3D/n, D), (3D/n)
//   h.L.attn.c_proj.weight      columns     row-parallel: (D, D/n)
//   h.L.mlp.c_fc.weight/bias    rows        column-parallel: (4D/n, D), (4D/n)
//   h.L.mlp.c_proj.weight       columns     row-parallel: (D, 4D/n)
//   everything else             replicated  wpe, LayerNorms, the row-parallel
//                                           layers' biases, ln_f
//
// Rank r's block of a split dimension of size S is [r*S/n, (r+1)*S/n); for
// the fused QKV it is that block of each of the query, key and value thirds.
#ifndef MTB_TRAINER_TP_LAYOUT_H_
#define MTB_TRAINER_TP_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/status/statusor.h"
#include "common/collective/communicator.h"

namespace mtb::tp {

enum class Split { kReplicated, kRows, kQkvRows, kColumns };

Split SplitOf(const std::string& name);

// Rank r's part of `global` (a new contiguous tensor; a clone when
// replicated).
at::Tensor LocalPart(Split split, const at::Tensor& global, int rank, int n);

// The shape of rank r's part of a tensor of `global_shape`.
std::vector<int64_t> LocalShape(Split split,
                                const std::vector<int64_t>& global_shape,
                                int n);

// A run of elements of a local part that is contiguous in the flattened
// global tensor too: local elements [local_offset, + numel) are global
// elements [global_offset, + numel).
struct GlobalRun {
  int64_t local_offset = 0;
  int64_t global_offset = 0;
  int64_t numel = 0;
};

// Local elements [offset, offset + numel) of rank r's part of a tensor of
// `global_shape`, as runs of the flattened global tensor, in local order.
std::vector<GlobalRun> GlobalRuns(Split split,
                                  const std::vector<int64_t>& global_shape,
                                  int rank, int n, int64_t offset,
                                  int64_t numel);

// Collective over `comm` (the tp group): the global tensor from every rank's
// `local` part (replicated parts: this rank's own copy).
absl::StatusOr<at::Tensor> GatherGlobal(Split split, const at::Tensor& local,
                                        collective::Communicator& comm);

}  // namespace mtb::tp

#endif  // MTB_TRAINER_TP_LAYOUT_H_
