#include "planner/cost_model.h"

#include <algorithm>

#include "common/collective/traffic.h"
#include "glog/logging.h"

namespace mtb::planner {

std::string CollectiveName(Collective op) {
  switch (op) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kSendRecv:
      return "send_recv";
  }
  return "";
}

int AlgorithmSteps(Collective op, int n) {
  if (n <= 1) return 0;
  switch (op) {
    case Collective::kAllReduce:
      return 2 * (n - 1);
    case Collective::kAllGather:
    case Collective::kReduceScatter:
      return n - 1;
    case Collective::kSendRecv:
      return 1;
  }
  return 0;
}

int64_t WireBytes(Collective op, int64_t bytes, int n) {
  if (n <= 1) return 0;
  switch (op) {
    case Collective::kAllReduce:
      return collective::AllReduceTraffic(bytes, n).sent;
    case Collective::kAllGather:
      return collective::AllGatherTraffic(bytes, n).sent;
    case Collective::kReduceScatter:
      return collective::ReduceScatterTraffic(bytes, n).sent;
    case Collective::kSendRecv:
      return collective::SendTraffic(bytes).sent;
  }
  return 0;
}

double CollectiveSeconds(Collective op, int64_t bytes, int n, const LinkCost& link) {
  if (n <= 1 || bytes <= 0) return 0;
  CHECK_GT(link.bandwidth_bytes_per_s, 0) << "a link without bandwidth";
  return link.latency_s * AlgorithmSteps(op, n) +
         static_cast<double>(WireBytes(op, bytes, n)) / link.bandwidth_bytes_per_s;
}

double PipelineBubbleFraction(int stages, int micro_batches, int chunks) {
  CHECK_GE(stages, 1);
  CHECK_GE(micro_batches, 1);
  CHECK_GE(chunks, 1);
  const double idle = static_cast<double>(stages - 1) / chunks;
  return idle / (micro_batches + idle);
}

int TensorParallelCollectivesPerBlock(bool activation_checkpointing) {
  // Attention and MLP each end in a row-parallel product (an all-reduce in
  // the forward) and start with a column-parallel one (an all-reduce of the
  // input gradient in the backward); recomputation runs the forward again.
  return activation_checkpointing ? 6 : 4;
}

int64_t ActivationBytes(int64_t micro_batch, int64_t seq_len, int64_t d_model,
                        int64_t bytes_per_element) {
  return micro_batch * seq_len * d_model * bytes_per_element;
}

double ExposedAfterQueue(const std::vector<QueuedTransfer>& transfers, double compute_s) {
  double end = 0;
  for (const QueuedTransfer& transfer : transfers) {
    end = std::max(end, transfer.ready_s) + transfer.cost_s;
  }
  return std::max(0.0, end - compute_s);
}

double ExposedGathers(const std::vector<double>& gather_s, const std::vector<double>& compute_s,
                      bool prefetch) {
  CHECK_EQ(gather_s.size(), compute_s.size());
  double exposed = 0;
  for (size_t i = 0; i < gather_s.size(); ++i) {
    if (!prefetch || i == 0) {
      exposed += gather_s[i];
    } else {
      // Issued when unit i-1 began computing (after its own gather).
      exposed += std::max(0.0, gather_s[i] - compute_s[i - 1]);
    }
  }
  return exposed;
}

}  // namespace mtb::planner
