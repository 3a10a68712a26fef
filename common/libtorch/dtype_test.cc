#include "common/libtorch/dtype.h"

#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(Dtype, NamesRoundTrip) {
  for (c10::ScalarType type :
       {c10::ScalarType::Float, c10::ScalarType::Double, c10::ScalarType::Half,
        c10::ScalarType::BFloat16, c10::ScalarType::Char, c10::ScalarType::Byte,
        c10::ScalarType::Short, c10::ScalarType::Int, c10::ScalarType::Long,
        c10::ScalarType::Bool}) {
    absl::StatusOr<c10::ScalarType> parsed = ParseDtype(DtypeName(type));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, type);
  }
  EXPECT_EQ(DtypeName(c10::ScalarType::BFloat16), "bfloat16");
}

TEST(Dtype, AliasesParse) {
  EXPECT_EQ(*ParseDtype("half"), c10::ScalarType::Half);
  EXPECT_EQ(*ParseDtype("long"), c10::ScalarType::Long);
}

TEST(Dtype, UnknownNameIsInvalidArgumentListingNames) {
  absl::StatusOr<c10::ScalarType> parsed = ParseDtype("fp8");
  ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("fp8"), std::string::npos);
  EXPECT_NE(parsed.status().message().find("bfloat16"), std::string::npos);
}

}  // namespace
}  // namespace mtb
