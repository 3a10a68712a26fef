// Vocabulary. A *child* is one rank process we forked. A *stream* is the read
// end of a child's stdout or stderr pipe; its *partial* is the text after the
// last newline seen. Signals reach the poll loop through SignalRouting's
// self-pipe (signal_routing.h). To *stop* a child is to send it
// SIGTERM (the grace clock starts); to *kill* it is to send SIGKILL.
#include "common/launch/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/launch/heartbeat_watch.h"
#include "common/base/rank_text.h"
#include "common/launch/signal_routing.h"
#include "common/base/flags.h"
#include "common/base/status.h"
#include "common/faults/fault_spec.h"

namespace mtb {
namespace {

using Clock = std::chrono::steady_clock;

// After the last child ended, how long its streams may stay open (a
// grandchild holding the pipe) before we stop reading them.
constexpr auto kDrainTimeout = std::chrono::seconds(2);
// Poll wakes at least this often, in case a SIGCHLD wake-up was lost.
constexpr int kPollBackstopMs = 500;
// A line longer than this is written in pieces.
constexpr size_t kMaxLineBytes = 64 * 1024;
// How long a group must have made no progress, when a waiting rank fails,
// for the heartbeats to say whom it waited for.
constexpr absl::Duration kWaitedLongEnough = absl::Seconds(1);
// How often external_stop is asked.
constexpr auto kExternalStopEvery = std::chrono::milliseconds(250);

// Exit codes a rank uses to say a restart cannot help (common/base/flags.h);
// the launcher passes them on when its ranks agree.
bool IsReservedExitCode(int code) {
  return code == kExitUsage || code == kExitDeterministicFailure;
}

std::string ExitCodeMeaning(int code) {
  return code == kExitUsage ? "bad input: nothing ran, do not retry"
                            : "a deterministic failure: a retry would fail the same way";
}

struct Stream {
  int fd = -1;
  int out_fd = -1;  // where prefixed lines go
  std::string partial;
  bool heartbeat = false;  // lines go to the heartbeat watch instead
};

struct Child {
  const ChildSpec* spec = nullptr;
  pid_t pid = -1;
  bool running = false;
  ChildEnd end;
  Stream streams[3];  // stdout, stderr, heartbeat (fd -1 without one)
  int log_fd = -1;
  std::string prefix;  // "[rank N] "
};

class GroupSupervisor {
 public:
  GroupSupervisor(const std::vector<ChildSpec>& specs,
                  const SupervisorOptions& options)
      : options_(options), children_(specs.size()) {
    for (size_t index = 0; index < specs.size(); ++index) {
      children_[index].spec = &specs[index];
      children_[index].end.rank = specs[index].rank;
      children_[index].prefix = absl::StrCat("[rank ", specs[index].rank, "] ");
    }
    if (options_.heartbeat.has_value()) {
      std::vector<int> ranks;
      for (const ChildSpec& spec : specs) ranks.push_back(spec.rank);
      watch_.emplace(ranks, *options_.heartbeat, options_.children_are_whole_group);
    }
  }

  ~GroupSupervisor() {
    for (Child& child : children_) {
      for (Stream& stream : child.streams) {
        if (stream.fd >= 0) ::close(stream.fd);
      }
      if (child.log_fd >= 0) ::close(child.log_fd);
    }
  }

  absl::StatusOr<SupervisionResult> Run() {
    for (Child& child : children_) {
      if (options_.log_dir.empty()) continue;
      const std::string path =
          absl::StrCat(options_.log_dir, "/rank_", child.spec->rank, ".log");
      child.log_fd =
          ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (child.log_fd < 0) {
        return absl::ErrnoToStatus(
            errno, absl::StrCat("launch: cannot create ", path));
      }
    }
    RETURN_IF_ERROR(signals_.Install());
    for (Child& child : children_) {
      absl::Status started = Start(child);
      if (!started.ok()) {
        KillAll();
        while (AnyRunning()) {
          Reap(/*block=*/true);
        }
        return started;
      }
    }
    Loop();
    return Result();
  }

 private:
  absl::Status Start(Child& child) {
    ChildSpec spec = *child.spec;
    spec.heartbeat = watch_.has_value();
    ASSIGN_OR_RETURN(const SpawnedChild spawned, SpawnWithPipes(spec));
    child.pid = spawned.pid;
    child.end.pid = spawned.pid;
    child.running = true;
    child.streams[0].fd = spawned.stdout_fd;
    child.streams[0].out_fd = options_.stdout_fd;
    child.streams[1].fd = spawned.stderr_fd;
    child.streams[1].out_fd = options_.stderr_fd;
    child.streams[2].fd = spawned.heartbeat_fd;
    child.streams[2].heartbeat = true;
    return absl::OkStatus();
  }

  bool AnyRunning() const {
    return std::any_of(children_.begin(), children_.end(),
                       [](const Child& child) { return child.running; });
  }

  bool AnyStreamOpen() const {
    for (const Child& child : children_) {
      for (const Stream& stream : child.streams) {
        if (stream.fd >= 0) return true;
      }
    }
    return false;
  }

  void SignalRunning(int signal_number) {
    for (Child& child : children_) {
      if (!child.running) continue;
      ::kill(child.pid, signal_number);
      child.end.stopped_by_us = true;
      if (signal_number == SIGKILL) child.end.needed_sigkill = true;
    }
  }

  void KillAll() { SignalRunning(SIGKILL); }

  // Says at once why the group is being torn down (the summary comes only
  // once every rank has ended, up to the kill grace later).
  void SayTeardown(const std::string& why, const char* verb) {
    std::vector<int> running;
    for (const Child& child : children_) {
      if (child.running) running.push_back(child.spec->rank);
    }
    if (running.empty()) return;
    WriteFully(options_.stderr_fd,
               absl::StrCat("launch: ", why, ": ", verb, " ", RanksText(running),
                            " (SIGKILL after ", absl::FormatDuration(grace_), grace_note_, ")\n"));
  }

  // A forwarded signal asks the ranks to stop cleanly, and a rank that
  // stops on a notice finishes its step and saves: the grace must hold
  // both, as long as the ranks last reported them (twice, for noise).
  void GraceForASave() {
    if (!watch_.has_value()) return;
    const absl::Duration step_and_save = watch_->StepAndSave();
    if (2 * step_and_save <= options_.kill_grace) return;
    grace_ = absl::Ceil(2 * step_and_save, absl::Seconds(1));
    grace_note_ =
        absl::StrCat(": room for twice the last step and save, ",
                     absl::FormatDuration(absl::Trunc(step_and_save, absl::Milliseconds(100))),
                     "; --kill_grace=", absl::FormatDuration(options_.kill_grace));
  }

  void StartGraceClock() {
    if (!kill_deadline_.has_value() && !killed_) {
      kill_deadline_ = Clock::now() + absl::ToChronoMilliseconds(grace_);
    }
  }

  void Loop() {
    std::optional<Clock::time_point> drain_deadline;
    while (AnyRunning() || AnyStreamOpen()) {
      if (!AnyRunning() && !drain_deadline.has_value()) {
        drain_deadline = Clock::now() + kDrainTimeout;
      }
      if (drain_deadline.has_value() && Clock::now() >= *drain_deadline) {
        CloseAllStreams();
        break;
      }
      Poll(drain_deadline);
      ForwardSignals();
      Reap(/*block=*/false);
      WatchHeartbeats();
      AskExternalStop();
      if (kill_deadline_.has_value() && Clock::now() >= *kill_deadline_) {
        KillAll();
        kill_deadline_.reset();
        killed_ = true;
      }
    }
  }

  // Forwards the signals received since the last call to the running ranks.
  void ForwardSignals() {
    for (int signal_number : signals_.Drain()) {
      if (signal_number == SIGCHLD) continue;
      if (forwarded_signal_ == 0) {
        forwarded_signal_ = signal_number;
        if (failure_ < 0 && external_stop_.empty()) {
          GraceForASave();
          if (options_.on_teardown) {
            options_.on_teardown(nullptr, absl::StrCat("received ", SignalName(signal_number)));
          }
          SayTeardown(absl::StrCat("received ", SignalName(signal_number)), "forwarding it to");
        }
      }
      SignalRunning(signal_number);
      StartGraceClock();
    }
  }

  bool TearingDown() const {
    return failure_ >= 0 || forwarded_signal_ != 0 || !external_stop_.empty();
  }

  // A stalled group is a failure of the rank it waits for.
  void WatchHeartbeats() {
    if (!watch_.has_value() || TearingDown()) return;
    const absl::Time now = absl::Now();
    ReportWaits(now);
    watch_->Remember(now, kWaitedLongEnough);
    if (!options_.heartbeat_tears_down) return;
    std::optional<Stall> stall = watch_->Check(now);
    if (!stall.has_value()) return;
    failure_ = 0;
    for (size_t index = 0; index < children_.size(); ++index) {
      if (children_[index].spec->rank == stall->rank) failure_ = static_cast<int>(index);
    }
    stall_ = stall->description;
    if (options_.on_teardown) {
      options_.on_teardown(&children_[failure_].end, absl::StrCat("heartbeat: ", stall_));
    }
    SayTeardown(absl::StrCat("heartbeat: ", stall_), "stopping");
    SignalRunning(SIGTERM);
    StartGraceClock();
  }

  // Every --wait_progress_every of no progress while a rank waits: who
  // waits for whom, and when the heartbeat will end it.
  void ReportWaits(absl::Time now) {
    if (options_.wait_progress_every <= absl::ZeroDuration() || now < next_wait_report_) {
      return;
    }
    std::optional<Stall> waiting = watch_->Diagnose(now, options_.wait_progress_every);
    if (!waiting.has_value()) return;
    next_wait_report_ = now + options_.wait_progress_every;
    const absl::Duration timeout = watch_->CurrentTimeout();
    WriteFully(options_.stderr_fd,
               absl::StrCat("launch: waiting: ", waiting->description,
                            timeout == absl::InfiniteDuration()
                                ? ""
                                : absl::StrCat(" (the heartbeat stops the group after ",
                                               absl::FormatDuration(timeout), ")"),
                            "\n"));
  }

  // A rank that failed on its own, typically its collective timing out,
  // knew only what it waited in: what the heartbeats said then (the rank the
  // group was waiting for, when that is another rank) leads the summary.
  void NoteWhomTheGroupWaitedFor(const Child& child) {
    if (waited_for_.has_value() || TearingDown() || !child.end.Failed()) return;
    // Its failure moved its counter (and its last heartbeat says done), so
    // the stall may be over by now: what the watch remembered of it counts.
    std::optional<Stall> waiting = watch_->Diagnose(absl::Now(), kWaitedLongEnough);
    if (!waiting.has_value() || waiting->rank < 0) waiting = watch_->remembered();
    if (waiting.has_value() && waiting->rank >= 0 && waiting->rank != child.spec->rank) {
      waited_for_ = std::move(waiting);
      waited_for_by_ = child.spec->rank;
    }
  }

  void AskExternalStop() {
    if (!options_.external_stop || TearingDown()) return;
    const Clock::time_point now = Clock::now();
    if (now < next_external_ask_) return;
    next_external_ask_ = now + kExternalStopEvery;
    std::optional<std::string> reason = options_.external_stop();
    if (!reason.has_value()) return;
    external_stop_ = *reason;
    SayTeardown(external_stop_, "stopping");
    SignalRunning(SIGTERM);
    StartGraceClock();
  }

  // Waits for output, a signal or the next deadline, and reads what came.
  void Poll(const std::optional<Clock::time_point>& drain_deadline) {
    std::vector<pollfd> fds;
    std::vector<Stream*> polled;
    fds.push_back({signals_.read_fd(), POLLIN, 0});
    for (Child& child : children_) {
      for (Stream& stream : child.streams) {
        if (stream.fd < 0) continue;
        fds.push_back({stream.fd, POLLIN, 0});
        polled.push_back(&stream);
      }
    }
    int timeout_ms = kPollBackstopMs;
    for (const auto& deadline : {kill_deadline_, drain_deadline}) {
      if (!deadline.has_value()) continue;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(
          *deadline - Clock::now());
      timeout_ms = std::clamp(static_cast<int>(left.count()), 0, timeout_ms);
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return;  // EINTR too
    for (size_t index = 1; index < fds.size(); ++index) {
      if (fds[index].revents == 0) continue;
      Child& owner = OwnerOf(polled[index - 1]);
      ReadStream(owner, *polled[index - 1]);
    }
  }

  // Reads what an ended child left in its output pipes before its end is
  // described (its last lines say why it ended, e.g. an injected kill). Stops
  // at end of file, or when nothing is ready (a grandchild may hold a pipe),
  // and after a bounded number of reads (one that keeps writing).
  void DrainOutput(Child& child) {
    for (int index = 0; index < 2; ++index) {
      Stream& stream = child.streams[index];
      for (int reads = 0; stream.fd >= 0 && reads < 64; ++reads) {
        pollfd ready{stream.fd, POLLIN, 0};
        if (::poll(&ready, 1, 0) <= 0) break;
        ReadStream(child, stream);
      }
    }
  }

  Child& OwnerOf(const Stream* stream) {
    for (Child& child : children_) {
      for (const Stream& own : child.streams) {
        if (stream == &own) return child;
      }
    }
    std::abort();  // every polled stream belongs to a child
  }

  void ReadStream(Child& child, Stream& stream) {
    char buffer[16384];
    ssize_t got;
    do {
      got = ::read(stream.fd, buffer, sizeof(buffer));
    } while (got < 0 && errno == EINTR);
    if (got <= 0) {
      CloseStream(child, stream);
      return;
    }
    stream.partial.append(buffer, static_cast<size_t>(got));
    size_t start = 0;
    while (true) {
      const size_t newline = stream.partial.find('\n', start);
      if (newline == std::string::npos) break;
      EmitLine(
          child, stream,
          absl::string_view(stream.partial).substr(start, newline - start));
      start = newline + 1;
    }
    stream.partial.erase(0, start);
    while (stream.partial.size() >= kMaxLineBytes) {
      EmitLine(child, stream,
               absl::string_view(stream.partial).substr(0, kMaxLineBytes));
      stream.partial.erase(0, kMaxLineBytes);
    }
  }

  void EmitLine(Child& child, const Stream& stream, absl::string_view line) {
    if (stream.heartbeat) {
      if (watch_.has_value()) watch_->Received(child.spec->rank, line, absl::Now());
      return;
    }
    if (absl::StrContains(line, "--fault=kill:") &&
        absl::StrContains(line, kKillAnnouncement)) {
      child.end.announced_injected_kill = true;
    }
    NoteFlightDump(line);
    WriteFully(stream.out_fd, absl::StrCat(child.prefix, line, "\n"));
    if (child.log_fd >= 0) WriteFully(child.log_fd, absl::StrCat(line, "\n"));
  }

  // "rank 1: flight recorder dumped to DIR/flight_....json (SIGTERM ...)"
  // (flight_dumps.cc) or a failed collective's log line (pending_collective.cc):
  // the summary says where the dumps are.
  void NoteFlightDump(absl::string_view line) {
    constexpr absl::string_view kDumped = "flight recorder dumped to ";
    const size_t at = line.find(kDumped);
    if (at == absl::string_view::npos) return;
    absl::string_view path = line.substr(at + kDumped.size());
    path = path.substr(0, path.find(" ("));
    const size_t slash = path.rfind('/');
    const std::string folder(slash == absl::string_view::npos ? "." : path.substr(0, slash));
    if (std::find(dump_folders_.begin(), dump_folders_.end(), folder) == dump_folders_.end()) {
      dump_folders_.push_back(folder);
    }
  }

  void CloseStream(Child& child, Stream& stream) {
    if (!stream.partial.empty()) EmitLine(child, stream, stream.partial);
    stream.partial.clear();
    ::close(stream.fd);
    stream.fd = -1;
  }

  void CloseAllStreams() {
    for (Child& child : children_) {
      for (Stream& stream : child.streams) {
        if (stream.fd >= 0) CloseStream(child, stream);
      }
    }
  }

  // Collects every child that has ended, then picks the failure among them,
  // so that a rank that died on its own in the same instant is reported as
  // failed, not as terminated by us.
  void Reap(bool block) {
    std::vector<Child*> ended;
    for (Child& child : children_) {
      if (!child.running) continue;
      int status = 0;
      pid_t got;
      do {
        got = ::waitpid(child.pid, &status, block ? 0 : WNOHANG);
      } while (got < 0 && errno == EINTR);
      if (got != child.pid) continue;
      child.running = false;
      child.end.signaled = WIFSIGNALED(status);
      child.end.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
      child.end.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      child.end.core_dumped = WIFSIGNALED(status) && WCOREDUMP(status);
      if (watch_.has_value()) {
        NoteWhomTheGroupWaitedFor(child);
        watch_->Ended(child.spec->rank);
      }
      DrainOutput(child);
      ended.push_back(&child);
    }
    // Ctrl-C reaches the ranks (same process group) as well as us: a rank
    // that died of it is not "the failure". Our handler has run by now if the
    // signal came before the rank's death was collected.
    ForwardSignals();
    for (Child* child : ended) {
      if (child->end.Failed() && !child->end.stopped_by_us && !TearingDown()) {
        failure_ = static_cast<int>(child - children_.data());
        const std::string what = absl::StrCat("rank ", child->end.rank, " (pid ",
                                              child->end.pid, ") ",
                                              child->end.Describe());
        if (options_.on_teardown) options_.on_teardown(&child->end, what);
        SayTeardown(what, "stopping");
        SignalRunning(SIGTERM);
        StartGraceClock();
      }
    }
  }

  SupervisionResult Result() const {
    SupervisionResult result;
    for (const Child& child : children_) result.ends.push_back(child.end);
    result.failure = failure_;
    result.forwarded_signal = forwarded_signal_;
    result.stall = stall_;
    result.external_stop = external_stop_;
    // A failure is recorded only while nothing was forwarded, so when both
    // are set the failure came first and is the verdict.
    if (failure_ >= 0 || !external_stop_.empty()) {
      result.exit_code = 1;
      if (failure_ >= 0 && stall_.empty()) result.exit_code = AgreedReservedCode();
    } else if (forwarded_signal_ != 0) {
      result.exit_code = 128 + forwarded_signal_;
    }
    // Every rank stopped on a preemption notice after saving its state
    // (forwarded by us or sent to the ranks directly): resumable, so not a
    // failure, and not a plain signal death either.
    result.preempted = std::all_of(
        children_.begin(), children_.end(), [](const Child& child) {
          return !child.end.signaled && child.end.exit_code == kExitPreempted;
        });
    if (result.preempted && !children_.empty()) result.exit_code = kExitPreempted;
    if (result.exit_code != 0) result.summary = Summary(result);
    return result;
  }

  // The failure's exit code when it is reserved (2 usage, 3 deterministic:
  // an outer scheduler must not retry) and no rank that failed on its own
  // ended differently; else 1.
  int AgreedReservedCode() const {
    const ChildEnd& failed = children_[failure_].end;
    if (failed.signaled || !IsReservedExitCode(failed.exit_code)) return 1;
    for (const Child& child : children_) {
      const ChildEnd& end = child.end;
      if (end.stopped_by_us || !end.Failed()) continue;
      if (end.signaled || end.exit_code != failed.exit_code) return 1;
    }
    return failed.exit_code;
  }

  std::string Summary(const SupervisionResult& result) const {
    std::vector<int> stopped;
    std::vector<int> sigkilled;
    std::vector<std::string> also_failed;
    for (size_t index = 0; index < result.ends.size(); ++index) {
      const ChildEnd& end = result.ends[index];
      if (static_cast<int>(index) == result.failure && result.stall.empty()) continue;
      if (end.stopped_by_us) {
        stopped.push_back(end.rank);
        if (end.needed_sigkill) sigkilled.push_back(end.rank);
      } else if (end.Failed()) {
        also_failed.push_back(absl::StrCat("rank ", end.rank, " (pid ", end.pid,
                                           ") ", end.Describe()));
      }
    }
    std::string line = "launch: ";
    if (result.failure >= 0 && result.stall.empty() && waited_for_.has_value() &&
        waited_for_by_ == result.ends[result.failure].rank) {
      absl::StrAppend(&line, "the group waited for rank ", waited_for_->rank, " (",
                      waited_for_->description, "); ");
    }
    if (!result.stall.empty()) {
      absl::StrAppend(&line, "heartbeat: ", result.stall);
      if (!stopped.empty()) {
        absl::StrAppend(&line, "; terminated ", RanksText(stopped));
      }
    } else if (!result.external_stop.empty()) {
      absl::StrAppend(&line, result.external_stop);
      if (!stopped.empty()) {
        absl::StrAppend(&line, "; terminated ", RanksText(stopped));
      }
    } else if (result.failure >= 0) {
      const ChildEnd& failed = result.ends[result.failure];
      absl::StrAppend(&line, "rank ", failed.rank, " (pid ", failed.pid, ") ",
                      failed.Describe());
      if (!stopped.empty()) {
        absl::StrAppend(&line, "; terminated ", RanksText(stopped));
      }
    } else {
      absl::StrAppend(&line, "received ", SignalName(result.forwarded_signal));
      if (!stopped.empty()) {
        absl::StrAppend(&line, "; forwarded it to ", RanksText(stopped));
      }
    }
    if (result.preempted) {
      absl::StrAppend(&line, "; every rank saved its state and stopped (exit ",
                      kExitPreempted, ": preempted)");
    }
    if (!sigkilled.empty()) {
      absl::StrAppend(&line, " (", RanksText(sigkilled), " needed SIGKILL after ",
                      absl::FormatDuration(options_.kill_grace), ")");
    }
    if (!also_failed.empty()) {
      absl::StrAppend(&line, result.failure >= 0 ? "; also " : "; ",
                      absl::StrJoin(also_failed, "; "));
    }
    if (result.failure >= 0 && !options_.log_dir.empty()) {
      absl::StrAppend(&line, "; its output: ", options_.log_dir, "/rank_",
                      result.ends[result.failure].rank, ".log");
    }
    if (!dump_folders_.empty()) {
      absl::StrAppend(&line, "; flight recorder dumps in ", absl::StrJoin(dump_folders_, ", "),
                      " (profiler_agg forensics ", dump_folders_.front(), ")");
    }
    if (result.exit_code != 1 && result.exit_code < 128 && !result.preempted) {
      absl::StrAppend(&line, "; exit ", result.exit_code, " (", ExitCodeMeaning(result.exit_code),
                      ")");
    }
    return line;
  }

  const SupervisorOptions& options_;
  std::vector<Child> children_;
  SignalRouting signals_;
  std::optional<Clock::time_point> kill_deadline_;
  bool killed_ = false;
  int failure_ = -1;
  int forwarded_signal_ = 0;
  std::optional<HeartbeatWatch> watch_;
  std::string stall_;
  std::string external_stop_;
  Clock::time_point next_external_ask_;
  absl::Time next_wait_report_;
  absl::Duration grace_ = options_.kill_grace;
  std::string grace_note_;
  std::vector<std::string> dump_folders_;
  std::optional<Stall> waited_for_;
  int waited_for_by_ = -1;
};

}  // namespace

std::string SignalName(int signal_number) {
  const char* abbreviation = ::sigabbrev_np(signal_number);
  if (abbreviation == nullptr) return absl::StrCat("signal ", signal_number);
  return absl::StrCat("SIG", abbreviation);
}

std::string ChildEnd::Describe() const {
  if (!signaled && exit_code == kExitPreempted) {
    return absl::StrCat("exited with code ", exit_code,
                        " (preempted: it stopped on a SIGTERM notice after "
                        "saving its state)");
  }
  if (!signaled) return absl::StrCat("exited with code ", exit_code);
  // Linux overcommits memory: a rank that outgrows the host is not told by a
  // failed allocation but SIGKILLed by the kernel. A SIGKILL we did not send
  // is most likely that.
  if (signal == SIGKILL && !stopped_by_us && announced_injected_kill) {
    return "was killed by SIGKILL (signal 9) sent by its own --fault=kill "
           "injection";
  }
  if (signal == SIGKILL && !stopped_by_us) {
    return absl::StrCat("was killed by SIGKILL (signal 9) that the launcher "
                        "did not send (likely the kernel's OOM killer: see "
                        "`dmesg` or `journalctl -k`)",
                        core_dumped ? ", core dumped" : "");
  }
  return absl::StrCat("was killed by signal ", signal, " (", SignalName(signal),
                      ")", core_dumped ? ", core dumped" : "");
}

absl::StatusOr<SupervisionResult> Supervise(
    const std::vector<ChildSpec>& children, const SupervisorOptions& options) {
  GroupSupervisor supervisor(children, options);
  return supervisor.Run();
}

}  // namespace mtb
