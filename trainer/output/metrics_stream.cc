#include "trainer/output/metrics_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/results/atomic_file.h"
#include "glog/logging.h"
#include "google/protobuf/util/json_util.h"
#include "trainer/metrics_line.pb.h"

namespace mtb {

std::string MetricsJsonLine(const StepRecord& record, int run) {
  MetricsLine line;
  line.set_run(run);
  line.set_step(record.step());
  line.set_loss(record.loss());
  line.set_lr(record.lr());
  line.set_tokens_per_second(record.tokens_per_second());
  line.set_grad_norm(record.grad_norm());
  line.set_comm_wait_ms(record.comm_wait_ms());
  line.set_step_ms(record.step_ms());
  line.set_peak_memory_bytes(static_cast<double>(record.peak_memory_bytes()));
  line.set_live_bytes(static_cast<double>(record.live_bytes()));
  line.set_utc(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()));
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.add_whitespace = false;  // one line
  std::string json;
  CHECK(google::protobuf::util::MessageToJsonString(line, &json, options).ok());
  return json;
}

absl::StatusOr<std::unique_ptr<MetricsStream>> MetricsStream::Open(const std::string& path) {
  if (absl::Status made = CreateDirectories(DirectoryOf(path)); !made.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics_jsonl=", path, ": ", made.message()));
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_jsonl=", path, ": cannot open for appending: ", std::strerror(errno)));
  }
  return std::unique_ptr<MetricsStream>(new MetricsStream(path, fd));
}

MetricsStream::~MetricsStream() { ::close(fd_); }

absl::Status MetricsStream::Append(const StepRecord& record, int run) {
  const std::string line = MetricsJsonLine(record, run) + "\n";
  // One write(2) of the whole line on an O_APPEND descriptor: readers never
  // see half a line from us.
  const ssize_t written = ::write(fd_, line.data(), line.size());
  if (written != static_cast<ssize_t>(line.size())) {
    return absl::DataLossError(absl::StrCat("--metrics_jsonl=", path_, ": writing step ",
                                            record.step(), ": ",
                                            written < 0 ? std::strerror(errno) : "short write"));
  }
  return absl::OkStatus();
}

namespace {

class MetricsStreamComponent : public RunComponent {
 public:
  explicit MetricsStreamComponent(MetricsStream* stream) : stream_(stream) {}
  absl::Status AfterStep(RunState& state, StepRecord& record) override {
    return stream_->Append(record, state.repeat);
  }

 private:
  MetricsStream* stream_;
};

}  // namespace

std::unique_ptr<RunComponent> MakeMetricsStreamComponent(MetricsStream* stream) {
  return std::make_unique<MetricsStreamComponent>(stream);
}

}  // namespace mtb
