#include "common/base/status.h"

#include <string>

#include "gtest/gtest.h"

namespace mtb {
namespace {

absl::Status FailsWith(absl::StatusCode code) {
  return absl::Status(code, "inner");
}

absl::Status PropagatesFirstError(bool* reached_end) {
  RETURN_IF_ERROR(absl::OkStatus());
  RETURN_IF_ERROR(FailsWith(absl::StatusCode::kNotFound));
  *reached_end = true;
  return absl::OkStatus();
}

absl::StatusOr<int> Twice(absl::StatusOr<int> input) {
  ASSIGN_OR_RETURN(int value, std::move(input));
  return 2 * value;
}

absl::StatusOr<std::string> AssignsToExistingVariable() {
  std::string text = "old";
  ASSIGN_OR_RETURN(text, absl::StatusOr<std::string>("new"));
  return text;
}

TEST(Status, ReturnIfErrorReturnsTheFirstError) {
  bool reached_end = false;
  absl::Status status = PropagatesFirstError(&reached_end);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(reached_end);
}

TEST(Status, AssignOrReturnUnwrapsValues) {
  absl::StatusOr<int> doubled = Twice(21);
  ASSERT_TRUE(doubled.ok());
  EXPECT_EQ(*doubled, 42);
}

TEST(Status, AssignOrReturnPropagatesErrors) {
  absl::StatusOr<int> doubled = Twice(absl::DataLossError("corrupt"));
  EXPECT_EQ(doubled.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(doubled.status().message(), "corrupt");
}

TEST(Status, AssignOrReturnAssignsToAnExistingVariable) {
  EXPECT_EQ(*AssignsToExistingVariable(), "new");
}

TEST(Status, AnnotatePrefixesMessageAndKeepsCode) {
  absl::Status status =
      Annotate(absl::NotFoundError("no such file"), "reading x.json");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "reading x.json: no such file");
  EXPECT_TRUE(Annotate(absl::OkStatus(), "anything").ok());
}

TEST(Status, AnnotateKeepsPayloads) {
  absl::Status status = absl::AbortedError("nan");
  status.SetPayload("test/kind", absl::Cord("deterministic"));
  const absl::Status annotated = Annotate(status, "rank 1");
  EXPECT_EQ(annotated.message(), "rank 1: nan");
  ASSERT_TRUE(annotated.GetPayload("test/kind").has_value());
  EXPECT_EQ(std::string(*annotated.GetPayload("test/kind")), "deterministic");
}

}  // namespace
}  // namespace mtb
