// A doctor check's constructor, the verdict over a result and its Markdown
// table: torch-free, shared by doctor and doctor_gpu.
#ifndef MTB_DOCTOR_CHECK_TABLE_H_
#define MTB_DOCTOR_CHECK_TABLE_H_

#include <string>

#include "doctor/doctor.pb.h"

namespace mtb::doctor {

DoctorCheck MakeCheck(const std::string& category, const std::string& name,
                      const std::string& status, const std::string& value,
                      const std::string& fix = "");

// "pass" when no check failed (warnings allowed), else "fail: " + names.
std::string Verdict(const DoctorResult& result);

// The Markdown table: category | check | status | value | fix.
std::string RenderTable(const DoctorResult& result);

}  // namespace mtb::doctor

#endif  // MTB_DOCTOR_CHECK_TABLE_H_
