// Test-only: a minimal XML well-formedness check for the SVG files our tools
// write (common/report/report.h). Not a parser: it accepts the subset RenderSvg emits
// and rejects what a browser would choke on.
#ifndef MTB_COMMON_REPORT_XML_CHECK_H_
#define MTB_COMMON_REPORT_XML_CHECK_H_

#include <string>

namespace mtb {

// True when every tag opened is closed in order, every attribute is quoted,
// and no stray '<' or '&' appears in text (an optional "<?xml ...?>" prolog is
// skipped). On false, `problem` says what was found first.
bool IsWellFormedXml(const std::string& xml, std::string* problem);

}  // namespace mtb

#endif  // MTB_COMMON_REPORT_XML_CHECK_H_
