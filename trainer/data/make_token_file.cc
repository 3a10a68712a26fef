// make_token_file: concatenates text files and writes them as an llm.c token
// file with one token per byte (vocabulary 256).
//   bazel run //trainer:make_token_file -- --out=OUT.bin FILE...
// (the exact command for the shipped corpus is in testdata/README.md).

#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/results/atomic_file.h"
#include "common/base/flags.h"
#include "common/results/output_path.h"
#include "trainer/data/token_file.h"

ABSL_FLAG(std::string, out, "", "the token file to write");

namespace {

constexpr char kProgram[] = "make_token_file";

int UsageError(const std::string& message) {
  std::cerr << kProgram << ": " << message << "\n";
  return mtb::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args = mtb::ParseCommandLineOrExit(
      argc, argv, "writes text files as a byte-level llm.c token file: "
                  "make_token_file --out=PATH FILE...",
      mtb::Operands::kAllowed);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty() || args.size() < 2) {
    return UsageError("needs --out=PATH and at least one input FILE");
  }
  const std::string path = mtb::ResolveUserPath(out);
  std::vector<std::string> inputs;
  std::vector<mtb::NamedPath> named_inputs;
  for (size_t i = 1; i < args.size(); ++i) {
    inputs.push_back(mtb::ResolveUserPath(args[i]));
    named_inputs.push_back({absl::StrCat("input ", args[i]), inputs.back()});
  }
  // Writing over an input would destroy the text it is made from.
  if (absl::Status distinct =
          mtb::CheckOutputsAgainstInputs({{"--out", path}}, named_inputs);
      !distinct.ok()) {
    return UsageError(std::string(distinct.message()));
  }
  if (absl::Status writable = mtb::CheckOutputWritable("out", path);
      !writable.ok()) {
    return UsageError(std::string(writable.message()));
  }
  std::string text;
  for (const std::string& input : inputs) {
    absl::StatusOr<std::string> contents = mtb::ReadFileToString(input);
    if (!contents.ok()) return UsageError(std::string(contents.status().message()));
    text += *contents;
  }
  if (text.empty()) return UsageError("the inputs hold no bytes: no tokens to write");
  const std::vector<uint16_t> tokens = mtb::BytesToTokens(text);
  if (absl::Status status =
          mtb::WriteFileAtomically(path, mtb::EncodeTokenFile(tokens));
      !status.ok()) {
    std::cerr << kProgram << ": " << status.message() << "\n";
    return mtb::kExitFailure;
  }
  std::cout << "wrote " << tokens.size() << " tokens from " << inputs.size()
            << " file(s) to " << path << "\n";
  return mtb::kExitOk;
}
