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
#include <deque>
#include <exception>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/core/ivalue.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
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

// target = a op b, elementwise (target may be a or b).
void Combine(at::Tensor& target, const at::Tensor& a, const at::Tensor& b,
             ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      at::add_out(target, a, b);
      return;
    case ReduceOp::kMax:
      at::maximum_out(target, a, b);
      return;
    case ReduceOp::kMin:
      at::minimum_out(target, a, b);
      return;
  }
  LOG(FATAL) << "unknown ReduceOp";
}

// Whether the two tensors' bytes overlap.
bool BytesOverlap(const at::Tensor& a, const at::Tensor& b) {
  const char* a_begin = static_cast<const char*>(a.data_ptr());
  const char* b_begin = static_cast<const char*>(b.data_ptr());
  return a_begin < b_begin + b.nbytes() && b_begin < a_begin + a.nbytes();
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

struct SerialWorker::State {
  absl::Mutex mutex;
  std::deque<std::pair<c10::intrusive_ptr<BackgroundWork>, std::function<void()>>> queue
      ABSL_GUARDED_BY(mutex);
  bool stopping ABSL_GUARDED_BY(mutex) = false;
};

SerialWorker::SerialWorker() : state_(std::make_shared<State>()) {
  thread_ = std::thread([state = state_] {
    while (true) {
      std::pair<c10::intrusive_ptr<BackgroundWork>, std::function<void()>> next;
      {
        absl::MutexLock lock(&state->mutex);
        state->mutex.Await(absl::Condition(
            +[](State* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
              return s->stopping || !s->queue.empty();
            },
            state.get()));
        if (state->queue.empty()) return;
        next = std::move(state->queue.front());
        state->queue.pop_front();
      }
      std::exception_ptr failure;
      try {
        next.second();
      } catch (...) {
        failure = std::current_exception();
      }
      next.first->Complete(failure);
    }
  });
}

SerialWorker::~SerialWorker() {
  {
    absl::MutexLock lock(&state_->mutex);
    state_->stopping = true;
  }
  thread_.join();
}

c10::intrusive_ptr<c10d::Work> SerialWorker::Run(std::function<void()> body) {
  auto work = c10::make_intrusive<BackgroundWork>();
  absl::MutexLock lock(&state_->mutex);
  state_->queue.emplace_back(work, std::move(body));
  return work;
}

void ChunkedReduceScatter(GlooProcessGroup& group, int rank,
                          const at::Tensor& flat_input,
                          const std::vector<int64_t>& block_elements,
                          const at::Tensor& result, int64_t chunk_elements,
                          int depth, ReduceOp op, int tag,
                          ReduceScatterPhases* phases) {
  CHECK_GT(chunk_elements, 0);
  CHECK_GT(depth, 0);
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
  auto out_chunk = [&](int64_t step) {
    return result.narrow(0, step * chunk_elements, chunk_size(rank, step));
  };
  // The most steps any block needs: this rank sends for that long.
  int64_t steps = 0;
  for (int p = 0; p < n; ++p) {
    steps = std::max(steps,
                     (block_elements[p] + chunk_elements - 1) / chunk_elements);
  }
  if (steps == 0) return;
  // Out of place, the direct peer's chunks land in `result` itself, with
  // every receive posted at once: no staging, nothing to throttle them.
  const bool out_of_place =
      n > 1 && !BytesOverlap(result, flat_input);
  const int direct_peer = !out_of_place ? -1 : rank == 0 ? 1 : 0;
  const int staged_peers = n - 1 - (direct_peer >= 0 ? 1 : 0);
  const int slot_count =
      staged_peers == 0 ? 0 : static_cast<int>(std::min<int64_t>(depth, steps));
  const int64_t staged = std::min(chunk_elements, mine);
  // slots[s][p]: rank p's chunk of this rank's block in slot s (staged p).
  std::vector<std::vector<at::Tensor>> slots(slot_count);
  for (auto& slot : slots) {
    slot.resize(n);
    for (int p = 0; p < n; ++p) {
      if (p != rank && p != direct_peer) {
        slot[p] = at::empty({staged}, flat_input.options());
      }
    }
  }
  std::vector<c10::intrusive_ptr<c10d::Work>> direct_receives(steps), sends;
  std::vector<std::vector<c10::intrusive_ptr<c10d::Work>>> staged_receives(
      slot_count);
  absl::Duration receive_wait, reduce_time, send_wait;

  // Every send at once, in step order per peer (Gloo matches the messages of
  // one pair and tag in posting order); they leave as the peers post their
  // receives.
  for (int64_t step = 0; step < steps; ++step) {
    for (int p = 0; p < n; ++p) {
      if (p != rank && chunk_size(p, step) > 0) {
        sends.push_back(Send(group, chunk_of_block(p, step), p, tag));
      }
    }
  }
  if (direct_peer >= 0) {
    for (int64_t step = 0; step < steps; ++step) {
      if (chunk_size(rank, step) > 0) {
        direct_receives[step] = Recv(group, out_chunk(step), direct_peer, tag);
      }
    }
  }
  auto post_staged = [&](int64_t step) {
    const int slot = static_cast<int>(step % slot_count);
    const int64_t size = chunk_size(rank, step);
    if (size == 0) return;
    for (int p = 0; p < n; ++p) {
      if (p == rank || p == direct_peer) continue;
      staged_receives[slot].push_back(
          Recv(group, slots[slot][p].narrow(0, 0, size), p, tag));
    }
  };
  // Contributions combine in rank order, (((c0 op c1) op c2) ...), so every
  // rank computes the same bits as the alltoall algorithm, one pass per
  // contribution and no copy. The running value lives in `result` when this
  // is rank 0 (its own chunk is c0) or out of place (the direct peer's chunk
  // is c0, or c1 on rank 0, which is combined as c0 op c1), else in peer 0's
  // staging chunk; the last combination writes `result`. In place, `result`
  // is this rank's own chunk: it is written by the combination that reads it
  // or after it was read, elementwise.
  auto reduce = [&](int64_t step) {
    const absl::Time wait_begin = absl::Now();
    if (direct_receives[step]) {
      direct_receives[step]->wait();
      direct_receives[step].reset();
    }
    const int slot = slot_count == 0 ? 0 : static_cast<int>(step % slot_count);
    if (slot_count > 0) WaitAll(staged_receives[slot]);
    const absl::Time reduce_begin = absl::Now();
    receive_wait += reduce_begin - wait_begin;
    const int64_t size = chunk_size(rank, step);
    if (size > 0) {
      const at::Tensor own = chunk_of_block(rank, step);
      at::Tensor out = out_chunk(step);
      auto contribution = [&](int p) {
        if (p == rank) return own;
        if (p == direct_peer) return out;
        return slots[slot][p].narrow(0, 0, size);
      };
      const bool running_in_out = rank == 0 || out_of_place;
      at::Tensor running = contribution(0);
      for (int p = 1; p < n; ++p) {
        at::Tensor target = p == n - 1 || running_in_out ? out : contribution(0);
        Combine(target, running, contribution(p), op);
        running = target;
      }
      if (n == 1 && out.data_ptr() != running.data_ptr()) out.copy_(running);
    }
    reduce_time += absl::Now() - reduce_begin;
  };

  for (int64_t step = 0; step + 1 < slot_count; ++step) post_staged(step);
  for (int64_t step = 0; step < steps; ++step) {
    if (slot_count > 0 && step + slot_count - 1 < steps) {
      post_staged(step + slot_count - 1);
    }
    reduce(step);
  }
  const absl::Time send_begin = absl::Now();
  WaitAll(sends);
  send_wait = absl::Now() - send_begin;
  if (phases != nullptr) {
    phases->receive_wait = receive_wait;
    phases->reduce = reduce_time;
    phases->send_wait = send_wait;
  }
}

void DirectAllGather(GlooProcessGroup& group, int rank,
                     const at::Tensor& flat_input,
                     const at::Tensor& flat_output,
                     const std::vector<int64_t>& block_elements, int tag) {
  const int n = static_cast<int>(block_elements.size());
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  int64_t offset = 0;
  at::Tensor own;
  for (int p = 0; p < n; ++p) {
    const at::Tensor block = flat_output.narrow(0, offset, block_elements[p]);
    offset += block_elements[p];
    if (p == rank) {
      own = block;
    } else if (block_elements[p] > 0) {
      works.push_back(Recv(group, block, p, tag));
    }
  }
  if (flat_input.numel() > 0) {
    for (int p = 0; p < n; ++p) {
      if (p != rank) works.push_back(Send(group, flat_input, p, tag));
    }
    if (own.data_ptr() != flat_input.data_ptr()) own.copy_(flat_input);
  }
  WaitAll(works);
}

}  // namespace mtb::collective
