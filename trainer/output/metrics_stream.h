// --metrics_jsonl=FILE: one JSON object per line per completed step,
// appended and flushed as the run goes (for `tail -f`, jq and pandas);
// docs/trainer.md, "Live metrics". The final result file is unchanged.
#ifndef MTB_TRAINER_OUTPUT_METRICS_STREAM_H_
#define MTB_TRAINER_OUTPUT_METRICS_STREAM_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "trainer/run/run_component.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// The line for `record` of run `run` (0-based, --repeat): MetricsLine
// (trainer/metrics_line.proto) as compact proto3 JSON with its own field
// names; bytes as numbers, not strings.
std::string MetricsJsonLine(const StepRecord& record, int run);

// Rank 0's stream. Not thread-safe; one writer per file.
class MetricsStream {
 public:
  // Opens `path` for appending (created, parents too): kInvalidArgument
  // naming --metrics_jsonl when it cannot be.
  static absl::StatusOr<std::unique_ptr<MetricsStream>> Open(const std::string& path);
  ~MetricsStream();
  MetricsStream(const MetricsStream&) = delete;
  MetricsStream& operator=(const MetricsStream&) = delete;

  // Appends the line and hands it to the kernel (a reader sees whole lines).
  absl::Status Append(const StepRecord& record, int run);

 private:
  MetricsStream(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

// The run component (trainer/run/run_component.h) that appends each
// completed step's line to `stream` (rank 0's; it must outlive it).
std::unique_ptr<RunComponent> MakeMetricsStreamComponent(MetricsStream* stream);

}  // namespace mtb

#endif  // MTB_TRAINER_OUTPUT_METRICS_STREAM_H_
