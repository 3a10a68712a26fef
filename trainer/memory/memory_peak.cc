#include "trainer/memory/memory_peak.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/libtorch/counting_allocator.h"
#include "glog/logging.h"
#include "trainer/strategy/scalars.h"

namespace mtb {
namespace {

// `where` travels through the fp64 scalar gather as 6 bytes per value (an
// integer below 2^48 is exact in a double).
constexpr int kTextValues = 11;
constexpr int kBytesPerValue = 6;

void AppendText(const std::string& text, std::vector<double>* values) {
  for (int v = 0; v < kTextValues; ++v) {
    int64_t packed = 0;
    for (int b = 0; b < kBytesPerValue; ++b) {
      const size_t i = static_cast<size_t>(v * kBytesPerValue + b);
      const unsigned char c =
          i < text.size() ? static_cast<unsigned char>(text[i]) : 0;
      packed = packed * 256 + c;
    }
    values->push_back(static_cast<double>(packed));
  }
}

std::string ReadText(const double* values) {
  std::string text;
  for (int v = 0; v < kTextValues; ++v) {
    int64_t packed = static_cast<int64_t>(values[v]);
    char bytes[kBytesPerValue];
    for (int b = kBytesPerValue - 1; b >= 0; --b) {
      bytes[b] = static_cast<char>(packed % 256);
      packed /= 256;
    }
    for (char c : bytes) {
      if (c != 0) text.push_back(c);
    }
  }
  return text;
}

}  // namespace

PeakAttribution::PeakAttribution(std::function<HeldMemory()> walk)
    : walk_(std::move(walk)) {
  CHECK(CountingCpuAllocatorInstalled())
      << "PeakAttribution needs the counting allocator";
}

void PeakAttribution::Begin(const char* what) {
  (void)TakeCpuIntervalPeak();  // what came before the step is not ours
  best_peak_ = -1;
  marks_ = 0;
  walk_ms_ = 0;
  open_ = Interval{what, -1, CpuMemory().current_bytes, walk_()};
}

void PeakAttribution::Close() {
  const int64_t peak = TakeCpuIntervalPeak();
  // --v=2: every interval, to see where memory goes within a step.
  VLOG(2) << "memory interval from '" << open_.what << "' " << open_.index
          << ": live at mark " << open_.live_bytes << ", held "
          << open_.held.total() << " (parameters " << open_.held.parameters
          << ", gradients " << open_.held.gradients << ", state "
          << open_.held.optimizer_state << ", collective "
          << open_.held.collective_temporaries << "), peak " << peak
          << ", unattributed at peak " << peak - open_.held.total();
  // Ties go to the later interval: a tensor allocated just before a mark
  // raises the closing interval's peak, but the walk that counts it is the
  // next interval's, which opens at the same live bytes.
  if (peak >= best_peak_) {
    best_peak_ = peak;
    best_ = open_;
  }
}

void PeakAttribution::Mark(const char* what, int index) {
  Close();
  ++marks_;
  const auto start = std::chrono::steady_clock::now();
  open_ = Interval{what, index, CpuMemory().current_bytes, walk_()};
  walk_ms_ += std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
}

MemoryAtPeak PeakAttribution::End() {
  Close();
  MemoryAtPeak peak;
  peak.set_where(best_.index >= 0 ? absl::StrCat(best_.what, " ", best_.index)
                                  : std::string(best_.what));
  peak.set_peak_bytes(best_peak_);
  peak.set_parameter_bytes(best_.held.parameters);
  peak.set_gradient_bytes(best_.held.gradients);
  peak.set_optimizer_state_bytes(best_.held.optimizer_state);
  peak.set_collective_bytes(best_.held.collective_temporaries);
  peak.set_unattributed_bytes(best_peak_ - best_.held.total());
  peak.set_live_bytes_at_mark(best_.live_bytes);
  return peak;
}

absl::StatusOr<std::vector<MemoryAtPeak>> GatherMemoryAtPeak(
    Strategy& strategy, const MemoryAtPeak& mine) {
  std::vector<double> values = {
      static_cast<double>(mine.run()),
      static_cast<double>(mine.step()),
      static_cast<double>(mine.peak_bytes()),
      static_cast<double>(mine.parameter_bytes()),
      static_cast<double>(mine.gradient_bytes()),
      static_cast<double>(mine.optimizer_state_bytes()),
      static_cast<double>(mine.collective_bytes()),
      static_cast<double>(mine.unattributed_bytes()),
      static_cast<double>(mine.live_bytes_at_mark()),
  };
  const size_t numbers = values.size();
  AppendText(mine.where(), &values);
  const size_t per_rank = values.size();
  ASSIGN_OR_RETURN(const std::vector<double> all,
                   GatherScalarsOverRanks(strategy.communicator(), values,
                                          "memory at the peak"));
  std::vector<MemoryAtPeak> ranks;
  for (size_t offset = 0; offset < all.size(); offset += per_rank) {
    const double* v = all.data() + offset;
    MemoryAtPeak peak;
    peak.set_rank(static_cast<int32_t>(ranks.size()));
    peak.set_run(static_cast<int32_t>(v[0]));
    peak.set_step(static_cast<int32_t>(v[1]));
    peak.set_peak_bytes(static_cast<int64_t>(v[2]));
    peak.set_parameter_bytes(static_cast<int64_t>(v[3]));
    peak.set_gradient_bytes(static_cast<int64_t>(v[4]));
    peak.set_optimizer_state_bytes(static_cast<int64_t>(v[5]));
    peak.set_collective_bytes(static_cast<int64_t>(v[6]));
    peak.set_unattributed_bytes(static_cast<int64_t>(v[7]));
    peak.set_live_bytes_at_mark(static_cast<int64_t>(v[8]));
    peak.set_where(ReadText(v + numbers));
    ranks.push_back(std::move(peak));
  }
  return ranks;
}

}  // namespace mtb
