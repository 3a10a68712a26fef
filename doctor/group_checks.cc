#include "doctor/group_checks.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "common/report/report.h"
#include "doctor/checks.h"

namespace mtb::doctor {
namespace {

constexpr char kRendezvous[] = "rendezvous";

// Rank r sends (r + p + 1) rows to rank p, each row [r, p, j].
int64_t RowsFromTo(int from, int to) { return from + to + 1; }

// 1 when every rank's flag is 1 (an all_reduce of the flags), so every rank
// reports the same verdict.
bool AllRanksAgree(collective::Communicator& communicator, bool ok) {
  at::Tensor flag = at::full({1}, ok ? 1.0 : 0.0, at::kFloat);
  if (!communicator.AllReduce(flag, collective::ReduceOp::kMin).ok()) return false;
  return flag.item<float>() == 1.0f;
}

}  // namespace

std::vector<DoctorCheck> CheckGroup(collective::Communicator& communicator,
                                    const GroupCheckOptions& options) {
  std::vector<DoctorCheck> checks;
  const int n = communicator.world_size();
  const int rank = communicator.rank();

  const std::string joined =
      absl::StrCat(n, " ranks joined (", communicator.device_description(), ")");
  if (options.expected_world_size > 0 && options.expected_world_size != n) {
    checks.push_back(MakeCheck(
        kRendezvous, "world size", "fail",
        absl::StrCat(joined, ", --expected_world_size=",
                     options.expected_world_size),
        "start --nproc ranks on each of --nnodes nodes so that the product is "
        "the expected world size"));
  } else {
    checks.push_back(MakeCheck(kRendezvous, "world size", "pass", joined));
  }

  // all_reduce: integer-valued fp32, exact at any order of summation.
  {
    const int64_t count = 1024;
    at::Tensor values =
        at::arange(count, at::kFloat).remainder(7).add(1).mul(rank + 1);
    const absl::Status status = communicator.AllReduce(values);
    const at::Tensor expected =
        at::arange(count, at::kFloat).remainder(7).add(1).mul(n * (n + 1) / 2.0);
    const bool exact = status.ok() && at::equal(values, expected);
    const bool all = AllRanksAgree(communicator, exact);
    checks.push_back(MakeCheck(
        kRendezvous, "all_reduce", all ? "pass" : "fail",
        all ? absl::StrCat("sum of ", count, " fp32 over ", n, " ranks: exact")
            : (status.ok() ? std::string("wrong sum on some rank")
                           : std::string(status.message())),
        all ? "" : "a transport that corrupts data: run comm_bench --check=1"));
  }

  // all_to_allv with uneven counts: every received row names its sender.
  {
    std::vector<int64_t> send_counts, recv_counts;
    int64_t send_rows = 0, recv_rows = 0;
    for (int p = 0; p < n; ++p) {
      send_counts.push_back(RowsFromTo(rank, p));
      recv_counts.push_back(RowsFromTo(p, rank));
      send_rows += send_counts.back();
      recv_rows += recv_counts.back();
    }
    at::Tensor input = at::empty({send_rows, 3}, at::kFloat);
    int64_t row = 0;
    for (int p = 0; p < n; ++p) {
      for (int64_t j = 0; j < send_counts[p]; ++j, ++row) {
        input[row][0] = rank;
        input[row][1] = p;
        input[row][2] = static_cast<float>(j);
      }
    }
    at::Tensor output = at::full({recv_rows, 3}, -1.0, at::kFloat);
    const absl::Status status =
        communicator.AllToAllV(input, output, send_counts, recv_counts);
    if (options.testonly_corrupt && rank == 1 && recv_rows > 0) {
      output[0][2] += 1;
    }
    at::Tensor expected = at::empty({recv_rows, 3}, at::kFloat);
    row = 0;
    for (int p = 0; p < n; ++p) {
      for (int64_t j = 0; j < recv_counts[p]; ++j, ++row) {
        expected[row][0] = p;
        expected[row][1] = rank;
        expected[row][2] = static_cast<float>(j);
      }
    }
    const bool exact = status.ok() && at::equal(output, expected);
    const bool all = AllRanksAgree(communicator, exact);
    checks.push_back(MakeCheck(
        kRendezvous, "all_to_allv", all ? "pass" : "fail",
        all ? absl::StrCat("uneven rows (r + p + 1 from r to p): every row from "
                           "its sender")
            : (status.ok() ? std::string("rows misrouted on some rank")
                           : std::string(status.message())),
        all ? "" : "a transport that misroutes data: run comm_bench --check=1"));
  }

  // Bandwidth: busbw of a large all_reduce (nccl-tests' 2(n-1)/n factor).
  if (n > 1) {
    at::Tensor buffer =
        at::ones({options.bandwidth_bytes / 4}, at::kFloat);
    absl::Status status = communicator.AllReduce(buffer);  // warm-up
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < options.bandwidth_iters && status.ok(); ++i) {
      status = communicator.AllReduce(buffer);
    }
    const double seconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - start)
                               .count() /
                           options.bandwidth_iters;
    const double busbw = 2.0 * (n - 1) / n *
                         static_cast<double>(options.bandwidth_bytes) /
                         seconds / 1e9;
    if (!status.ok()) {
      checks.push_back(MakeCheck(kRendezvous, "bandwidth", "fail",
                                 std::string(status.message())));
    } else {
      DoctorCheck check = MakeCheck(
          kRendezvous, "bandwidth", "pass",
          absl::StrCat("all_reduce ", FormatByteAmount(options.bandwidth_bytes),
                       " fp32: busbw ", FormatSignificant(busbw, 3),
                       " GB/s (mean of ", options.bandwidth_iters, ")"));
      check.set_measured(busbw);
      check.set_unit("GB/s");
      checks.push_back(check);
    }
  }
  return checks;
}

}  // namespace mtb::doctor
