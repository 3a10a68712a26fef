#include "common/base/stats.h"

#include <algorithm>
#include <cmath>

#include "glog/logging.h"

namespace mtb {
namespace {

double SumOfSquaredDeviations(const std::vector<double>& values) {
  const double mean = Mean(values);
  double sum = 0;
  for (double value : values) sum += (value - mean) * (value - mean);
  return sum;
}

}  // namespace

double Mean(const std::vector<double>& values) {
  CHECK(!values.empty()) << "Mean of an empty sample";
  double sum = 0;
  for (double value : values) sum += value;
  return sum / static_cast<double>(values.size());
}

double PopulationStd(const std::vector<double>& values) {
  return std::sqrt(SumOfSquaredDeviations(values) /
                   static_cast<double>(values.size()));
}

double SampleStd(const std::vector<double>& values) {
  CHECK(!values.empty()) << "SampleStd of an empty sample";
  if (values.size() == 1) return 0;
  return std::sqrt(SumOfSquaredDeviations(values) /
                   static_cast<double>(values.size() - 1));
}

double Min(const std::vector<double>& values) {
  CHECK(!values.empty()) << "Min of an empty sample";
  return *std::min_element(values.begin(), values.end());
}

double Max(const std::vector<double>& values) {
  CHECK(!values.empty()) << "Max of an empty sample";
  return *std::max_element(values.begin(), values.end());
}

double Percentile(std::vector<double> values, double p) {
  CHECK(!values.empty()) << "Percentile of an empty sample";
  CHECK(p >= 0 && p <= 100) << "percentile " << p << " outside [0, 100]";
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = rank - static_cast<double>(below);
  return values[below] + (values[above] - values[below]) * fraction;
}

double Median(const std::vector<double>& values) {
  return Percentile(values, 50);
}

Summary Summarize(const std::vector<double>& values) {
  Summary summary;
  summary.count = static_cast<int>(values.size());
  summary.mean = Mean(values);
  summary.sample_std = SampleStd(values);
  summary.min = Min(values);
  summary.p50 = Percentile(values, 50);
  summary.p99 = Percentile(values, 99);
  summary.max = Max(values);
  return summary;
}

}  // namespace mtb
