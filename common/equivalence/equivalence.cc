#include "common/equivalence/equivalence.h"

#include <algorithm>
#include <memory>
#include <set>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/libtorch/allclose.h"
#include "common/base/counter_rng.h"
#include "common/collective/traffic.h"
#include "common/nn/init.h"
#include "common/nn/tensor_parallel.h"
#include "common/base/status.h"
#include "glog/logging.h"

namespace mtb::equivalence {

absl::string_view TensorKindName(TensorKind kind) {
  return kind == TensorKind::kOutput ? "output" : "grad";
}

at::Tensor SeededTensors::Normal(at::IntArrayRef shape, double stddev,
                                 double mean) {
  const uint64_t key =
      CounterKey({seed_, static_cast<uint64_t>(RngStream::kInit),
                  check_, next_++});
  at::Tensor tensor = nn::CounterNormalTensor(shape, key, stddev);
  if (mean != 0.0) tensor.add_(mean);
  return tensor;
}

at::Tensor SeededTensors::Tokens(at::IntArrayRef shape, int64_t vocab) {
  const uint64_t key =
      CounterKey({seed_, static_cast<uint64_t>(RngStream::kData),
                  check_, next_++});
  at::Tensor tokens = at::empty(shape, at::kLong);
  int64_t* data = tokens.data_ptr<int64_t>();
  for (int64_t e = 0; e < tokens.numel(); ++e) {
    data[e] = static_cast<int64_t>(
        CounterBelow(key, e, static_cast<uint64_t>(vocab)));
  }
  return tokens;
}

at::Tensor Leaf(const at::Tensor& value) {
  return value.detach().clone().requires_grad_(true);
}

at::Tensor Shard(const at::Tensor& value, int64_t dim,
                 const collective::Communicator& comm) {
  return nn::ShardAlongDim(value, dim, comm.rank(), comm.world_size());
}

at::Tensor ShardLeaf(const at::Tensor& value, int64_t dim,
                     const collective::Communicator& comm) {
  return Leaf(Shard(value.detach(), dim, comm));
}

at::Tensor ShardQkv(const at::Tensor& qkv, const collective::Communicator& comm) {
  CHECK_EQ(qkv.size(0) % 3, 0);
  const int64_t width = qkv.size(0) / 3;  // D
  std::vector<at::Tensor> parts;
  for (int64_t part = 0; part < 3; ++part) {  // queries, keys, values
    parts.push_back(Shard(qkv.narrow(0, part * width, width), 0, comm));
  }
  return at::cat(parts);
}

CollectiveCounter::CollectiveCounter(const collective::Communicator& comm)
    : comm_(comm), last_(comm.log().TotalsByOp()) {}

void CollectiveCounter::EndPhase(const std::string& phase) {
  std::map<collective::CollectiveOp, collective::CollectiveTotals> now =
      comm_.log().TotalsByOp();
  for (const auto& [op, totals] : now) {
    const collective::CollectiveTotals before = last_[op];  // zeros when new
    const int64_t calls = totals.calls - before.calls;
    if (calls == 0) continue;
    Count& count = counts_[{phase, op}];
    count.count += static_cast<int>(calls);
    count.bytes_sent += totals.bytes_sent - before.bytes_sent;
    count.bytes_received += totals.bytes_received - before.bytes_received;
  }
  last_ = std::move(now);
}

std::vector<CollectiveCheck> CompareCollectives(
    const std::map<CollectiveCounter::Key, CollectiveCounter::Count>& measured,
    const std::vector<ExpectedCollective>& expected) {
  // Rows in the closed form's order, then anything unexpected.
  std::vector<CollectiveCheck> rows;
  std::set<CollectiveCounter::Key> seen;
  auto row = [&](const CollectiveCounter::Key& key) -> CollectiveCheck& {
    if (seen.insert(key).second) {
      CollectiveCheck check;
      check.set_phase(key.first);
      check.set_op(std::string(collective::CollectiveOpName(key.second)));
      rows.push_back(check);
      return rows.back();
    }
    for (CollectiveCheck& check : rows) {
      if (check.phase() == key.first &&
          check.op() == collective::CollectiveOpName(key.second)) {
        return check;
      }
    }
    LOG(FATAL) << "unreachable";
  };
  for (const ExpectedCollective& e : expected) {
    CollectiveCheck& check = row({e.phase, e.op});
    check.set_expected_count(check.expected_count() + e.count);
    check.set_expected_bytes(check.expected_bytes() + e.bytes);
  }
  for (const auto& [key, count] : measured) {
    CollectiveCheck& check = row(key);
    check.set_count(count.count);
    check.set_bytes_sent(count.bytes_sent);
    check.set_bytes_received(count.bytes_received);
  }
  for (CollectiveCheck& check : rows) {
    check.set_ok(check.count() == check.expected_count() &&
                 check.bytes_sent() == check.expected_bytes() &&
                 check.bytes_received() == check.expected_bytes());
  }
  return rows;
}

std::vector<ExpectedCollective> AllReduceEachWay(int64_t activation_bytes,
                                                 int world_size) {
  const int64_t bytes =
      collective::AllReduceTraffic(activation_bytes, world_size).sent;
  return {{kForward, collective::CollectiveOp::kAllReduce, 1, bytes},
          {kBackward, collective::CollectiveOp::kAllReduce, 1, bytes}};
}

CheckRecorder::CheckRecorder(std::string name, std::vector<TensorSpec> tensors,
                             Tolerance tolerance, const CheckHooks& hooks,
                             collective::Communicator& comm)
    : name_(std::move(name)),
      tensors_(std::move(tensors)),
      tolerance_(tolerance),
      hooks_(hooks),
      comm_(comm),
      start_(absl::Now()) {}

at::Tensor CheckRecorder::Perturb(absl::string_view tensor,
                                  const at::Tensor& x) {
  CHECK(std::any_of(tensors_.begin(), tensors_.end(),
                    [&](const TensorSpec& spec) { return spec.name == tensor; }))
      << name_ << " has no tensor " << tensor;
  if (!hooks_.enabled() || hooks_.perturb_rank != comm_.rank() ||
      hooks_.perturb_tensor != tensor) {
    return x;
  }
  at::Tensor bump = at::zeros_like(x);
  bump.view({-1})[0] = hooks_.perturb_delta;
  return x + bump;
}

void CheckRecorder::StartCounting() {
  CHECK(counter_ == nullptr) << name_ << ": counting started twice";
  counter_ = std::make_unique<CollectiveCounter>(comm_);
}

void CheckRecorder::EndPhase(const std::string& phase) {
  CHECK(counter_ != nullptr) << name_ << ": EndPhase before StartCounting";
  counter_->EndPhase(phase);
}

void CheckRecorder::Compare(absl::string_view name, const at::Tensor& actual,
                            const at::Tensor& expected) {
  CHECK_LT(rows_.size(), tensors_.size()) << name_ << ": extra tensor " << name;
  const TensorSpec& spec = tensors_[rows_.size()];
  CHECK_EQ(spec.name, name) << name_ << ": tensors compared out of order";
  const AllCloseResult close =
      AllClose(actual, expected, tolerance_.rtol, tolerance_.atol);
  Row row;
  row.name = spec.name;
  row.kind = spec.kind;
  row.shape = actual.sizes().vec();
  row.ok = close.ok;
  row.mismatched = close.mismatched;
  row.numel = actual.numel();
  row.max_abs = close.max_abs_error;
  row.max_rel = close.max_rel_error;
  row.message = close.message;
  rows_.push_back(std::move(row));
}

void CheckRecorder::SetLogitsColumns(int64_t largest, int64_t allowed) {
  largest_logits_columns_ = largest;
  allowed_logits_columns_ = allowed;
}

absl::StatusOr<CheckResult> CheckRecorder::Finish(
    const std::vector<ExpectedCollective>& expected) {
  CHECK_EQ(rows_.size(), tensors_.size())
      << name_ << ": not every tensor was compared";
  CHECK(counter_ != nullptr) << name_ << ": collectives were never counted";
  const int n = comm_.world_size();
  const int me = comm_.rank();

  std::vector<CollectiveCheck> collectives =
      CompareCollectives(counter_->counts(), expected);
  const bool collectives_ok =
      std::all_of(collectives.begin(), collectives.end(),
                  [](const CollectiveCheck& c) { return c.ok(); });

  // This rank's summary: per tensor (failed, mismatched, max abs, max rel,
  // elements), then (collectives failed, largest logits columns, 0, 0, 0).
  const int64_t summary_rows = static_cast<int64_t>(rows_.size()) + 1;
  at::Tensor mine = at::zeros({summary_rows, 5}, at::kDouble);
  auto m = mine.accessor<double, 2>();
  for (size_t i = 0; i < rows_.size(); ++i) {
    m[i][0] = rows_[i].ok ? 0 : 1;
    m[i][1] = static_cast<double>(rows_[i].mismatched);
    m[i][2] = rows_[i].max_abs;
    m[i][3] = rows_[i].max_rel;
    m[i][4] = static_cast<double>(rows_[i].numel);
  }
  m[summary_rows - 1][0] = collectives_ok ? 0 : 1;
  m[summary_rows - 1][1] = static_cast<double>(largest_logits_columns_);
  at::Tensor all = at::empty({n, summary_rows, 5}, at::kDouble);
  RETURN_IF_ERROR(Annotate(comm_.AllGather(mine, all),
                           absl::StrCat(name_, ": gathering the verdict")));
  auto a = all.accessor<double, 3>();

  CheckResult result;
  result.set_name(name_);
  result.set_world_size(n);
  bool pass = collectives_ok;
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& row = rows_[i];
    TensorCheck* check = result.add_tensors();
    check->set_name(row.name);
    check->set_kind(std::string(TensorKindName(row.kind)));
    for (int64_t size : row.shape) check->add_shape(size);
    double max_abs = 0, max_rel = 0;
    int64_t mismatched = 0;
    std::vector<std::string> failures;
    for (int p = 0; p < n; ++p) {
      max_abs = std::max(max_abs, a[p][i][2]);
      max_rel = std::max(max_rel, a[p][i][3]);
      mismatched += static_cast<int64_t>(a[p][i][1]);
      if (a[p][i][0] == 0) continue;
      check->add_failed_ranks(p);
      failures.push_back(
          p == me ? absl::StrCat("rank ", p, ": ", row.message)
                  : absl::StrCat("rank ", p, ": ",
                                 static_cast<int64_t>(a[p][i][1]), "/",
                                 static_cast<int64_t>(a[p][i][4]),
                                 " elements not close, max abs error ",
                                 a[p][i][2]));
    }
    check->set_max_abs_error(max_abs);
    check->set_max_rel_error(max_rel);
    check->set_mismatched(mismatched);
    check->set_ok(failures.empty());
    check->set_message(failures.empty() ? row.message
                                        : absl::StrJoin(failures, "; "));
    pass = pass && check->ok();
  }
  int64_t largest_logits = -1;
  for (int p = 0; p < n; ++p) {
    if (a[p][summary_rows - 1][0] != 0) {
      result.add_collective_mismatch_ranks(p);
      pass = false;
    }
    largest_logits = std::max(
        largest_logits, static_cast<int64_t>(a[p][summary_rows - 1][1]));
  }
  if (allowed_logits_columns_ >= 0) {
    result.set_largest_logits_columns(static_cast<int32_t>(largest_logits));
    result.set_vocab_shard_columns(
        static_cast<int32_t>(allowed_logits_columns_));
    if (largest_logits > allowed_logits_columns_) pass = false;
  }
  for (CollectiveCheck& c : collectives) *result.add_collectives() = c;
  if (hooks_.enabled() &&
      std::any_of(tensors_.begin(), tensors_.end(), [&](const TensorSpec& s) {
        return s.name == hooks_.perturb_tensor;
      })) {
    result.set_perturbed(absl::StrCat("rank ", hooks_.perturb_rank, ": ",
                                      hooks_.perturb_tensor, " + ",
                                      hooks_.perturb_delta));
  }
  result.set_pass(pass);
  result.set_seconds(absl::ToDoubleSeconds(absl::Now() - start_));
  return result;
}

}  // namespace mtb::equivalence
