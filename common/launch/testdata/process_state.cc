#include "common/launch/testdata/process_state.h"

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace mtb {

bool ProcessIsGone(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!stat || !std::getline(stat, line)) return true;
  // "pid (comm) S ...": the state follows the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return true;
  const char state = line[close + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace mtb
