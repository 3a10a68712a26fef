// Test-only: reads back what RenderSvg (common/report/report.h) promises, so
// tests of every tool's plots check the same things the same way: each
// series' stroke style, the plot and legend rectangles, the tick labels. Not an
// SVG parser: it understands the elements RenderSvg writes.
#ifndef MTB_COMMON_REPORT_SVG_INSPECT_H_
#define MTB_COMMON_REPORT_SVG_INSPECT_H_

#include <string>
#include <vector>

namespace mtb {

struct SvgSeriesStyle {
  std::string name;       // the <g class="series">'s data-name
  std::string stroke;     // its polyline's stroke colour
  std::string dasharray;  // its polyline's stroke-dasharray ("none": solid)
};

// Every series, in document order.
std::vector<SvgSeriesStyle> SeriesStyles(const std::string& svg);

struct SvgRect {
  bool found = false;
  double x = 0, y = 0, width = 0, height = 0;
};

// The first <rect class="css_class">.
SvgRect RectOfClass(const std::string& svg, const std::string& css_class);

// The contents of every <text class="css_class">, in document order (XML
// escapes left as written).
std::vector<std::string> TextsOfClass(const std::string& svg,
                                      const std::string& css_class);

}  // namespace mtb

#endif  // MTB_COMMON_REPORT_SVG_INSPECT_H_
