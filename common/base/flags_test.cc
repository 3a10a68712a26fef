#include "common/base/flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, test_count, 1, "a count");
ABSL_FLAG(bool, test_switch, false, "a switch");
ABSL_FLAG(std::string, test_name, "default", "a name");
ABSL_FLAG(double, test_ratio, 0.5, "a ratio");

namespace mtb {
namespace {

absl::StatusOr<std::vector<std::string>> Parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return ParseCommandLine(static_cast<int>(argv.size()), argv.data());
}

TEST(Flags, ParsesAllSpellingsAndKeepsPositionals) {
  auto positional = Parse({"tool", "inspect", "--test_count=3", "--test_switch",
                           "--test_name", "x y", "path", "--", "--literal"});
  ASSERT_TRUE(positional.ok()) << positional.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 3);
  EXPECT_TRUE(absl::GetFlag(FLAGS_test_switch));
  EXPECT_EQ(absl::GetFlag(FLAGS_test_name), "x y");
  EXPECT_EQ(*positional,
            (std::vector<std::string>{"tool", "inspect", "path", "--literal"}));
  EXPECT_TRUE(FlagWasSet("test_count"));
  ASSERT_TRUE(Parse({"tool", "--notest_switch"}).ok());
  EXPECT_FALSE(absl::GetFlag(FLAGS_test_switch));
}

TEST(Flags, AliasSetsTheCanonicalFlag) {
  RegisterFlagAlias("test_count_alias", "test_count");
  ASSERT_TRUE(Parse({"tool", "--test_count_alias=7"}).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_test_count), 7);
}

TEST(Flags, UnknownFlagIsInvalidArgumentNamingIt) {
  auto result = Parse({"tool", "--no_such_flag=1"});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(result.status().message(), "unknown flag --no_such_flag (see --help)");
}

TEST(Flags, BadValueNamesTheFlagAndTheValue) {
  auto result = Parse({"tool", "--test_count=abc"});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("--test_count: 'abc'"),
            std::string::npos)
      << result.status().message();
  EXPECT_EQ(Parse({"tool", "--test_ratio"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Flags, ExitCodes) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("x")), 2);
  EXPECT_EQ(ExitCodeFor(absl::DataLossError("x")), 1);
  // A deterministic failure keeps its code and message but exits 3, also
  // when it was a usage-looking code.
  const absl::Status marked = MarkDeterministic(absl::AbortedError("nan"));
  EXPECT_EQ(marked.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(marked.message(), "nan");
  EXPECT_TRUE(IsDeterministic(marked));
  EXPECT_EQ(ExitCodeFor(marked), kExitDeterministicFailure);
  EXPECT_EQ(ExitCodeFor(MarkDeterministic(absl::InvalidArgumentError("x"))), 3);
  EXPECT_FALSE(IsDeterministic(absl::AbortedError("nan")));
  EXPECT_TRUE(MarkDeterministic(absl::OkStatus()).ok());
}

TEST(FlagsDeathTest, ParseOrExitExitsTwoWithOneLine) {
  std::string arg0 = "tool", arg1 = "--test_count=oops";
  char* argv[] = {arg0.data(), arg1.data()};
  EXPECT_EXIT(ParseCommandLineOrExit(2, argv, "usage"),
              ::testing::ExitedWithCode(2), "tool: invalid value for --test_count");
}

TEST(FlagsDeathTest, AStrayPositionalArgumentExitsTwoNamingIt) {
  std::string arg0 = "tool", arg1 = "--test_count=3", arg2 = "foo.bin";
  char* argv[] = {arg0.data(), arg1.data(), arg2.data()};
  EXPECT_EXIT(ParseCommandLineOrExit(3, argv, "usage"), ::testing::ExitedWithCode(2),
              "tool: unexpected argument 'foo.bin': this tool takes flags only");
}

TEST(Flags, OperandsAreReturnedToToolsThatTakeThem) {
  std::string arg0 = "tool", arg1 = "a.json", arg2 = "--", arg3 = "-b.json";
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), arg3.data()};
  EXPECT_EQ(ParseCommandLineOrExit(4, argv, "usage", Operands::kAllowed),
            (std::vector<std::string>{"tool", "a.json", "-b.json"}));
  EXPECT_TRUE(RefuseOperands({"tool"}).ok());
  const absl::Status refused = RefuseOperands({"tool", "x", "y"});
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "unexpected argument 'x' (and 1 more): this tool takes flags only (--name=value; "
            "see --help)");
}

}  // namespace
}  // namespace mtb
