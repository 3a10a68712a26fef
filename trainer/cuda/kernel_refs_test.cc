// The per-kernel reference files: the folder round-trips bit for bit, the
// derived bounds hold for LibTorch's own fp32 kernels (so a correct GPU kernel
// is not failed by a bound that is too tight) and the bf16 bounds for the bf16
// step's rounding points emulated with LibTorch, and a planted off-by-one, a
// missing output or a damaged file fail.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>

#include "ATen/ATen.h"
#include "gtest/gtest.h"
#include "trainer/cuda/kernel_refs.h"
#include "trainer/cuda/kernel_refs_maker.h"

namespace mtb {
namespace cuda {
namespace {

constexpr uint64_t kSeed = 7;

const KernelRefs& Refs() {
  static const KernelRefs* refs = new KernelRefs(MakeKernelRefs(RefShape(), kSeed));
  return *refs;
}

std::string FreshDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

at::Tensor ToTensor(const RefTensor& ref) {
  const at::Tensor t =
      at::tensor(at::ArrayRef<double>(ref.values), at::kDouble).view(ref.shape);
  switch (ref.dtype) {
    case RefDtype::kF32:
      return t.to(at::kFloat);
    case RefDtype::kI32:
      return t.to(at::kLong);
    case RefDtype::kF64:
      return t;
  }
  return t;
}

std::vector<double> Values(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kDouble).contiguous();
  return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
}

at::Tensor Causal(const at::Tensor& scores, int64_t shift) {
  const int64_t t = scores.size(-1);
  const at::Tensor future =
      at::ones({t, t}, at::TensorOptions().dtype(at::kBool)).triu(1 + shift);
  return scores.masked_fill(future, -std::numeric_limits<float>::infinity()).softmax(-1);
}

// LibTorch's fp32 kernels on the references' fp32 inputs: what a correct
// fp32 implementation may return. `shift` plants an off-by-one (the causal
// mask lets each query see one future key; the embedding reads the next
// token's row).
KernelRunner Fp32Runner(int64_t shift) {
  return [shift](const KernelRef& k, std::map<std::string, std::vector<double>>* out) {
    auto in = [&](const std::string& name) { return ToTensor(*k.Input(name)); };
    if (k.name == "layernorm_forward") {
      const int64_t c = in("x").size(1);
      auto [y, mean, rstd] = at::native_layer_norm(in("x"), {c}, in("weight"), in("bias"), 1e-5);
      (*out)["y"] = Values(y);
      (*out)["mean"] = Values(mean);
      (*out)["rstd"] = Values(rstd);
    } else if (k.name == "linear_forward") {
      (*out)["y"] = Values(at::linear(in("x"), in("weight"), in("bias")));
    } else if (k.name == "causal_softmax_forward") {
      (*out)["att"] = Values(Causal(in("scores"), shift));
    } else if (k.name == "embedding_forward") {
      const at::Tensor wte = in("wte");
      const at::Tensor tokens = (in("tokens") + shift).remainder(wte.size(0));
      (*out)["out"] = Values(wte.index_select(0, tokens.flatten()).view(
                                 {tokens.size(0), tokens.size(1), wte.size(1)}) +
                             in("wpe").unsqueeze(0));
    } else if (k.name == "classifier") {
      const at::Tensor logits = in("logits").set_requires_grad(true);
      (*out)["losses"] = Values(
          at::cross_entropy_loss(logits, in("targets"), {}, at::Reduction::None).detach());
      at::cross_entropy_loss(logits, in("targets")).backward();
      (*out)["dlogits"] = Values(logits.grad());
    } else {
      return std::string("no fp32 stand-in for ") + k.name;
    }
    return std::string();
  };
}

const std::vector<std::string> kStandIns = {"embedding_forward", "layernorm_forward",
                                            "linear_forward", "causal_softmax_forward",
                                            "classifier"};

// Rounded to bf16 (to nearest even) and widened back.
at::Tensor Bf16(const at::Tensor& t) { return t.to(at::kBFloat16).to(at::kFloat); }

// The bf16 step's kernels emulated with LibTorch at its rounding points
// (docs/gpu.md "The bf16 step"; gpt_cuda.cu's RunReferenceKernelAs<bf16>):
// what the bf16 step keeps in bf16 is rounded on the way in, fp32 inside,
// bf16 outputs rounded on the way out; the embedding, LayerNorm's input and
// statistics, and the weight and bias gradients stay fp32.
KernelRunner Bf16Runner() {
  return [](const KernelRef& k, std::map<std::string, std::vector<double>>* out) {
    auto in = [&](const std::string& name) { return ToTensor(*k.Input(name)); };
    if (k.name == "layernorm_forward") {
      const int64_t c = in("x").size(1);
      auto [y, mean, rstd] = at::native_layer_norm(in("x"), {c}, in("weight"), in("bias"), 1e-5);
      (*out)["y"] = Values(Bf16(y));
      (*out)["mean"] = Values(mean);
      (*out)["rstd"] = Values(rstd);
    } else if (k.name == "layernorm_backward") {
      // dout arrives bf16; x, the weight and the statistics are fp32, and so
      // are all three gradients.
      const at::Tensor x = in("x"), w = in("weight");
      const int64_t n = x.size(0), c = x.size(1);
      auto [dx, dw, db] = at::native_layer_norm_backward(
          Bf16(in("dout")), x, {c}, in("mean").view({n, 1}), in("rstd").view({n, 1}), w,
          at::zeros_like(w), {true, true, true});
      (*out)["dx"] = Values(dx);
      (*out)["dweight"] = Values(dw);
      (*out)["dbias"] = Values(db);
    } else if (k.name == "linear_forward") {
      (*out)["y"] = Values(Bf16(at::linear(Bf16(in("x")), Bf16(in("weight")), Bf16(in("bias")))));
    } else if (k.name == "linear_backward") {
      const at::Tensor dy = Bf16(in("dy")), x = Bf16(in("x")), w = Bf16(in("weight"));
      (*out)["dx"] = Values(Bf16(dy.matmul(w)));
      (*out)["dweight"] = Values(dy.t().matmul(x));
      (*out)["dbias"] = Values(dy.sum(0));
    } else if (k.name == "gelu_forward") {
      (*out)["y"] = Values(Bf16(at::gelu(Bf16(in("x")))));
    } else if (k.name == "gelu_backward") {
      (*out)["dx"] = Values(Bf16(at::gelu_backward(Bf16(in("dy")), Bf16(in("x")))));
    } else if (k.name == "causal_softmax_forward") {
      (*out)["att"] = Values(Bf16(Causal(Bf16(in("scores")), 0)));
    } else if (k.name == "causal_softmax_backward") {
      const at::Tensor att = Bf16(in("att")), datt = Bf16(in("datt"));
      (*out)["dscores"] = Values(Bf16(att * (datt - (att * datt).sum(-1, true))));
    } else if (k.name == "classifier") {
      const at::Tensor logits = Bf16(in("logits")).set_requires_grad(true);
      (*out)["losses"] = Values(
          at::cross_entropy_loss(logits, in("targets"), {}, at::Reduction::None).detach());
      at::cross_entropy_loss(logits, in("targets")).backward();
      (*out)["dlogits"] = Values(Bf16(logits.grad()));
    } else if (k.name == "attention_forward" || k.name == "attention_backward") {
      // As AttentionForward/AttentionBackward<bf16>: every product's operands
      // bf16, accumulated in fp32, its output (scale included) rounded once.
      const at::Tensor qkv = Bf16(in("qkv"));
      const int64_t b = qkv.size(0), t = qkv.size(1), d = qkv.size(2) / 3;
      const int64_t h = static_cast<int64_t>(k.Input("n_heads")->values.at(0)), hs = d / h;
      const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
      auto heads = [&](const at::Tensor& x) { return x.view({b, t, h, hs}).transpose(1, 2); };
      auto rows = [&](const at::Tensor& x) { return x.transpose(1, 2).reshape({b, t, d}); };
      const std::vector<at::Tensor> parts = qkv.split(d, 2);
      const at::Tensor q = heads(parts[0]), kk = heads(parts[1]), v = heads(parts[2]);
      if (k.name == "attention_forward") {
        const at::Tensor att = Bf16(Causal(Bf16(q.matmul(kk.transpose(-2, -1)) * scale), 0));
        (*out)["y"] = Values(Bf16(att.matmul(v)).transpose(1, 2).reshape({b, t, d}));
        (*out)["att"] = Values(att);
      } else {
        const at::Tensor att = Bf16(in("att")), dy = heads(Bf16(in("dy")));
        const at::Tensor datt = Bf16(dy.matmul(v.transpose(-2, -1)));
        const at::Tensor dv = Bf16(att.transpose(-2, -1).matmul(dy));
        const at::Tensor ds = Bf16(att * (datt - (att * datt).sum(-1, true)));
        (*out)["dq"] = Values(rows(Bf16(ds.matmul(kk) * scale)));
        (*out)["dk"] = Values(rows(Bf16(ds.transpose(-2, -1).matmul(q) * scale)));
        (*out)["dv"] = Values(rows(dv));
      }
    } else if (k.name == "embedding_forward") {
      return Fp32Runner(0)(k, out);
    } else {
      return std::string("no bf16 stand-in for ") + k.name;
    }
    return std::string();
  };
}

const std::vector<std::string> kBf16StandIns = {
    "embedding_forward", "layernorm_forward",      "layernorm_backward", "linear_forward",
    "linear_backward",   "gelu_forward",           "gelu_backward",
    "causal_softmax_forward", "causal_softmax_backward", "attention_forward",
    "attention_backward", "classifier"};

TEST(KernelRefs, EveryKernelOfTheCudaPathWithShapesAndBounds) {
  std::vector<std::string> names;
  for (const KernelRef& k : Refs().kernels) {
    names.push_back(k.name);
    EXPECT_FALSE(k.outputs.empty()) << k.name;
    for (const RefTensor& out : k.outputs) {
      EXPECT_EQ(out.dtype, RefDtype::kF64) << k.name << "/" << out.name;
      EXPECT_GT(k.bound_fp32.at(out.name), 0) << k.name << "/" << out.name;
      // bf16 rounds inputs at 2^-8: its bound is looser than fp32's.
      EXPECT_GT(k.bound_bf16.at(out.name), k.bound_fp32.at(out.name))
          << k.name << "/" << out.name;
    }
  }
  EXPECT_EQ(names, KernelRefNames());
  const RefShape s;
  const int64_t n = s.batch * s.seq_len;
  auto shape = [&](const std::string& kernel, const std::string& output) {
    for (const KernelRef& k : Refs().kernels) {
      if (k.name != kernel) continue;
      for (const RefTensor& out : k.outputs) {
        if (out.name == output) return out.shape;
      }
    }
    return std::vector<int64_t>{-1};
  };
  EXPECT_EQ(shape("layernorm_forward", "y"), (std::vector<int64_t>{n, s.d_model}));
  EXPECT_EQ(shape("layernorm_forward", "rstd"), (std::vector<int64_t>{n}));
  EXPECT_EQ(shape("attention_forward", "att"),
            (std::vector<int64_t>{s.batch, s.n_heads, s.seq_len, s.seq_len}));
  EXPECT_EQ(shape("attention_backward", "dk"),
            (std::vector<int64_t>{s.batch, s.seq_len, s.d_model}));
  EXPECT_EQ(shape("classifier", "dlogits"), (std::vector<int64_t>{n, s.vocab}));
  EXPECT_EQ(shape("embedding_backward", "dwte"), (std::vector<int64_t>{s.vocab, s.d_model}));
  EXPECT_EQ(shape("grad_norm_clip_adamw", "grad_norm"), (std::vector<int64_t>{1}));
  EXPECT_EQ(shape("linear_backward", "dweight"),
            (std::vector<int64_t>{3 * s.d_model, s.d_model}));
}

// kernel_refs_dump (the tool the GPU check's folder comes from) writes what
// MakeKernelRefs computes here, bit for bit: the folder round-trips and the
// inputs are a function of the seed alone.
TEST(KernelRefs, TheDumpToolsFolderReadsBackBitForBit) {
  const std::string dir = FreshDir("roundtrip");
  ASSERT_EQ(std::system(("trainer/cuda/kernel_refs_dump --seed=7 " + dir + " > /dev/null").c_str()),
            0);
  // Bad usage: exit 2.
  EXPECT_EQ(WEXITSTATUS(std::system("trainer/cuda/kernel_refs_dump 2> /dev/null")), 2);
  KernelRefs read;
  ASSERT_EQ(ReadKernelRefs(dir, &read), "");
  EXPECT_EQ(read.seed, kSeed);
  ASSERT_EQ(read.kernels.size(), Refs().kernels.size());
  for (size_t i = 0; i < read.kernels.size(); ++i) {
    const KernelRef& a = Refs().kernels[i];
    const KernelRef& b = read.kernels[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.bound_fp32, b.bound_fp32) << a.name;
    EXPECT_EQ(a.bound_bf16, b.bound_bf16) << a.name;
    ASSERT_EQ(a.inputs.size(), b.inputs.size()) << a.name;
    ASSERT_EQ(a.outputs.size(), b.outputs.size()) << a.name;
    for (size_t j = 0; j < a.inputs.size() + a.outputs.size(); ++j) {
      const RefTensor& x = j < a.inputs.size() ? a.inputs[j] : a.outputs[j - a.inputs.size()];
      const RefTensor& y = j < a.inputs.size() ? b.inputs[j] : b.outputs[j - a.inputs.size()];
      EXPECT_EQ(x.name, y.name);
      EXPECT_EQ(x.dtype, y.dtype) << x.name;
      EXPECT_EQ(x.shape, y.shape) << x.name;
      EXPECT_EQ(x.values, y.values) << a.name << "/" << x.name;  // bits
    }
  }
  // The raw file of an fp32 input holds 4 bytes per element.
  EXPECT_EQ(std::filesystem::file_size(dir + "/layernorm_forward.in.x.f32"),
            RefShape().batch * RefShape().seq_len * RefShape().d_model * 4u);
}

// The bounds are not too tight: LibTorch's fp32 kernels (other summation
// orders than fp64's) stay within them, without being equal to the fp64
// reference.
TEST(KernelRefs, LibTorchFp32KernelsPassTheirBounds) {
  const std::vector<CheckLine> lines =
      CheckKernels(Refs(), Fp32Runner(0), CheckPrecision::kFp32, kStandIns);
  ASSERT_EQ(lines.size(), 8u);  // out; y, mean, rstd; y; att; losses, dlogits
  for (const CheckLine& line : lines) {
    std::cout << "fp32 stand-in: " << FormatCheckLine(line) << "\n";
    EXPECT_TRUE(line.pass) << FormatCheckLine(line);
    EXPECT_TRUE(line.detail.empty()) << FormatCheckLine(line);
  }
  int inexact = 0;
  for (const CheckLine& line : lines) inexact += line.max_error > 0;
  EXPECT_GE(inexact, 5) << "fp32 against fp64 should differ somewhere";
}

// The bf16 bounds are not too tight for the bf16 step's rounding points
// (emulated with LibTorch), and they are needed: the same outputs fail the
// fp32 bounds (the negative case).
TEST(KernelRefs, TheBf16StepsRoundingsPassTheBf16Bounds) {
  const std::vector<CheckLine> lines =
      CheckKernels(Refs(), Bf16Runner(), CheckPrecision::kBf16, kBf16StandIns);
  ASSERT_EQ(lines.size(), 22u);
  for (const CheckLine& line : lines) {
    std::cout << "bf16 stand-in: " << FormatCheckLine(line) << "\n";
    EXPECT_TRUE(line.pass) << FormatCheckLine(line);
  }
  int over_fp32 = 0;
  for (const CheckLine& line :
       CheckKernels(Refs(), Bf16Runner(), CheckPrecision::kFp32, kBf16StandIns)) {
    over_fp32 += !line.pass;
  }
  EXPECT_GE(over_fp32, 8) << "bf16 roundings should exceed most fp32 bounds";
}

// The negative case: an off-by-one fails the same comparison by far.
TEST(KernelRefs, PlantedOffByOneFails) {
  const std::vector<CheckLine> lines =
      CheckKernels(Refs(), Fp32Runner(1), CheckPrecision::kFp32,
                   {"causal_softmax_forward", "embedding_forward"});
  ASSERT_EQ(lines.size(), 2u);
  for (const CheckLine& line : lines) {
    std::cout << "planted: " << FormatCheckLine(line) << "\n";
    EXPECT_FALSE(line.pass) << FormatCheckLine(line);
    EXPECT_GT(line.max_error, 100 * line.bound) << FormatCheckLine(line);
    EXPECT_EQ(FormatCheckLine(line).rfind("FAIL " + line.kernel + "/", 0), 0u);
  }
  // Even under the looser bf16 bounds.
  for (const CheckLine& line : CheckKernels(Refs(), Fp32Runner(1), CheckPrecision::kBf16,
                                            {"causal_softmax_forward"})) {
    EXPECT_FALSE(line.pass) << FormatCheckLine(line);
  }
}

TEST(KernelRefs, MissingWrongSizedOrFailedOutputsFail) {
  KernelRunner runner = [](const KernelRef& k, std::map<std::string, std::vector<double>>* out) {
    if (k.name == "gelu_forward") return std::string("device said no");
    if (k.name == "linear_forward") (*out)["y"] = {1.0, 2.0};
    // layernorm_forward: no outputs at all.
    return std::string();
  };
  const std::vector<CheckLine> lines =
      CheckKernels(Refs(), runner, CheckPrecision::kFp32,
                   {"gelu_forward", "linear_forward", "layernorm_forward"});
  ASSERT_EQ(lines.size(), 5u);  // y, mean, rstd; y; gelu's one line
  for (const CheckLine& line : lines) EXPECT_FALSE(line.pass) << FormatCheckLine(line);
  EXPECT_EQ(FormatCheckLine(lines[0]), "FAIL layernorm_forward/y no output");
  EXPECT_EQ(FormatCheckLine(lines[3]), "FAIL linear_forward/y 2 values, want 23040");
  EXPECT_EQ(FormatCheckLine(lines[4]), "FAIL gelu_forward/* device said no");
  // A NaN is an error, not a pass.
  KernelRunner nan = [](const KernelRef& k, std::map<std::string, std::vector<double>>* out) {
    std::vector<double> values = k.outputs[0].values;
    values[3] = std::numeric_limits<double>::quiet_NaN();
    (*out)[k.outputs[0].name] = values;
    return std::string();
  };
  const std::vector<CheckLine> nan_lines =
      CheckKernels(Refs(), nan, CheckPrecision::kFp32, {"gelu_forward"});
  ASSERT_EQ(nan_lines.size(), 1u);
  EXPECT_FALSE(nan_lines[0].pass);
  EXPECT_EQ(nan_lines[0].worst_index, 3);
}

TEST(KernelRefs, DamagedFoldersAreRefusedNamingTheFile) {
  const std::string dir = FreshDir("damaged");
  ASSERT_EQ(WriteKernelRefs(dir, Refs()), "");
  KernelRefs read;
  // A truncated data file.
  const std::string file = dir + "/classifier.out.dlogits.f64";
  std::filesystem::resize_file(file, 16);
  std::string error = ReadKernelRefs(dir, &read);
  EXPECT_NE(error.find("classifier.out.dlogits.f64: 16 bytes"), std::string::npos) << error;
  // Another format.
  { std::ofstream(dir + "/manifest.txt") << "mtb-kernel-refs 2\n"; }
  error = ReadKernelRefs(dir, &read);
  EXPECT_NE(error.find("manifest.txt:1: not a 'mtb-kernel-refs 1' manifest"), std::string::npos)
      << error;
  // An output without a bound.
  {
    std::ofstream(dir + "/manifest.txt")
        << "mtb-kernel-refs 1\nseed 1\nkernel k\noutput y f64 y.bin 1 0\nend\n";
    std::ofstream(dir + "/y.bin");
  }
  error = ReadKernelRefs(dir, &read);
  EXPECT_NE(error.find("manifest.txt:5: output y has no bound"), std::string::npos) << error;
  EXPECT_NE(ReadKernelRefs(dir + "/absent", &read).find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace cuda
}  // namespace mtb
