// make_token_file: concatenates text files and writes them as an llm.c token
// file with one token per byte (vocabulary 256).
//   bazel run //trainer:make_token_file -- --out=OUT.bin FILE...
// (the exact command for the shipped corpus is in testdata/README.md).
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "common/results/atomic_file.h"
#include "common/base/flags.h"
#include "common/results/output_path.h"
#include "trainer/token_file.h"

ABSL_FLAG(std::string, out, "", "the token file to write");

int main(int argc, char** argv) {
  const std::vector<std::string> args = mtb::ParseCommandLineOrExit(
      argc, argv, "writes text files as a byte-level llm.c token file: "
                  "make_token_file --out=PATH FILE...");
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty() || args.size() < 2) {
    std::cerr << "make_token_file: needs --out=PATH and at least one input\n";
    return mtb::kExitUsage;
  }
  std::string text;
  for (size_t i = 1; i < args.size(); ++i) {
    absl::StatusOr<std::string> contents =
        mtb::ReadFileToString(mtb::ResolveUserPath(args[i]));
    if (!contents.ok()) {
      std::cerr << "make_token_file: " << contents.status().message() << "\n";
      return mtb::kExitUsage;
    }
    text += *contents;
  }
  const std::vector<uint16_t> tokens = mtb::BytesToTokens(text);
  const std::string path = mtb::ResolveUserPath(out);
  if (absl::Status status =
          mtb::WriteFileAtomically(path, mtb::EncodeTokenFile(tokens));
      !status.ok()) {
    return mtb::ReportAndExitCode("make_token_file", status);
  }
  std::cout << "wrote " << tokens.size() << " tokens from " << args.size() - 1
            << " file(s) to " << path << "\n";
  return mtb::kExitOk;
}
