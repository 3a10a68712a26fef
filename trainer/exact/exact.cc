#include "trainer/exact/exact.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/sha256.h"
#include "common/base/status.h"
#include "common/collective/communicator.h"
#include "common/collective/traffic.h"
#include "glog/logging.h"
#include "trainer/exact/exact_quantize.h"
#include "trainer/output/metrics.h"

namespace mtb {
namespace {

constexpr int64_t kInt64Bytes = 8;

// The smallest c with 2^c >= n (n >= 1).
int CeilLog2(int64_t n) {
  int c = 0;
  while ((int64_t{1} << c) < n) ++c;
  return c;
}

// e with |value| < 2^e (value finite and nonzero).
int ExponentAbove(double value) {
  int e = 0;
  std::frexp(value, &e);  // |value| = m * 2^e, m in [0.5, 1)
  return e;
}

bool LittleEndian() {
  const uint32_t one = 1;
  unsigned char first = 0;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

}  // namespace

std::string ParameterDigest(const std::vector<NamedParameter>& parameters) {
  CHECK(LittleEndian()) << "the digest is defined on little-endian fp32";
  Sha256Hasher hasher;
  for (const NamedParameter& p : parameters) {
    const at::Tensor values = p.tensor.detach().to(at::kFloat).contiguous();
    hasher.Update(absl::string_view(static_cast<const char*>(values.data_ptr()),
                                    values.numel() * sizeof(float)));
  }
  return hasher.FinishHex();
}

std::string DoubleBits(double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  return absl::StrFormat("%016x", bits);
}

int64_t GlobalChunkOf(int index, int rank, int world_size, int64_t batch_size,
                      int64_t chunk) {
  const int64_t per_micro = batch_size / chunk;
  const int64_t micro = index / per_micro;
  const int64_t within = index % per_micro;
  const int64_t first_sample = (micro * world_size + rank) * batch_size;
  return first_sample / chunk + within;
}

ExactReducer::ExactReducer(const ParameterStore& store, int64_t global_chunks,
                           int finer_bits)
    : store_(&store),
      global_chunks_(global_chunks),
      limit_log2_(62 - CeilLog2(global_chunks)),
      default_shift_(limit_log2_ - kDefaultMaxAbsLog2 + finer_bits) {
  CHECK_GE(global_chunks, 1);
  const size_t count = store.parameters().size();
  shifts_.assign(count, default_shift_);
  local_max_.assign(count, 0.0f);
  global_max_.assign(count, 0.0f);
  accumulator_ = at::zeros({store.numel()}, at::kLong);
}

void ExactReducer::BeginAttempt(bool coarsen) {
  for (size_t p = 0; p < shifts_.size(); ++p) {
    if (coarsen &&
        static_cast<double>(global_max_[p]) >
            std::ldexp(1.0, limit_log2_ - shifts_[p])) {
      // |value| < 2^e: on shift L - e every value stays below 2^L.
      shifts_[p] = limit_log2_ - ExponentAbove(global_max_[p]);
    } else if (!coarsen) {
      shifts_[p] = default_shift_;
    }
  }
  accumulator_.zero_();
  std::fill(local_max_.begin(), local_max_.end(), 0.0f);
  local_finite_ = true;
}

void ExactReducer::AddChunk() {
  at::NoGradGuard no_grad;
  const std::vector<NamedParameter>& parameters = store_->parameters();
  for (size_t p = 0; p < parameters.size(); ++p) {
    const at::Tensor& grad = parameters[p].tensor.grad();
    if (!grad.defined()) continue;  // no gradient: zero
    CHECK_EQ(grad.scalar_type(), at::kFloat) << parameters[p].name;
    const at::Tensor flat = grad.contiguous();
    // One pass: max-abs, and the values on the grid added to the
    // accumulator. Values beyond the grid are not converted (they would not
    // fit the budget): the verdict redoes the step.
    const QuantizeScan scan = QuantizeAndAccumulate(
        flat.data_ptr<float>(), flat.numel(), std::ldexp(1.0, shifts_[p]),
        std::ldexp(1.0, limit_log2_ - shifts_[p]),
        accumulator_.data_ptr<int64_t>() + store_->offset(static_cast<int>(p)));
    if (!scan.finite) {
      local_finite_ = false;
    } else {
      local_max_[p] = std::max(local_max_[p], scan.max_abs);
    }
    grad.zero_();
  }
}

std::string ExactReducer::Verdict::Describe(
    const ParameterStore& store, const std::vector<float>& max_abs) const {
  std::vector<std::string> parts;
  for (int p : overflowed) {
    parts.push_back(absl::StrFormat("%s (max-abs %g)", store.parameters()[p].name,
                                    max_abs[p]));
  }
  return absl::StrJoin(parts, ", ");
}

absl::StatusOr<ExactReducer::Verdict> ExactReducer::Decide(
    collective::Communicator* communicator) {
  const int64_t count = static_cast<int64_t>(local_max_.size());
  at::Tensor values = at::empty({count + 1}, at::kFloat);
  float* data = values.data_ptr<float>();
  for (int64_t p = 0; p < count; ++p) data[p] = local_max_[p];
  data[count] = local_finite_ ? 0.0f : 1.0f;
  if (communicator != nullptr) {
    RETURN_IF_ERROR(Annotate(
        communicator->AllReduce(values, collective::ReduceOp::kMax),
        "exact: the chunk gradients' max-abs"));
  }
  Verdict verdict;
  verdict.finite = data[count] == 0.0f;
  for (int64_t p = 0; p < count; ++p) {
    global_max_[p] = data[p];
    if (static_cast<double>(data[p]) >
        std::ldexp(1.0, limit_log2_ - shifts_[p])) {
      verdict.overflowed.push_back(static_cast<int>(p));
    }
  }
  return verdict;
}

void ExactReducer::Dequantize(const at::Tensor& reduced, int64_t offset,
                              const at::Tensor& destination) const {
  at::NoGradGuard no_grad;
  CHECK_EQ(reduced.numel(), destination.numel());
  const int64_t end = offset + reduced.numel();
  for (int p : store_->layout()) {
    const int64_t first = store_->offset(p);
    const int64_t last = first + store_->parameters()[p].tensor.numel();
    const int64_t lo = std::max(first, offset);
    const int64_t hi = std::min(last, end);
    if (lo >= hi) continue;
    // The mean over the global chunks; the same scale on every rank.
    const double scale =
        std::ldexp(1.0, -shifts_[p]) / static_cast<double>(global_chunks_);
    destination.narrow(0, lo - offset, hi - lo)
        .copy_(reduced.narrow(0, lo - offset, hi - lo)
                   .to(at::kDouble)
                   .mul_(scale));
  }
}

absl::StatusOr<ExactTraffic> ExactReducer::Reduce(
    const std::vector<ExactGroup>& groups,
    collective::Communicator* communicator) {
  ExactTraffic traffic;
  const int rank = communicator == nullptr ? 0 : communicator->rank();
  const int n = communicator == nullptr ? 1 : communicator->world_size();
  const int64_t bytes_before =
      communicator == nullptr ? 0 : communicator->log().Totals().bytes_sent;
  struct Pending {
    at::Tensor reduced;
    int64_t offset = 0;
    collective::CollectiveHandle handle;
  };
  std::vector<Pending> pending(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const ExactGroup& group = groups[g];
    const at::Tensor input = accumulator_.narrow(0, group.offset, group.numel);
    Pending& mine = pending[g];
    if (group.counts.empty()) {
      mine.reduced = input;
      mine.offset = group.offset;
      if (communicator != nullptr) {
        mine.handle = communicator->AllReduceAsync(input);
        traffic.expected_bytes +=
            collective::AllReduceTraffic(group.numel * kInt64Bytes, n).sent;
      }
      continue;
    }
    CHECK_EQ(static_cast<int>(group.counts.size()), n);
    int64_t before = 0;
    for (int r = 0; r < rank; ++r) before += group.counts[r];
    mine.offset = group.offset + before;
    if (communicator == nullptr) {
      mine.reduced = input;
      continue;
    }
    mine.reduced = at::empty({group.counts[rank]}, at::kLong);
    mine.handle =
        communicator->ReduceScatterVAsync(input, mine.reduced, group.counts);
    traffic.expected_bytes +=
        collective::ReduceScatterVTraffic(group.counts, kInt64Bytes, rank).sent;
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    Pending& mine = pending[g];
    if (communicator != nullptr) {
      const Stopwatch watch;
      const absl::Status waited = mine.handle.Wait();
      traffic.wait_ms += watch.ElapsedMs();
      RETURN_IF_ERROR(Annotate(
          waited, absl::StrCat("exact: int64 gradient reduction of piece ", g)));
    }
    Dequantize(mine.reduced, mine.offset, groups[g].destination);
  }
  if (communicator != nullptr) {
    traffic.bytes_sent =
        communicator->log().Totals().bytes_sent - bytes_before;
  }
  return traffic;
}

absl::StatusOr<double> ExactReducer::Norm(
    const std::vector<ExactGroup>& groups,
    collective::Communicator* communicator) const {
  const int rank = communicator == nullptr ? 0 : communicator->rank();
  float max_abs = 0;
  for (float value : global_max_) max_abs = std::max(max_abs, value);
  if (max_abs == 0) return 0.0;
  // A reduced value is a mean of chunk values, each at most max_abs < 2^e,
  // plus rounding: below 2^(e+1). Its square on the grid 2^k is then at most
  // 2^62 / numel, and the sum over every element at most 2^62.
  const int e = ExponentAbove(max_abs) + 1;
  const int k = 62 - CeilLog2(store_->numel()) - 2 * e;
  const double grid = std::ldexp(1.0, k);
  int64_t local = 0;
  for (const ExactGroup& group : groups) {
    if (group.counts.empty() && rank != 0) continue;  // replicated: once
    // fp32 squared is exact in fp64; times 2^k exact; one rounding each.
    local += group.destination.to(at::kDouble)
                 .square_()
                 .mul_(grid)
                 .round_()
                 .to(at::kLong)
                 .sum()
                 .item<int64_t>();
  }
  at::Tensor total = at::full({1}, local, at::kLong);
  if (communicator != nullptr) {
    RETURN_IF_ERROR(Annotate(communicator->AllReduce(total),
                             "exact: the gradient norm's sum of squares"));
  }
  return std::sqrt(static_cast<double>(total.item<int64_t>()) *
                   std::ldexp(1.0, -k));
}

}  // namespace mtb
