#include "common/report/xml_check.h"

#include <regex>
#include <string>
#include <vector>

namespace mtb {

bool IsWellFormedXml(const std::string& xml, std::string* problem) {
  std::vector<std::string> open;
  size_t pos = 0;
  if (xml.rfind("<?xml", 0) == 0) pos = xml.find("?>") + 2;
  const std::regex tag_re(R"(^<(/?)([A-Za-z][\w:-]*)((\s+[\w:-]+="[^"<]*")*)\s*(/?)>)");
  const std::regex entity_re("^&(amp|lt|gt|quot|apos);");
  while (pos < xml.size()) {
    size_t lt = xml.find('<', pos);
    std::string text = xml.substr(pos, lt == std::string::npos ? std::string::npos : lt - pos);
    for (size_t amp = text.find('&'); amp != std::string::npos; amp = text.find('&', amp + 1)) {
      if (!std::regex_search(text.substr(amp), entity_re)) {
        *problem = "bad entity in text: " + text;
        return false;
      }
    }
    if (lt == std::string::npos) break;
    size_t gt = xml.find('>', lt);
    if (gt == std::string::npos) {
      *problem = "unterminated tag";
      return false;
    }
    const std::string tag = xml.substr(lt, gt - lt + 1);
    std::smatch match;
    if (!std::regex_match(tag, match, tag_re)) {
      *problem = "malformed tag: " + tag;
      return false;
    }
    const bool closing = match[1] == "/";
    const bool self_closing = match[5] == "/";
    const std::string name = match[2];
    if (closing) {
      if (open.empty() || open.back() != name) {
        *problem = "mismatched </" + name + ">";
        return false;
      }
      open.pop_back();
    } else if (!self_closing) {
      open.push_back(name);
    }
    pos = gt + 1;
  }
  if (!open.empty()) {
    *problem = "unclosed <" + open.back() + ">";
    return false;
  }
  return true;
}

}  // namespace mtb
