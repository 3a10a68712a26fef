// What a test-support check found (ddp_process_check.h, memory_check.h): one
// entry per failed check, tagged with the kind of check, plus measurement
// lines worth printing either way, so a test can assert that a broken run
// fails exactly the check it should.
#ifndef MTB_TRAINER_TESTS_CHECK_REPORT_H_
#define MTB_TRAINER_TESTS_CHECK_REPORT_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"

namespace mtb {

template <typename CheckKind>
struct CheckReport {
  using Check = CheckKind;
  struct Failure {
    Check check;
    std::string message;
  };
  std::vector<Failure> failures;
  std::vector<std::string> measurements;

  bool ok() const { return failures.empty(); }
  bool Failed(Check check) const {
    return std::any_of(failures.begin(), failures.end(),
                       [check](const Failure& f) { return f.check == check; });
  }
  // Every failure, then every measurement, one per line.
  std::string Describe() const {
    std::vector<std::string> lines;
    for (const Failure& f : failures) lines.push_back("FAILED " + f.message);
    lines.insert(lines.end(), measurements.begin(), measurements.end());
    return absl::StrJoin(lines, "\n");
  }
};

}  // namespace mtb

#endif  // MTB_TRAINER_TESTS_CHECK_REPORT_H_
