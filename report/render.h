// //report's output: one Markdown document comparing result files side by
// side (trainer runs by strategy and world size, comm_bench busbw by op and
// size across runs, tp_check verdicts), and SVGs where a curve says more.
#ifndef MTB_REPORT_RENDER_H_
#define MTB_REPORT_RENDER_H_

#include <string>
#include <vector>

#include "report/results_set.h"

namespace mtb::report {

struct RenderedReport {
  std::string markdown;
  // File name (beside the Markdown) -> SVG document; only plots with data.
  std::vector<std::pair<std::string, std::string>> svgs;
};

// `stem`: the Markdown's file name without ".md", for the SVG names
// ("<stem>_loss.svg", "<stem>_busbw.svg"). `differences`: listed in the
// report (the caller refuses them unless --allow_mixed). Files are named by
// their base name.
RenderedReport RenderReport(const std::vector<ResultFile>& files,
                            const std::vector<std::string>& differences,
                            const std::string& stem);

}  // namespace mtb::report

#endif  // MTB_REPORT_RENDER_H_
