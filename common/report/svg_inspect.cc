#include "common/report/svg_inspect.h"

#include <cstdlib>

namespace mtb {
namespace {

// The value of attribute `name` in the tag text `tag`, or "" when absent.
std::string Attribute(const std::string& tag, const std::string& name) {
  const std::string key = " " + name + "=\"";
  const size_t start = tag.find(key);
  if (start == std::string::npos) return "";
  const size_t value = start + key.size();
  return tag.substr(value, tag.find('"', value) - value);
}

// The tag that starts at `at` (from '<' up to, not including, '>').
std::string TagAt(const std::string& svg, size_t at) {
  return svg.substr(at, svg.find('>', at) - at);
}

}  // namespace

std::vector<SvgSeriesStyle> SeriesStyles(const std::string& svg) {
  std::vector<SvgSeriesStyle> styles;
  const std::string open = "<g class=\"series\"";
  for (size_t at = svg.find(open); at != std::string::npos;
       at = svg.find(open, at + 1)) {
    SvgSeriesStyle style;
    style.name = Attribute(TagAt(svg, at), "data-name");
    const size_t group_end = svg.find("</g>", at);
    const size_t polyline = svg.find("<polyline", at);
    if (polyline != std::string::npos && polyline < group_end) {
      const std::string tag = TagAt(svg, polyline);
      style.stroke = Attribute(tag, "stroke");
      style.dasharray = Attribute(tag, "stroke-dasharray");
    }
    styles.push_back(style);
  }
  return styles;
}

SvgRect RectOfClass(const std::string& svg, const std::string& css_class) {
  SvgRect rect;
  const size_t at = svg.find("<rect class=\"" + css_class + "\"");
  if (at == std::string::npos) return rect;
  const std::string tag = TagAt(svg, at);
  rect.found = true;
  rect.x = std::atof(Attribute(tag, "x").c_str());
  rect.y = std::atof(Attribute(tag, "y").c_str());
  rect.width = std::atof(Attribute(tag, "width").c_str());
  rect.height = std::atof(Attribute(tag, "height").c_str());
  return rect;
}

std::vector<std::string> TextsOfClass(const std::string& svg,
                                      const std::string& css_class) {
  std::vector<std::string> texts;
  const std::string open = "<text class=\"" + css_class + "\"";
  for (size_t at = svg.find(open); at != std::string::npos;
       at = svg.find(open, at + 1)) {
    const size_t content = svg.find('>', at) + 1;
    texts.push_back(svg.substr(content, svg.find("</text>", content) - content));
  }
  return texts;
}

}  // namespace mtb
