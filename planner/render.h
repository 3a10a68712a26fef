// The planner's Markdown: what the tool prints and writes beside each JSON.
#ifndef MTB_PLANNER_RENDER_H_
#define MTB_PLANNER_RENDER_H_

#include <string>

#include "planner/cluster.pb.h"
#include "planner/planner.pb.h"

namespace mtb::planner {

std::string RenderPlannerMarkdown(const PlannerResult& result);
std::string RenderClusterMarkdown(const Cluster& cluster);
std::string RenderValidationMarkdown(const ValidationResult& result);
std::string RenderReproductionMarkdown(const ReproductionResult& result);

}  // namespace mtb::planner

#endif  // MTB_PLANNER_RENDER_H_
