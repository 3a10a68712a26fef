// Summary statistics for timings and other samples. Population vs sample
// standard deviation are named, never implied: repeat-run reports use the sample
// form (n-1), spread across ranks of one step the population form.
#ifndef MTB_COMMON_BASE_STATS_H_
#define MTB_COMMON_BASE_STATS_H_

#include <vector>

namespace mtb {

// All of these CHECK-fail on an empty sample (our bug, not user input).
double Mean(const std::vector<double>& values);
// sqrt(sum((x - mean)^2) / n).
double PopulationStd(const std::vector<double>& values);
// sqrt(sum((x - mean)^2) / (n - 1)); 0 for a single value.
double SampleStd(const std::vector<double>& values);
double Min(const std::vector<double>& values);
double Max(const std::vector<double>& values);
// The p-th percentile, p in [0, 100], by linear interpolation between the
// closest ranks (numpy's default "linear" method): rank = p/100 * (n-1).
double Percentile(std::vector<double> values, double p);
double Median(const std::vector<double>& values);

struct Summary {
  int count = 0;
  double mean = 0;
  double sample_std = 0;
  double min = 0;
  double p50 = 0;
  double p99 = 0;
  double max = 0;
};

Summary Summarize(const std::vector<double>& values);

}  // namespace mtb

#endif  // MTB_COMMON_BASE_STATS_H_
