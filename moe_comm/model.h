// The tensors of one configuration, the same on every rank (counter-keyed by
// --seed, common/equivalence SeededTensors): the whole layer's parameters,
// the concatenated batch of every rank's tokens and an upstream gradient.
// The router's constant bias is log(w_e) for the skew's expert weights
// (common/base/skew.h over E experts, expert 0 the hottest), which with unit
// logit noise makes the loads follow the skew roughly; the measured load
// histogram says how closely.
#ifndef MTB_MOE_COMM_MODEL_H_
#define MTB_MOE_COMM_MODEL_H_

#include <cstdint>

#include "ATen/core/Tensor.h"
#include "common/nn/moe.h"
#include "moe_comm/moe_comm.pb.h"

namespace mtb::moe_comm {

struct MoeInstance {
  nn::MoeParams whole;  // every expert, requires no grad
  at::Tensor x;         // (n * N, D): rank r's tokens are rows [rN, (r+1)N)
  at::Tensor upstream;  // (n * N, D)
};

MoeInstance SeededInstance(const MoeConfig& config, uint64_t seed,
                           int world_size);

// Rank `rank`'s block of `whole`'s experts (router whole), as views.
nn::MoeParams ExpertBlock(const nn::MoeParams& whole, int rank, int world_size);

// Rows [rank * N, (rank + 1) * N) of a (n * N, ...) tensor.
at::Tensor RankRows(const at::Tensor& all, int rank, int world_size);

}  // namespace mtb::moe_comm

#endif  // MTB_MOE_COMM_MODEL_H_
