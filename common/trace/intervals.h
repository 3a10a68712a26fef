// Time intervals [begin, end) in microseconds and the set algebra the trace
// analysis needs (overlap of communication by compute, exposed communication).
#ifndef MTB_COMMON_TRACE_INTERVALS_H_
#define MTB_COMMON_TRACE_INTERVALS_H_

#include <vector>

namespace mtb::trace {

struct Interval {
  double begin = 0;
  double end = 0;
};

// Sorted, disjoint, merged; empty intervals dropped.
std::vector<Interval> Union(std::vector<Interval> intervals);

// Both arguments as returned by Union.
std::vector<Interval> Intersect(const std::vector<Interval>& a,
                                const std::vector<Interval>& b);

// Total length of disjoint intervals.
double Length(const std::vector<Interval>& disjoint);

}  // namespace mtb::trace

#endif  // MTB_COMMON_TRACE_INTERVALS_H_
