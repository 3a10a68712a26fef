// The trainer against PyTorch itself. The test writes only the configuration
// of a tiny model; trainer/testdata/reference_gpt.py (an independent
// implementation in plain torch.nn.functional + torch.optim.AdamW, run by
// Debian's /usr/bin/python3 with python3-torch 1.13) builds the GPT-2
// initialisation and every step's batch itself from the documented counter
// keys (docs/trainer.md), then writes them back with logits, loss and every
// gradient of step 1's first micro-batch, each step's loss and the final
// parameters. So initialisation, sampling, forward, backward and the optimizer
// are each checked independently.
//
// With the BLAS GEMM backend both sides run on one intra-op thread (OpenBLAS's
// sgemm sums in a thread-count-dependent order) and call the same LibTorch
// kernels in the same order, so we assert bit equality wherever we observe it
// and a stated bound elsewhere (kParameterBound below). With the oneDNN
// backend our matrix products sum in oneDNN's order: logits, loss and every
// gradient must stay within the fp32 summation bound of docs/gemm.md, with
// the observed error at most a tenth of it (ExpectWithinSummationBound). Keep the op order aligned when editing
// either side: AdamW's m / (sqrt(v) + eps) turns a 1-ulp gradient difference
// into a visible parameter difference where m nearly cancels (docs/trainer.md).
// Without that Python the test says why and passes, except under CI=true
// where it must run and fails.
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/gemm/backend.h"
#include "common/gemm/bound.h"
#include "common/libtorch/allclose.h"
#include "common/nn/autocast.h"
#include "common/nn/layers.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "torch/csrc/autograd/autograd.h"
#include "trainer/data/data.h"
#include "trainer/run/strategy.h"
#include "trainer/tests/test_config.h"
#include "trainer/run/trainer.h"
#include "trainer/config/config_names.h"

namespace mtb {
namespace {

constexpr char kPython[] = "/usr/bin/python3";
constexpr char kScript[] = "trainer/testdata/reference_gpt.py";

// Empty when /usr/bin/python3 can import torch; otherwise why not. Asked once
// per process: importing torch takes ~3 s.
const std::string& PythonTorchMissing() {
  static const std::string* const missing = [] {
    const std::string command =
        absl::StrCat(kPython, " -c 'import torch' > /dev/null 2>&1");
    return new std::string(
        std::system(command.c_str()) == 0
            ? ""
            : absl::StrCat(kPython,
                           " cannot import torch (install python3-torch)"));
  }();
  return *missing;
}

// A raw little-endian file the script wrote, as a tensor of `dtype`.
at::Tensor ReadRaw(const std::string& path, at::IntArrayRef shape,
                   at::ScalarType dtype) {
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  CHECK(bytes.ok()) << bytes.status();
  at::Tensor tensor = at::empty(shape, dtype);
  CHECK_EQ(bytes->size(), tensor.nbytes()) << path;
  std::memcpy(tensor.data_ptr(), bytes->data(), bytes->size());
  return tensor;
}

// What one case varies; everything else is ReferenceConfig.
struct ReferenceCase {
  std::string name;
  double dropout = 0;
  int grad_accum = 1;
  bool activation_checkpointing = false;
  std::string precision = "fp32";
  gemm::Backend gemm = gemm::Backend::kBlas;
};

// What we assert, from what we observe: logits, loss, every gradient of step 1
// and every step's loss (in fp64) are bit-identical in every case. The
// parameters are bit-identical up to the first clipped update; then the clip
// coefficient differs by rounding: ours is max_norm / (norm + 1e-6) in fp64
// from the fp64 global norm that sharded strategies need, torch's is the same
// quotient in fp32 from an fp32 norm. The clipped gradients then differ in the
// last bit, which AdamW's normalisation passes on as at most about one ulp of
// a parameter; for the weights, |w| < 0.125, one ulp is at most 7.45e-9, hence
// 1e-8. Observed: 3.7e-9 (fp32, dropout, checkpointing), 7.45e-9 (bf16), 0
// (grad_accum 2).
constexpr double kParameterBound = 1e-8;

TrainConfig ReferenceConfig(const ReferenceCase& reference_case) {
  TrainConfig config = TinyConfig();  // vocab 64, d 32, 2 layers, seq 16, B 4
  config.set_dropout(reference_case.dropout);
  config.set_grad_accum(reference_case.grad_accum);
  config.set_activation_checkpointing(reference_case.activation_checkpointing);
  config.set_precision(*PrecisionFromName(reference_case.precision));
  config.set_lr(3e-3);
  config.set_lr_schedule(TrainConfig::cosine);
  config.set_lr_warmup_steps(1);
  config.set_lr_decay_steps(3);
  config.set_min_lr(3e-4);
  config.set_weight_decay(0.1);
  // Below every step's gradient norm in these cases (0.68 to 1.5), so every
  // step clips and the clip path is always compared.
  config.set_max_grad_norm(0.5);
  config.set_steps(3);
  config.set_intra_op_threads(1);
  return config;
}

// Expects |actual - expected| <= bound elementwise (bound 0: bit-identical)
// and returns the largest absolute error.
double ExpectWithin(const at::Tensor& actual, const at::Tensor& expected,
                    double bound, const std::string& what) {
  const AllCloseResult result =
      AllClose(actual, expected, /*rtol=*/0, /*atol=*/bound);
  EXPECT_TRUE(result.ok) << what << " (bound " << bound
                         << "): " << result.message;
  return result.max_abs_error;
}

// bf16 against PyTorch's fp32 math (the script's python_fp32/ outputs), where
// bit equality is impossible: bf16 keeps 8 significant bits, so each rounding
// errs by up to u = 2^-8 relative. The bounds, with what we observed (seed 7):
//  - step 1's logits: 4 u max|z|. The LM head rounds its output to bf16 (u|z|)
//    after rounding its inputs, the final LayerNorm's output and wte (u each,
//    relative to each product, so at most 2u|z| more where the D-term sum does
//    not cancel); earlier blocks reach z through that LayerNorm, which divides
//    out their scale. Observed 0.84 u max|z| (2.2e-3 with max|z| 0.67).
//  - step t's loss: 2 t (4 u max|z|). Cross-entropy moves by at most
//    2 max|dz| per token (its gradient in z, softmax - onehot, has L1 norm at
//    most 2), so step 1 is within 2 (4 u max|z|), and every later step adds at
//    most as much again as the two runs' parameters drift apart. Observed
//    5e-5 to 6e-4, far inside: the errors of 64 tokens average out.
//  - parameters after n steps: 2.02 sum_t lr_t, the mantissa does not enter.
//    AdamW's normalised update m/(sqrt(v) + eps) is at most 1.004 in
//    magnitude for t <= 3 (Cauchy-Schwarz over the bias-corrected moments), so
//    a bf16 gradient error can at worst reverse an element's update each step:
//    2 x 1.004 lr_t, plus weight decay on an already-bounded difference (under
//    lr wd = 3e-4 of it). Observed 8.3e-3 against the bound's 1.0e-2 (where a
//    gradient element near zero changed sign).
void ExpectBf16NearFp32Math(const std::string& fp32_dir,
                            const at::Tensor& logits,  // (B, T, V) bf16
                            const std::vector<double>& losses,
                            const std::vector<NamedParameter>& params,
                            double lr_sum) {
  constexpr double kBf16UnitRoundoff = 1.0 / 256;  // 2^-8
  const at::Tensor fp32_logits =
      ReadRaw(fp32_dir + "logits.f32", logits.sizes(), at::kFloat);
  const double max_logit = fp32_logits.abs().max().item<double>();
  const double logit_bound = 4 * kBf16UnitRoundoff * max_logit;
  std::cout << "  bf16 vs fp32 math: logits "
            << ExpectWithin(logits.to(at::kFloat), fp32_logits, logit_bound,
                            "bf16 logits vs fp32 math")
            << " (bound " << logit_bound << ")\n";
  const int steps = static_cast<int>(losses.size());
  const at::Tensor fp32_losses =
      ReadRaw(fp32_dir + "losses.f64", {steps}, at::kDouble);
  for (int t = 1; t <= steps; ++t) {
    const double loss_bound = 2 * t * logit_bound;
    std::cout << "    loss " << t << " "
              << ExpectWithin(at::tensor({losses[t - 1]}, at::kDouble),
                              fp32_losses.slice(0, t - 1, t), loss_bound,
                              absl::StrCat("bf16 loss of step ", t,
                                           " vs fp32 math"))
              << " (bound " << loss_bound << ")\n";
  }
  CHECK_LE(steps, 3) << "the 1.004 bound on AdamW's update holds for t <= 3";
  const double parameter_bound = 2.02 * lr_sum;
  double worst = 0;
  for (const NamedParameter& p : params) {
    worst = std::max(
        worst, ExpectWithin(p.tensor.detach(),
                            ReadRaw(fp32_dir + "final." + p.name + ".f32",
                                    p.tensor.sizes(), at::kFloat),
                            parameter_bound,
                            "bf16-trained " + p.name + " vs fp32 math"));
  }
  std::cout << "    parameters " << worst << " (bound " << parameter_bound
            << ")\n";
}

// oneDNN's GEMMs against PyTorch's OpenBLAS ones (docs/gemm.md, "The
// reference bound"): a tensor that G fp32 matrix products of inner size at
// most K feed differs by at most G 2 γ_K √K max|t|; we expect the observed
// error within a tenth of it, so a real regression cannot hide under it.
struct SummationBound {
  int products = 0;  // G
  int64_t inner = 0;  // K
  double Of(const at::Tensor& expected) const {
    return products * 2 * gemm::Fp32Gamma(inner) *
           std::sqrt(static_cast<double>(inner)) *
           expected.abs().max().item<double>();
  }
};

void CompareWithPyTorch(const ReferenceCase& reference_case) {
  if (const std::string& missing = PythonTorchMissing(); !missing.empty()) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string(ci) == "true") {
      FAIL() << "CI=true and " << missing;
    }
    GTEST_SKIP() << "skipped: " << missing;
  }
  const TrainConfig config = ReferenceConfig(reference_case);
  const bool bf16 = config.precision() == TrainConfig::bf16;
  gemm::ScopedBackend backend(reference_case.gemm);
  // bf16 runs LibTorch's own kernels on either backend (common/gemm/ops.h).
  const bool summed_elsewhere =
      reference_case.gemm == gemm::Backend::kOneDnn && !bf16;
  at::set_num_threads(1);
  ASSERT_EQ(at::get_num_threads(), 1);
  const auto data = TensorData(MakeSyntheticSamples(config.seed(), config.vocab_size(),
                                      config.seq_len()));
  SingleStrategy strategy;
  auto trainer = Trainer::Create(config, RankInfo{}, &strategy, data.get());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const std::vector<NamedParameter>& params = (*trainer)->model().parameters();

  // The configuration is all the script gets.
  const std::string dir =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/", reference_case.name);
  std::string manifest;
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, double>>{
           {"vocab_size", config.vocab_size()}, {"d_model", config.d_model()},
           {"n_layers", config.n_layers()},     {"n_heads", config.n_heads()},
           {"seq_len", config.seq_len()},
           {"batch_size", config.batch_size()},
           {"grad_accum", config.grad_accum()}, {"dropout", config.dropout()},
           {"lr", config.lr()},                 {"min_lr", config.min_lr()},
           {"lr_warmup_steps", config.lr_warmup_steps()},
           {"lr_decay_steps", config.lr_decay_steps()},
           {"beta1", config.beta1()},           {"beta2", config.beta2()},
           {"eps", config.eps()},
           {"weight_decay", config.weight_decay()},
           {"max_grad_norm", config.max_grad_norm()},
           {"steps", config.steps()},
           {"seed", static_cast<double>(config.seed())}}) {
    absl::StrAppend(&manifest, "config ", key, " ",
                    absl::StrFormat("%.17g", value), "\n");
  }
  absl::StrAppend(&manifest, "config lr_schedule ", ConfigName(config.lr_schedule()),
                  "\n", "config precision ", ConfigName(config.precision()),
                  "\n");
  ASSERT_TRUE(WriteFileAtomically(dir + "/manifest.txt", manifest).ok());

  const std::string log = dir + "/python.log";
  const std::string command = absl::StrCat(kPython, " ", kScript, " ", dir,
                                           " > ", log, " 2>&1");
  const int exit_code = std::system(command.c_str());
  ASSERT_EQ(exit_code, 0) << command << "\n"
                          << ReadFileToString(log).value_or("");
  const std::string out = dir + "/python/";
  EXPECT_EQ(ReadFileToString(out + "threads.txt").value_or("?"), "1\n")
      << "the script must run on one intra-op thread";

  // Initialisation: the same names in the same order, the same bits.
  std::string our_names;
  for (const NamedParameter& p : params) absl::StrAppend(&our_names, p.name, "\n");
  ASSERT_EQ(ReadFileToString(out + "names.txt").value_or("?"), our_names);
  for (const NamedParameter& p : params) {
    ExpectWithin(p.tensor.detach(),
                 ReadRaw(out + "init." + p.name + ".f32", p.tensor.sizes(),
                         at::kFloat),
                 0, "initial " + p.name);
  }

  // Sampling: every step's global batch, token for token.
  const int64_t global_batch =
      static_cast<int64_t>(config.grad_accum()) * config.batch_size();
  for (int step = 1; step <= config.steps(); ++step) {
    const Batch batch = data->Get(step, 0, global_batch);
    EXPECT_TRUE(at::equal(batch.inputs,
                          ReadRaw(absl::StrCat(out, "inputs_", step, ".i64"),
                                  batch.inputs.sizes(), at::kLong)))
        << "step " << step << "'s inputs differ from the counter keys'";
    EXPECT_TRUE(at::equal(batch.targets,
                          ReadRaw(absl::StrCat(out, "targets_", step, ".i64"),
                                  batch.targets.sizes(), at::kLong)))
        << "step " << step << "'s targets differ from the counter keys'";
  }

  // Our forward and backward on step 1's first micro-batch (no update).
  const Batch first = data->Get(1, 0, config.batch_size());
  at::Tensor logits, loss;
  {
    nn::AutocastGuard autocast(bf16);
    logits = (*trainer)->model().Forward(
        first.inputs, ForwardOptionsOf(config, 1, first.sample_indices));
    loss = nn::CrossEntropy(logits, first.targets);
  }
  std::vector<at::Tensor> inputs;
  for (const NamedParameter& p : params) inputs.push_back(p.tensor);
  const std::vector<at::Tensor> grads = torch::autograd::grad({loss}, inputs);

  const at::Tensor their_logits =
      ReadRaw(out + "logits.f32", logits.sizes(), at::kFloat);
  const at::Tensor their_loss = ReadRaw(out + "loss.f32", {1}, at::kFloat);
  // Forward: per block QKV, Q·Kᵀ, A·V, the attention and the two MLP
  // projections, then the LM head; inner sizes D, Dh, T, 4D. Backward: each
  // again for dX and dW, whose inner sizes add 3D, V and the B·T tokens.
  const SummationBound forward_bound{
      static_cast<int>(6 * config.n_layers() + 1),
      std::max<int64_t>(4 * config.d_model(), config.seq_len())};
  const SummationBound gradient_bound{
      2 * forward_bound.products,
      std::max<int64_t>({forward_bound.inner, config.vocab_size(),
                         int64_t{config.batch_size()} * config.seq_len()})};
  const double logit_bound =
      summed_elsewhere ? forward_bound.Of(their_logits) : 0;
  // Cross-entropy's gradient in the logits has L1 norm at most 2 per token.
  const double loss_bound = 2 * logit_bound;
  auto compare = [&](const at::Tensor& ours, const at::Tensor& theirs,
                     double bound, const std::string& what) {
    return summed_elsewhere
               ? ExpectWithin(ours, theirs, bound / 10,
                              what + " (a tenth of the summation bound)")
               : ExpectWithin(ours, theirs, /*bound=*/0, what);
  };
  std::cout << reference_case.name << " (gemm "
            << gemm::BackendName(reference_case.gemm)
            << "): max |ours - PyTorch's|\n";
  std::cout << "  logits    "
            << compare(logits.to(at::kFloat), their_logits, logit_bound,
                       "logits")
            << " (bound " << logit_bound << ")\n  loss      "
            << compare(loss.reshape({1}), their_loss, loss_bound, "loss")
            << " (bound " << loss_bound << ")\n";
  double worst_grad = 0, worst_grad_fraction = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor theirs = ReadRaw(out + "grad." + params[i].name + ".f32",
                                      params[i].tensor.sizes(), at::kFloat);
    const double bound = summed_elsewhere ? gradient_bound.Of(theirs) : 0;
    const double error =
        compare(grads[i], theirs, bound, "gradient of " + params[i].name);
    worst_grad = std::max(worst_grad, error);
    if (bound > 0) worst_grad_fraction = std::max(worst_grad_fraction, error / bound);
  }
  std::cout << "  gradients " << worst_grad << " (all " << params.size()
            << "; worst fraction of its bound " << worst_grad_fraction
            << ")\n";

  std::vector<double> losses;
  double lr_sum = 0;  // the schedule's learning rates, summed over the steps
  std::cout << "  gradient norms";
  for (int step = 1; step <= config.steps(); ++step) {
    absl::StatusOr<StepRecord> record = (*trainer)->Step();
    ASSERT_TRUE(record.ok()) << record.status();
    EXPECT_TRUE(record->clipped()) << "step " << step << ": gradient norm "
                                   << record->grad_norm();
    std::cout << " " << record->grad_norm();
    losses.push_back(record->loss());
    lr_sum += record->lr();
  }
  std::cout << "\n";
  // Later steps: each adds at most the first step's difference again as
  // the two runs' parameters drift apart (as for bf16 below); the
  // parameters within AdamW's 2.02 Σ lr_t (ExpectBf16NearFp32Math).
  const at::Tensor step_bounds =
      2 * logit_bound *
      at::arange(1, config.steps() + 1, at::TensorOptions(at::kDouble));
  const at::Tensor their_losses =
      ReadRaw(out + "losses.f64", {config.steps()}, at::kDouble);
  const at::Tensor our_losses = at::tensor(losses, at::kDouble);
  std::cout << "  losses    ";
  if (summed_elsewhere) {
    const at::Tensor excess =
        (our_losses - their_losses).abs() - step_bounds;
    EXPECT_LE(excess.max().item<double>(), 0)
        << "per-step losses " << our_losses << " vs " << their_losses
        << " beyond 2 t x the logit bound " << logit_bound;
    std::cout << (our_losses - their_losses).abs().max().item<double>()
              << " (bounds 2 t x " << 2 * logit_bound << ")\n";
  } else {
    std::cout << ExpectWithin(our_losses, their_losses, /*bound=*/0,
                              "per-step losses")
              << "\n";
  }
  const double parameter_bound =
      summed_elsewhere ? 2.02 * lr_sum : kParameterBound;
  double worst_param = 0;
  for (const NamedParameter& p : params) {
    worst_param = std::max(
        worst_param,
        ExpectWithin(p.tensor.detach(),
                     ReadRaw(out + "final." + p.name + ".f32",
                             p.tensor.sizes(), at::kFloat),
                     parameter_bound,
                     absl::StrCat("parameter ", p.name, " after ",
                                  config.steps(), " steps")));
  }
  std::cout << "  parameters after " << config.steps() << " AdamW steps "
            << worst_param << " (bound " << parameter_bound << ")\n";
  if (bf16) {
    ExpectBf16NearFp32Math(dir + "/python_fp32/", logits, losses, params,
                           lr_sum);
  }
}

TEST(PyTorchReference, InitBatchesLogitsGradientsAndThreeAdamWStepsMatch) {
  CompareWithPyTorch({.name = "fp32"});
}

// oneDNN's GEMMs sum in another order than PyTorch's OpenBLAS: within the
// summation bound (docs/gemm.md), with and without dropout, accumulation and
// recomputation.
TEST(PyTorchReference, OneDnnGemmsStayWithinTheSummationBound) {
  CompareWithPyTorch({.name = "onednn_fp32", .gemm = gemm::Backend::kOneDnn});
}

TEST(PyTorchReference, OneDnnGemmsWithDropoutAccumulationAndCheckpointing) {
  CompareWithPyTorch({.name = "onednn_checkpointing",
                      .dropout = 0.1,
                      .grad_accum = 2,
                      .activation_checkpointing = true,
                      .gemm = gemm::Backend::kOneDnn});
}

// Under bf16 autocast both backends run LibTorch's own bf16 kernels: as
// bit-identical to PyTorch's autocast as the BLAS backend.
TEST(PyTorchReference, OneDnnBackendLeavesBf16OnLibTorchsKernels) {
  CompareWithPyTorch({.name = "onednn_bf16",
                      .precision = "bf16",
                      .gemm = gemm::Backend::kOneDnn});
}

TEST(PyTorchReference, MatchesWithCounterKeyedDropoutToo) {
  CompareWithPyTorch({.name = "dropout", .dropout = 0.1});
}

TEST(PyTorchReference, TwoMicroBatchesMatchAccumulatedReference) {
  CompareWithPyTorch({.name = "grad_accum_2", .grad_accum = 2});
}

TEST(PyTorchReference, ActivationCheckpointingMatchesPlainReference) {
  CompareWithPyTorch({.name = "checkpointing",
                      .dropout = 0.1,
                      .activation_checkpointing = true});
}

// Against PyTorch's own bf16 autocast it is as bit-identical as fp32 (the same
// kernels again); against fp32 math it stays within ExpectBf16NearFp32Math's
// bounds.
TEST(PyTorchReference, Bf16MatchesAutocastReferenceAndStaysNearFp32Math) {
  CompareWithPyTorch({.name = "bf16", .precision = "bf16"});
}

}  // namespace
}  // namespace mtb
