// Test support for the trainer's DDP process tests (ddp_process_test.cc,
// sync_fault_process_test.cc, sharded_process_test.cc,
// memory_process_test.cc): launch the trainer binary as real rank
// processes, read back its result and every rank's parameter dump, and the
// one comparison they use, "a DDP run equals one rank on the global
// batch". The fault test injects --testonly_sync_fault and asserts that this
// same comparison fails, so the positive test's checks are known to bite.
//
// The tolerances and what each check can and cannot catch are explained in
// ddp_process_check.cc.
#ifndef MTB_TRAINER_TESTS_DDP_PROCESS_CHECK_H_
#define MTB_TRAINER_TESTS_DDP_PROCESS_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ATen/core/Tensor.h"
#include "trainer/tests/check_report.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// The tiny model both tests train: 4 layers of width 96, 5 steps, dropout,
// AdamW with clipping, --bucket_cap_mb=0.25 (four buckets). Add
// --batch_size (and anything else) per launch.
std::vector<std::string> TinyDdpFlags();
inline constexpr int kTinyGlobalBatch = 12;  // divisible by 1, 2, 3 and 4

// The tensor-parallel tests' model (trainer/tests/tp_process_test.cc, the tp
// matrix): 2 blocks of width 64, 4 heads, vocabulary 64 and 16 positions
// (every --tp in {1, 2, 4} divides heads, vocabulary, MLP width and, with
// SP, the sequence), no dropout, 4 clipped steps. Add --batch_size.
std::vector<std::string> TinyTpFlags();

// Losses of two runs on the same samples summed in a different order agree
// to this relative tolerance (ddp_process_check.cc).
inline constexpr double kDdpLossRtol = 1e-6;

// One parameter of the dump's manifest.
struct DumpedParameter {
  std::string name;
  int64_t offset = 0;  // in elements
  int64_t numel = 0;
};

struct TrainerLaunch {
  int exit_code = -1;
  std::string output;  // stdout and stderr
  TrainResult result;
  std::vector<DumpedParameter> manifest;
  std::vector<at::Tensor> rank_parameters;  // each rank's flat fp32 dump
};

// TEST_TMPDIR/<name>: where RunTrainer(name, ...) writes.
std::string LaunchDirectory(const std::string& name);

// Runs the trainer binary (a launcher of `nproc` ranks) with `flags` plus
// --nproc, --out and (unless `dump_parameters` is false) --dump_parameters
// in a fresh directory `name` under TEST_TMPDIR. Results are read only when
// it exits 0.
TrainerLaunch RunTrainer(const std::string& name, int nproc,
                         std::vector<std::string> flags,
                         bool dump_parameters = true);

// Launches like RunTrainer (no dump) and expects the launcher to refuse the
// run before any rank starts: exit 2, `line` in the output after
// "trainer: ", and no rank's "joined a group" line.
void ExpectRefusedBeforeRanks(const std::string& name, int nproc,
                              std::vector<std::string> flags,
                              const std::string& line);

enum class DdpCheck {
  kLoss,        // a step's loss
  kGradNorm,    // a step's gradient norm (before clipping)
  kRanksEqual,  // a rank's parameters differ from rank 0's
  kParameters,  // a parameter tensor beyond its tolerance
};

// What a comparison found (check_report.h).
struct DdpComparison : CheckReport<DdpCheck> {
  // Whether a kParameters failure names `parameter`.
  bool FailedParameter(const std::string& parameter) const;
};

// Per parameter tensor of `manifest`: the two tiers of
// ddp_process_check.cc. Appends failures and one measurement line to
// `comparison`.
void CompareParameters(const at::Tensor& actual, const at::Tensor& expected,
                       const std::vector<DumpedParameter>& manifest,
                       const std::string& what, DdpComparison* comparison);

// A DDP launch against one rank on the same global batch: every step's loss
// and gradient norm, every rank's parameters equal to rank 0's bit for bit,
// and rank 0's parameters against the reference's, tensor by tensor. Both
// launches must have exited 0.
DdpComparison CompareWithReference(const TrainerLaunch& ddp,
                                   const TrainerLaunch& reference);

}  // namespace mtb

#endif  // MTB_TRAINER_TESTS_DDP_PROCESS_CHECK_H_
