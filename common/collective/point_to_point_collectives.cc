// Chunked reduce-scatter and direct all-gather over c10d send/recv
// (point_to_point_collectives.h has the vocabulary).
//
// Why send/recv: c10d 1.13's Gloo backend has neither reduce-scatter nor a
// flat all-gather; its list all-gather stages the whole output in a temporary
// and alltoall_base needs the whole exchange in one contiguous tensor on each
// side. Point-to-point messages read and write views of the caller's tensors,
// so nothing is staged beyond the chunks a reduction needs, and Gloo's
// transport moves every peer's messages at once. Tags come from the
// communicator's reserved range, one per collective, and Gloo matches the
// messages of one (pair, tag) in the order they were posted, so the steps of a
// collective pair up by order alone.
#include "common/collective/point_to_point_collectives.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/core/ivalue.h"
#include "glog/logging.h"

namespace mtb::collective {
namespace {

class BackgroundWork : public c10d::Work {
 public:
  BackgroundWork()
      : future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return future_;
  }

  void Complete(std::exception_ptr failure) {
    if (failure) {
      future_->setError(failure);
    } else {
      future_->markCompleted(c10::IValue(std::vector<at::Tensor>()));
    }
    finish(failure);
  }

 private:
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

c10::intrusive_ptr<c10d::Work> Send(GlooProcessGroup& group,
                                    const at::Tensor& tensor, int peer,
                                    int tag) {
  std::vector<at::Tensor> tensors{tensor};
  return group.send(tensors, peer, tag);
}

c10::intrusive_ptr<c10d::Work> Recv(GlooProcessGroup& group,
                                    const at::Tensor& tensor, int peer,
                                    int tag) {
  std::vector<at::Tensor> tensors{tensor};
  return group.recv(tensors, peer, tag);
}

void WaitAll(std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
  for (c10::intrusive_ptr<c10d::Work>& work : works) work->wait();
  works.clear();
}

void Combine(at::Tensor& accumulator, const at::Tensor& contribution,
             ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      accumulator.add_(contribution);
      return;
    case ReduceOp::kMax:
      at::maximum_out(accumulator, accumulator, contribution);
      return;
    case ReduceOp::kMin:
      at::minimum_out(accumulator, accumulator, contribution);
      return;
  }
  LOG(FATAL) << "unknown ReduceOp";
}

}  // namespace

c10::intrusive_ptr<c10d::Work> RunInBackground(std::function<void()> body) {
  auto work = c10::make_intrusive<BackgroundWork>();
  std::thread([work, body = std::move(body)] {
    std::exception_ptr failure;
    try {
      body();
    } catch (...) {
      failure = std::current_exception();
    }
    work->Complete(failure);
  }).detach();
  return work;
}

void ChunkedReduceScatter(GlooProcessGroup& group, int rank,
                          const at::Tensor& flat_input,
                          const std::vector<int64_t>& block_elements,
                          const at::Tensor& result, int64_t chunk_elements,
                          ReduceOp op, int tag) {
  CHECK_GT(chunk_elements, 0);
  const int n = static_cast<int>(block_elements.size());
  std::vector<int64_t> block_offsets(n, 0);
  for (int p = 1; p < n; ++p) {
    block_offsets[p] = block_offsets[p - 1] + block_elements[p - 1];
  }
  const int64_t mine = block_elements[rank];
  auto chunk_size = [&](int p, int64_t step) {
    return std::clamp<int64_t>(block_elements[p] - step * chunk_elements, 0,
                               chunk_elements);
  };
  auto chunk_of_block = [&](int p, int64_t step) {
    return flat_input.narrow(0, block_offsets[p] + step * chunk_elements,
                             chunk_size(p, step));
  };
  // The most steps any block needs: this rank sends for that long.
  int64_t steps = 0;
  for (int p = 0; p < n; ++p) {
    steps = std::max(steps,
                     (block_elements[p] + chunk_elements - 1) / chunk_elements);
  }
  const int64_t staged = std::min(chunk_elements, mine);
  // slots[s][p]: rank p's chunk of this rank's block in slot s (p != rank).
  std::vector<std::vector<at::Tensor>> slots(2);
  for (auto& slot : slots) {
    slot.resize(n);
    for (int p = 0; p < n; ++p) {
      if (p != rank) slot[p] = at::empty({staged}, flat_input.options());
    }
  }
  at::Tensor accumulator = at::empty({staged}, flat_input.options());
  std::vector<std::vector<c10::intrusive_ptr<c10d::Work>>> receives(2), sends(2);

  auto post = [&](int64_t step) {
    const int slot = static_cast<int>(step % 2);
    const int64_t size = chunk_size(rank, step);
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      if (size > 0) {
        receives[slot].push_back(
            Recv(group, slots[slot][p].narrow(0, 0, size), p, tag));
      }
      if (chunk_size(p, step) > 0) {
        sends[slot].push_back(Send(group, chunk_of_block(p, step), p, tag));
      }
    }
  };
  auto reduce = [&](int64_t step) {
    const int slot = static_cast<int>(step % 2);
    WaitAll(receives[slot]);
    const int64_t size = chunk_size(rank, step);
    if (size > 0) {
      at::Tensor sum = accumulator.narrow(0, 0, size);
      const at::Tensor own = chunk_of_block(rank, step);
      auto contribution = [&](int p) {
        return p == rank ? own : slots[slot][p].narrow(0, 0, size);
      };
      sum.copy_(contribution(0));
      for (int p = 1; p < n; ++p) Combine(sum, contribution(p), op);
      result.narrow(0, step * chunk_elements, size).copy_(sum);
    }
    WaitAll(sends[slot]);
  };

  if (steps == 0) return;
  post(0);
  for (int64_t step = 0; step < steps; ++step) {
    if (step + 1 < steps) post(step + 1);
    reduce(step);
  }
}

void DirectAllGather(GlooProcessGroup& group, int rank, int world_size,
                     const at::Tensor& flat_input,
                     const at::Tensor& flat_output, int tag) {
  const int64_t k = flat_input.numel();
  if (k == 0) return;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (int p = 0; p < world_size; ++p) {
    if (p == rank) continue;
    works.push_back(Recv(group, flat_output.narrow(0, p * k, k), p, tag));
  }
  for (int p = 0; p < world_size; ++p) {
    if (p == rank) continue;
    works.push_back(Send(group, flat_input, p, tag));
  }
  at::Tensor own = flat_output.narrow(0, rank * k, k);
  if (own.data_ptr() != flat_input.data_ptr()) own.copy_(flat_input);
  WaitAll(works);
}

}  // namespace mtb::collective
