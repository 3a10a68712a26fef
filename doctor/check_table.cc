#include "doctor/check_table.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/report/report.h"

namespace mtb::doctor {

DoctorCheck MakeCheck(const std::string& category, const std::string& name,
                      const std::string& status, const std::string& value,
                      const std::string& fix) {
  DoctorCheck check;
  check.set_category(category);
  check.set_name(name);
  check.set_status(status);
  check.set_value(value);
  check.set_fix(fix);
  return check;
}

std::string Verdict(const DoctorResult& result) {
  std::vector<std::string> failed;
  for (const DoctorCheck& check : result.checks()) {
    if (check.status() == "fail") failed.push_back(check.name());
  }
  return failed.empty() ? "pass" : absl::StrCat("fail: ", absl::StrJoin(failed, ", "));
}

std::string RenderTable(const DoctorResult& result) {
  MarkdownTable table;
  table.headers = {"category", "check", "status", "value", "fix"};
  for (const DoctorCheck& check : result.checks()) {
    std::string status = check.status();
    if (status != "pass") status = absl::AsciiStrToUpper(status);
    table.rows.push_back(
        {check.category(), check.name(), status, check.value(), check.fix()});
  }
  return table.Render();
}

}  // namespace mtb::doctor
