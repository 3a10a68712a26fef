#include "common/libtorch/torch_status.h"

#include <new>
#include <stdexcept>
#include <string>

#include "ATen/ATen.h"
#include "c10/util/Exception.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(TorchStatus, ShapeErrorFromLibTorchBecomesStatusWithOperation) {
  absl::Status status = CallGuarded("matmul", [] {
    at::Tensor a = at::ones({2, 3});
    at::Tensor b = at::ones({4, 5});
    (void)at::matmul(a, b);
  });
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.message().substr(0, 8), "matmul: ");
  EXPECT_NE(status.message().find("cannot be multiplied"), std::string::npos)
      << status.message();
  // Without c10's C++ backtrace: one line.
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << status.message();
}

TEST(TorchStatus, C10ValueErrorIsInvalidArgument) {
  absl::Status status = CallGuarded("op", []() -> absl::Status {
    TORCH_CHECK_VALUE(false, "bad value");
    return absl::OkStatus();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(TorchStatus, GlooStyleTimeoutIsDeadlineExceeded) {
  absl::Status status = StatusFromException(
      "all_reduce", std::runtime_error("[pair.cc:598] Timed out waiting 2000ms "
                                       "for recv operation to complete"));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(status.message().substr(0, 12), "all_reduce: ");
}

TEST(TorchStatus, ClosedConnectionIsUnavailable) {
  absl::Status status = StatusFromException(
      "recv", std::runtime_error("Connection closed by peer [127.0.0.1]:1234"));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
}

TEST(TorchStatus, BadAllocIsResourceExhausted) {
  EXPECT_EQ(StatusFromException("alloc", std::bad_alloc()).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(TorchStatus, ALibTorchAllocationBeyondTheAddressSpaceIsOutOfMemory) {
  // 2^50 bytes: no host has it, so the allocation itself fails (overcommit
  // only lets allocations that could fit succeed) and LibTorch throws.
  const absl::Status status = CallGuarded("the forward pass", [] {
    (void)at::empty({int64_t{1} << 48}, at::kFloat);
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_EQ(status.message().rfind("the forward pass: out of memory: "
                                   "DefaultCPUAllocator: can't allocate memory",
                                   0),
            0u)
      << status.message();
  EXPECT_EQ(status.message().find('\n'), std::string::npos) << "one line";
}

TEST(TorchStatus, ValueReturningCallIsWrappedInStatusOr) {
  absl::StatusOr<int> ok = CallGuarded("sum", [] { return 3; });
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 3);
  absl::StatusOr<int> failed = CallGuarded("sum", []() -> int {
    throw std::invalid_argument("negative");
  });
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(failed.status().message(), "sum: negative");
}

TEST(TorchStatus, StatusOrReturningCallPassesThrough) {
  absl::StatusOr<int> result = CallGuarded(
      "x", []() -> absl::StatusOr<int> { return absl::NotFoundError("gone"); });
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
}

TEST(TorchStatus, NonStdExceptionIsInternal) {
  absl::Status status = CallGuarded("odd", [] { throw 42; });
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message().substr(0, 5), "odd: ");
}

}  // namespace
}  // namespace mtb
