#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "common/results/run_context.h"
#include "common/testdata/test_result.pb.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string base = dir != nullptr ? dir : "/tmp";
  std::string pattern = base + "/results_test.XXXXXX";
  char* made = mkdtemp(pattern.data());
  EXPECT_NE(made, nullptr);
  return pattern;
}

bool Exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

TEST(RunContext, RecordsToolArgvHostCpuAndStartTime) {
  char arg0[] = "/path/to/tool";
  char arg1[] = "--flag=1";
  char* argv[] = {arg0, arg1};
  RunContext context = NewRunContext("tool", 2, argv);
  EXPECT_EQ(context.tool(), "tool");
  ASSERT_EQ(context.argv_size(), 2);
  EXPECT_EQ(context.argv(1), "--flag=1");
  EXPECT_FALSE(context.hostname().empty());
  EXPECT_FALSE(context.cpu_model().empty());
  EXPECT_GT(context.cpu_cores(), 0);
  EXPECT_FALSE(context.git_commit().empty());
#ifdef NDEBUG
  EXPECT_EQ(context.build_mode(), "opt");
#else
  EXPECT_TRUE(context.build_mode() == "fastbuild" ||
              context.build_mode() == "dbg")
      << context.build_mode();
#endif
  EXPECT_FALSE(context.protobuf_version().empty());
  // RFC 3339 UTC: 2026-12-02T13:14:50.123Z
  ASSERT_EQ(context.start_time_utc().size(), 24u) << context.start_time_utc();
  EXPECT_EQ(context.start_time_utc().back(), 'Z');
  EXPECT_TRUE(context.end_time_utc().empty());
  FinishRunContext(&context);
  EXPECT_GE(context.end_time_utc(), context.start_time_utc());
}

TEST(RunContext, ReadsGitCommitOfTheCheckoutAtRunTime) {
  const std::string dir = TempDir();
  const std::string git = "git -C " + dir + " ";
  ASSERT_EQ(std::system((git + "init -q && " + git +
                         "-c user.email=t@t -c user.name=t commit -q "
                         "--allow-empty -m x")
                            .c_str()),
            0);
  setenv("BUILD_WORKSPACE_DIRECTORY", dir.c_str(), 1);
  char arg0[] = "tool";
  char* argv[] = {arg0};
  RunContext clean = NewRunContext("tool", 1, argv);
  EXPECT_EQ(clean.git_commit().size(), 40u) << clean.git_commit();
  EXPECT_FALSE(clean.git_dirty());
  ASSERT_EQ(std::system(("echo a > " + dir + "/f && " + git + "add f").c_str()),
            0);
  RunContext dirty = NewRunContext("tool", 1, argv);
  EXPECT_EQ(dirty.git_commit(), clean.git_commit());
  EXPECT_TRUE(dirty.git_dirty());
  unsetenv("BUILD_WORKSPACE_DIRECTORY");
}

TEST(JsonIo, ResultRoundTripsThroughJsonIncludingRunContext) {
  char arg0[] = "tool";
  char* argv[] = {arg0};
  testing::TestResult result;
  result.set_schema_version(3);
  *result.mutable_context() = NewRunContext("tool", 1, argv);
  result.mutable_context()->set_world_size(4);
  result.mutable_context()->set_backend("gloo");
  FinishRunContext(result.mutable_context());
  auto* row = result.add_rows();
  row->set_name("all_reduce");
  row->set_bytes(int64_t{1} << 40);
  row->set_seconds(0.125);

  const std::string json = ToJson(result);
  // Field names as in the .proto, not lowerCamelCase.
  EXPECT_NE(json.find("\"schema_version\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"start_time_utc\""), std::string::npos) << json;
  testing::TestResult parsed;
  ASSERT_TRUE(FromJson(json, &parsed).ok());
  EXPECT_EQ(parsed.SerializeAsString(), result.SerializeAsString());
}

TEST(JsonIo, UnknownFieldsAndGarbageAreDataLoss) {
  testing::TestResult parsed;
  EXPECT_EQ(FromJson("{\"no_such_field\": 1}", &parsed).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(FromJson("{not json", &parsed).code(),
            absl::StatusCode::kDataLoss);
}

TEST(JsonIo, FileRoundTripAndMissingFileIsNotFound) {
  const std::string dir = TempDir();
  testing::TestResult result;
  result.set_schema_version(1);
  const std::string path = dir + "/sub/dir/result.json";
  ASSERT_TRUE(WriteJsonFile(result, path).ok());
  testing::TestResult parsed;
  ASSERT_TRUE(ReadJsonFile(path, &parsed).ok());
  EXPECT_EQ(parsed.schema_version(), 1);
  absl::Status missing = ReadJsonFile(dir + "/absent.json", &parsed);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("absent.json"), std::string::npos);
}

TEST(AtomicFile, InterruptedWriteLeavesThePreviousFileIntact) {
  const std::string dir = TempDir();
  const std::string path = dir + "/result.json";
  ASSERT_TRUE(WriteFileAtomically(path, "old contents").ok());
  AtomicWriteOptions crash;
  crash.stop_before_rename_for_test = true;
  ASSERT_TRUE(WriteFileAtomically(path, "new contents", crash).ok());
  absl::StatusOr<std::string> contents = ReadFileToString(path);
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(*contents, "old contents");
  // The complete new data sits in a hidden temporary file beside it.
  EXPECT_EQ(std::system(("grep -q 'new contents' " + dir +
                         "/.result.json.tmp.*").c_str()),
            0);
  ASSERT_TRUE(WriteFileAtomically(path, "new contents").ok());
  EXPECT_EQ(*ReadFileToString(path), "new contents");
}

TEST(AtomicFile, UnwritableDirectoryIsAnErrorNamingThePath) {
  absl::Status status =
      WriteFileAtomically("/proc/not_writable/result.json", "x");
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("/proc/not_writable"), std::string::npos)
      << status.message();
}

TEST(OutputPath, RelativePathsResolveAgainstTheBazelRunWorkspace) {
  setenv("BUILD_WORKSPACE_DIRECTORY", "/home/user/checkout", 1);
  EXPECT_EQ(ResolveUserPath("results/x.json"),
            "/home/user/checkout/results/x.json");
  EXPECT_EQ(ResolveUserPath("/abs/x.json"), "/abs/x.json");
  unsetenv("BUILD_WORKSPACE_DIRECTORY");
  EXPECT_EQ(ResolveUserPath("results/x.json"), "results/x.json");
}

TEST(OutputPath, DefaultResultPathNeverNamesAnExistingFile) {
  const std::string dir = TempDir();
  setenv("BUILD_WORKSPACE_DIRECTORY", dir.c_str(), 1);
  const std::string first = DefaultResultPath("tool", "json");
  EXPECT_EQ(first.rfind(dir + "/results/tool_", 0), 0u) << first;
  ASSERT_TRUE(WriteFileAtomically(first, "{}").ok());
  const std::string second = DefaultResultPath("tool", "json");
  EXPECT_NE(second, first);
  EXPECT_FALSE(Exists(second));
  unsetenv("BUILD_WORKSPACE_DIRECTORY");
}

TEST(OutputPath, UnwritableOutputIsRejectedUpFrontNamingTheFlag) {
  const std::string dir = TempDir();
  EXPECT_TRUE(CheckOutputWritable("out", dir + "/new/sub/x.json").ok());
  EXPECT_FALSE(Exists(dir + "/new")) << "a check creates no directory";
  EXPECT_TRUE(CheckOutputWritable("out", "").ok());
  absl::Status status = CheckOutputWritable("out", "/proc/x/y.json");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message().rfind("--out=/proc/x/y.json: cannot write there: ", 0), 0u)
      << status.message();
  absl::Status directory = CheckOutputWritable("plot", dir);
  EXPECT_EQ(directory.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(directory.message().find("is a directory"), std::string::npos);
}

TEST(OutputPath, TheWritableCheckCreatesAFileAndLeavesNothingBehind) {
  const std::string dir = TempDir() + "/probe";
  ASSERT_TRUE(CreateDirectories(dir).ok());
  ASSERT_TRUE(CheckOutputWritable("out", dir + "/r.json").ok());
  absl::StatusOr<std::vector<std::string>> names = ListDirectory(dir);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_TRUE(names->empty()) << (*names)[0];
}

TEST(Paths, ListDirectoryFiltersAndSortsNames) {
  const std::string dir = TempDir() + "/listing";
  ASSERT_TRUE(CreateDirectories(dir).ok());
  for (const char* name : {"flight_b.json", "flight_a.json", "rank_0.log", "flight_c.txt"}) {
    ASSERT_TRUE(WriteFileAtomically(dir + "/" + name, "x").ok()) << name;
  }
  EXPECT_EQ(*ListDirectory(dir, "flight_", ".json"),
            (std::vector<std::string>{"flight_a.json", "flight_b.json"}));
  EXPECT_EQ(ListDirectory(dir)->size(), 4u);
  EXPECT_EQ(ListDirectory(dir + "/missing").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(OutputPath, TheDirectoryCheckCreatesNothingAndRefusesAFileOrAnUnwritablePlace) {
  const std::string dir = TempDir() + "/dirs";
  EXPECT_TRUE(CheckDirectoryWritable("checkpoint_dir", dir + "/a/b").ok());
  EXPECT_FALSE(Exists(dir)) << "a check creates no directory";
  ASSERT_TRUE(CreateDirectories(dir).ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/file", "x").ok());
  absl::Status file = CheckDirectoryWritable("checkpoint_dir", dir + "/file");
  EXPECT_EQ(file.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(file.message(), "--checkpoint_dir=" + dir + "/file: cannot write there: it is not a directory");
  absl::Status proc = CheckDirectoryWritable("checkpoint_dir", "/proc/x");
  EXPECT_EQ(proc.message().rfind("--checkpoint_dir=/proc/x: cannot write there: ", 0), 0u)
      << proc.message();
}

TEST(OutputPath, ACompanionIsReplacedByItsOwnResultOnlyNeverOverAnotherFile) {
  const std::string dir = TempDir() + "/companions";
  ASSERT_TRUE(CreateDirectories(dir).ok());
  const std::string result = dir + "/r.json";
  const std::string md = dir + "/r.md";
  absl::StatusOr<std::string> first = WriteCompanionFile(md, result, "# one\n");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, "");
  EXPECT_EQ(*ReadFileToString(md), "<!-- mtb companion of r.json -->\n# one\n");
  // A rerun with the same --out replaces it.
  ASSERT_TRUE(WriteCompanionFile(md, result, "# two\n").ok());
  EXPECT_EQ(*ReadFileToString(md), "<!-- mtb companion of r.json -->\n# two\n");
  // Another result's companion, or the user's own file, is kept and named.
  const std::string other = dir + "/other.json";
  ASSERT_TRUE(WriteCompanionFile(dir + "/other.md", other, "# other\n").ok());
  for (const std::string& foreign : {dir + "/other.md", dir + "/notes.md"}) {
    if (foreign == dir + "/notes.md") {
      ASSERT_TRUE(WriteFileAtomically(foreign, "my notes\n").ok());
    }
    const std::string before = *ReadFileToString(foreign);
    absl::StatusOr<std::string> kept =
        WriteCompanionFile(foreign, result, "# clobber\n");
    ASSERT_TRUE(kept.ok()) << kept.status();
    EXPECT_EQ(*kept, "kept " + foreign + ": it exists and was not written for " +
                         result + " (remove it, or choose another --out)");
    EXPECT_EQ(*ReadFileToString(foreign), before);
  }
}

TEST(OutputPath, TheMarkerFollowsAnXmlDeclaration) {
  EXPECT_EQ(WithCompanionMarker("<?xml version=\"1.0\"?>\n<svg/>\n", "/a/r.json"),
            "<?xml version=\"1.0\"?>\n<!-- mtb companion of r.json -->\n<svg/>\n");
  EXPECT_EQ(WithCompanionMarker("<svg/>", "r.json"),
            "<!-- mtb companion of r.json -->\n<svg/>");
}

TEST(OutputPath, ReplaceExtension) {
  EXPECT_EQ(ReplaceExtension("results/a.json", "md"), "results/a.md");
  EXPECT_EQ(ReplaceExtension("results.d/a", "svg"), "results.d/a.svg");
  EXPECT_EQ(ReplaceExtension(".hidden", "md"), ".hidden.md");
}

}  // namespace
}  // namespace mtb
