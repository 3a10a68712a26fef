// Each region is one torch::autograd::Function template, RegionFunction<
// Forward, Backward>, whose two halves are plain collectives (AllReduceSum,
// AllGatherAlongDim, ReduceScatterAlongDim) or the local ShardAlongDim. The
// communicator and the dimension travel to backward in the context's
// saved_data as a capsule (a Region); Function::apply runs forward under
// no_grad.
#include "common/nn/tensor_parallel.h"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/core/ivalue.h"
#include "glog/logging.h"
#include "torch/csrc/autograd/custom_function.h"

namespace mtb {
namespace nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw std::runtime_error(std::string(status.message()));
}

// What a region's backward needs besides the gradient.
struct Region : torch::CustomClassHolder {
  Region(collective::Communicator* comm, int64_t dim, VocabTensorObserver observer)
      : comm(comm), dim(dim), observer(std::move(observer)) {}
  collective::Communicator* comm;
  int64_t dim;
  VocabTensorObserver observer;
};

c10::intrusive_ptr<Region> MakeRegion(collective::Communicator* comm, int64_t dim,
                                      VocabTensorObserver observer = {}) {
  CHECK(comm != nullptr);
  return c10::make_intrusive<Region>(comm, dim, std::move(observer));
}

void SaveRegion(AutogradContext* context, c10::intrusive_ptr<Region> region) {
  context->saved_data["region"] = c10::IValue::make_capsule(std::move(region));
}

c10::intrusive_ptr<Region> LoadRegion(AutogradContext* context) {
  return c10::static_intrusive_pointer_cast<Region>(
      context->saved_data["region"].toCapsule());
}

int64_t WrapDim(int64_t dim, const at::Tensor& x) {
  const int64_t rank = x.dim();
  CHECK(dim >= -rank && dim < rank)
      << "dim " << dim << " of a " << rank << "-d tensor";
  return dim < 0 ? dim + rank : dim;
}

// The five things a region does to a tensor, forward or backward.
at::Tensor Identity(const at::Tensor& x, const Region&) { return x; }
at::Tensor AllReduce(const at::Tensor& x, const Region& region) {
  return AllReduceSum(x, region.comm);
}
at::Tensor AllGather(const at::Tensor& x, const Region& region) {
  return AllGatherAlongDim(x, region.dim, region.comm);
}
at::Tensor ReduceScatter(const at::Tensor& x, const Region& region) {
  return ReduceScatterAlongDim(x, region.dim, region.comm);
}
at::Tensor OwnBlock(const at::Tensor& x, const Region& region) {
  return ShardAlongDim(x, region.dim, region.comm->rank(),
                       region.comm->world_size());
}

using RegionOp = at::Tensor (*)(const at::Tensor&, const Region&);

// A region: `Forward` on the input, `Backward` on the gradient. The pairs
// below are conjugate: each is the other's transpose as a linear map.
template <RegionOp Forward, RegionOp Backward>
class RegionFunction
    : public torch::autograd::Function<RegionFunction<Forward, Backward>> {
 public:
  static at::Tensor forward(AutogradContext* context, const at::Tensor& x,
                            c10::intrusive_ptr<Region> region) {
    // An input returned as it is becomes a view of it (autograd's rule).
    at::Tensor y = Forward(x, *region);
    SaveRegion(context, std::move(region));
    return y;
  }
  static variable_list backward(AutogradContext* context, variable_list grads) {
    return {Backward(grads[0], *LoadRegion(context)), at::Tensor()};
  }
};

using CopyToRegion = RegionFunction<Identity, AllReduce>;      // f
using ReduceFromRegion = RegionFunction<AllReduce, Identity>;  // g
using GatherFromRegion = RegionFunction<AllGather, OwnBlock>;
using ScatterToRegion = RegionFunction<OwnBlock, AllGather>;
using SequenceGather = RegionFunction<AllGather, ReduceScatter>;
using SequenceReduceScatter = RegionFunction<ReduceScatter, AllGather>;

// Vocabulary-parallel cross-entropy (Megatron's _VocabParallelCrossEntropy).
// Vocabulary: the *shard* is this rank's columns [vocab_start, vocab_start +
// V/n) of the logits; a row's *target logit* lives on exactly one rank.
class VocabCrossEntropy : public torch::autograd::Function<VocabCrossEntropy> {
 public:
  static at::Tensor forward(AutogradContext* context,
                            const at::Tensor& logits_shard,
                            const at::Tensor& targets,
                            c10::intrusive_ptr<Region> region) {
    collective::Communicator* comm = region->comm;
    const VocabTensorObserver& observe = region->observer;
    const int64_t shard_size = logits_shard.size(1);
    const int64_t vocab_start = comm->rank() * shard_size;
    auto noted = [&](at::Tensor t) {  // (N, V/n)
      if (observe) observe(t);
      return t;
    };

    // Global max per row, for a stable exponent.
    const at::Tensor row_max = std::get<0>(logits_shard.max(1));  // (N)
    ThrowIfError(comm->AllReduce(row_max, collective::ReduceOp::kMax));
    const at::Tensor shifted =
        noted(logits_shard - row_max.unsqueeze(1));  // (N, V/n)

    // The target logit, from the rank that owns the target's column.
    const at::Tensor outside =
        (targets < vocab_start).logical_or(targets >= vocab_start + shard_size);
    const at::Tensor local_target =
        (targets - vocab_start).masked_fill(outside, 0);  // (N)
    const at::Tensor target_logit = shifted.gather(1, local_target.unsqueeze(1))
                                        .squeeze(1)
                                        .masked_fill(outside, 0.0)
                                        .contiguous();  // (N)
    ThrowIfError(comm->AllReduce(target_logit));

    at::Tensor exp_shifted = noted(shifted.exp());  // (N, V/n)
    const at::Tensor sum_exp = exp_shifted.sum(1);  // (N)
    ThrowIfError(comm->AllReduce(sum_exp));
    at::Tensor loss = sum_exp.log() - target_logit;  // (N)

    // What backward needs: the softmax of the shard and where the target is.
    at::Tensor softmax = exp_shifted.div_(sum_exp.unsqueeze(1));  // (N, V/n)
    context->save_for_backward({softmax, local_target, outside});
    SaveRegion(context, std::move(region));
    return loss;
  }

  static variable_list backward(AutogradContext* context, variable_list grads) {
    const variable_list saved = context->get_saved_variables();
    const at::Tensor& softmax = saved[0];
    const at::Tensor& local_target = saved[1];
    const at::Tensor& outside = saved[2];
    const c10::intrusive_ptr<Region> region = LoadRegion(context);
    // d loss_i / d logit_iv = softmax_iv - [v == target_i], on this rank's
    // columns only: no communication.
    at::Tensor grad = softmax.clone();  // (N, V/n)
    if (region->observer) region->observer(grad);
    const at::Tensor one_hot_value =
        outside.logical_not().to(grad.scalar_type()).unsqueeze(1);  // (N, 1)
    grad.scatter_add_(1, local_target.unsqueeze(1), -one_hot_value);
    grad.mul_(grads[0].unsqueeze(1));
    return {grad, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor AllReduceSum(const at::Tensor& x, collective::Communicator* comm) {
  at::Tensor sum = x.clone(at::MemoryFormat::Contiguous);
  ThrowIfError(comm->AllReduce(sum));
  return sum;
}

at::Tensor AllGatherAlongDim(const at::Tensor& x, int64_t dim,
                             collective::Communicator* comm) {
  dim = WrapDim(dim, x);
  const at::Tensor input = x.contiguous();
  std::vector<int64_t> blocks_shape = {comm->world_size()};
  blocks_shape.insert(blocks_shape.end(), input.sizes().begin(),
                      input.sizes().end());
  const at::Tensor blocks = at::empty(blocks_shape, input.options());
  // (n, ...): block p is rank p's x.
  ThrowIfError(comm->AllGather(input, blocks));
  // (..., n, k, ...) -> (..., n*k, ...)
  std::vector<int64_t> gathered_shape = input.sizes().vec();
  gathered_shape[dim] *= comm->world_size();
  return blocks.movedim(0, dim).reshape(gathered_shape);
}

at::Tensor ReduceScatterAlongDim(const at::Tensor& x, int64_t dim,
                                 collective::Communicator* comm) {
  dim = WrapDim(dim, x);
  const int64_t n = comm->world_size();
  CHECK_EQ(x.size(dim) % n, 0)
      << "reduce-scatter along dim " << dim << " of size " << x.size(dim)
      << " over " << n << " ranks";
  std::vector<int64_t> split_shape = x.sizes().vec();  // (..., n, k, ...)
  split_shape[dim] /= n;
  split_shape.insert(split_shape.begin() + dim, n);
  // (n, ..., k, ...): block p is the part of the sum rank p keeps.
  const at::Tensor blocks = x.reshape(split_shape).movedim(dim, 0).contiguous();
  std::vector<int64_t> shard_shape = x.sizes().vec();
  shard_shape[dim] /= n;
  at::Tensor shard = at::empty(shard_shape, x.options());
  ThrowIfError(comm->ReduceScatter(blocks, shard));
  return shard;
}

at::Tensor ShardAlongDim(const at::Tensor& x, int64_t dim, int rank,
                         int world_size) {
  dim = WrapDim(dim, x);
  CHECK_EQ(x.size(dim) % world_size, 0)
      << "shard of dim " << dim << " of size " << x.size(dim) << " over "
      << world_size << " ranks";
  const int64_t k = x.size(dim) / world_size;
  return x.narrow(dim, rank * k, k).contiguous();
}

at::Tensor CopyToTensorParallelRegion(const at::Tensor& x,
                                      collective::Communicator* comm) {
  return CopyToRegion::apply(x, MakeRegion(comm, 0));
}

at::Tensor ReduceFromTensorParallelRegion(const at::Tensor& x,
                                          collective::Communicator* comm) {
  return ReduceFromRegion::apply(x, MakeRegion(comm, 0));
}

at::Tensor GatherFromTensorParallelRegion(const at::Tensor& x,
                                          collective::Communicator* comm) {
  return GatherFromRegion::apply(x, MakeRegion(comm, x.dim() - 1));
}

at::Tensor ScatterToTensorParallelRegion(const at::Tensor& x,
                                         collective::Communicator* comm) {
  return ScatterToRegion::apply(x, MakeRegion(comm, x.dim() - 1));
}

at::Tensor GatherFromSequenceParallelRegion(const at::Tensor& x, int64_t dim,
                                            collective::Communicator* comm) {
  return SequenceGather::apply(x, MakeRegion(comm, WrapDim(dim, x)));
}

at::Tensor ScatterToSequenceParallelRegion(const at::Tensor& x, int64_t dim,
                                           collective::Communicator* comm) {
  return ScatterToRegion::apply(x, MakeRegion(comm, WrapDim(dim, x)));
}

at::Tensor ReduceScatterToSequenceParallelRegion(const at::Tensor& x,
                                                 int64_t dim,
                                                 collective::Communicator* comm) {
  return SequenceReduceScatter::apply(x, MakeRegion(comm, WrapDim(dim, x)));
}

at::Tensor VocabParallelEmbedding(const at::Tensor& tokens,
                                  const at::Tensor& embedding_shard,
                                  collective::Communicator* comm) {
  const int64_t shard_size = embedding_shard.size(0);
  const int64_t vocab_start = comm->rank() * shard_size;
  const at::Tensor outside =
      (tokens < vocab_start).logical_or(tokens >= vocab_start + shard_size);
  const at::Tensor local_tokens =
      (tokens - vocab_start).masked_fill(outside, 0);
  const at::Tensor looked_up =
      at::embedding(embedding_shard, local_tokens)  // (..., D)
          .masked_fill(outside.unsqueeze(-1), 0.0);
  return ReduceFromTensorParallelRegion(looked_up, comm);
}

at::Tensor VocabParallelCrossEntropy(const at::Tensor& logits_shard,
                                     const at::Tensor& targets,
                                     collective::Communicator* comm,
                                     const VocabTensorObserver& observer) {
  CHECK_EQ(logits_shard.dim(), 2);
  CHECK_EQ(targets.dim(), 1);
  CHECK_EQ(logits_shard.size(0), targets.size(0));
  return VocabCrossEntropy::apply(logits_shard, targets,
                                  MakeRegion(comm, 1, observer));
}

}  // namespace nn
}  // namespace mtb
