#include "trainer/cuda/kernel_refs_maker.h"

#include <cmath>
#include <limits>
#include <utility>

#include "ATen/ATen.h"
#include "glog/logging.h"
#include "trainer/model/optimizer.h"

namespace mtb {
namespace cuda {
namespace {

// Unit roundoffs: fp32 (24-bit significand) and bf16 (8-bit).
constexpr double kU = 0x1p-24;
constexpr double kUb = 0x1p-8;
constexpr double kLayerNormEps = 1e-5;  // common/nn/layers.h's default

at::TensorOptions F32() { return at::TensorOptions().dtype(at::kFloat); }

// fp32 inputs (exactly representable), drawn from `generator`.
at::Tensor Draw(at::Generator& generator, at::IntArrayRef shape, double scale,
                double offset = 0) {
  return at::randn(shape, generator, F32()).mul_(scale).add_(offset);
}

at::Tensor D(const at::Tensor& t) { return t.to(at::kDouble); }

RefTensor Ref(const std::string& name, const at::Tensor& tensor) {
  RefTensor ref;
  ref.name = name;
  switch (tensor.scalar_type()) {
    case at::kFloat:
      ref.dtype = RefDtype::kF32;
      break;
    case at::kDouble:
      ref.dtype = RefDtype::kF64;
      break;
    case at::kInt:
      ref.dtype = RefDtype::kI32;
      break;
    default:
      LOG(FATAL) << name << ": unsupported dtype " << tensor.scalar_type();
  }
  ref.shape = tensor.sizes().vec();
  const at::Tensor values = tensor.to(at::kDouble).contiguous();
  ref.values.assign(values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
  return ref;
}

double Max(const at::Tensor& t) { return t.abs().max().item<double>(); }

void Output(KernelRef* kernel, const std::string& name, const at::Tensor& value,
            double bound_fp32, double bound_bf16) {
  kernel->outputs.push_back(Ref(name, D(value)));
  kernel->bound_fp32[name] = bound_fp32;
  kernel->bound_bf16[name] = bound_bf16;
}

// Per row of `x` (..., C): max - min (a softmax's exponent range).
at::Tensor RowRange(const at::Tensor& x) {
  return std::get<0>(x.max(-1)) - std::get<0>(x.min(-1));
}

at::Tensor CausalMask(int64_t t) {  // true where key > query
  return at::ones({t, t}, at::TensorOptions().dtype(at::kBool)).triu(1);
}

// out = wte[tokens] + wpe[position]: one rounding.
KernelRef EmbeddingForward(const RefShape& s, at::Generator& g) {
  KernelRef k;
  k.name = "embedding_forward";
  const at::Tensor tokens = at::randint(s.vocab, {s.batch, s.seq_len}, g, at::kInt);
  const at::Tensor wte = Draw(g, {s.vocab, s.d_model}, 0.5);
  const at::Tensor wpe = Draw(g, {s.seq_len, s.d_model}, 0.5);
  k.inputs = {Ref("tokens", tokens), Ref("wte", wte), Ref("wpe", wpe)};
  const at::Tensor gathered = D(wte).index_select(0, tokens.flatten().to(at::kLong))
                                  .view({s.batch, s.seq_len, s.d_model});
  const at::Tensor out = gathered + D(wpe).unsqueeze(0);
  const double m = Max(gathered.abs() + D(wpe).abs().unsqueeze(0));
  Output(&k, "out", out, 1 * kU * m, 1 * kU * m + 3 * kUb * m);
  return k;
}

// dwte[v] = sum of the dout rows whose token is v (at most N terms, any
// order: gamma_N), dwpe[t] = sum over the batch (gamma_B). Tokens from a
// small range so that rows share tokens.
KernelRef EmbeddingBackward(const RefShape& s, at::Generator& g) {
  KernelRef k;
  k.name = "embedding_backward";
  const int64_t n = s.batch * s.seq_len;
  const at::Tensor tokens = at::randint(12, {s.batch, s.seq_len}, g, at::kInt);
  const at::Tensor dout = Draw(g, {s.batch, s.seq_len, s.d_model}, 1.0);
  k.inputs = {Ref("tokens", tokens), Ref("dout", dout),
              Ref("vocab", at::full({1}, s.vocab, at::kInt))};
  const at::Tensor index = tokens.flatten().to(at::kLong);
  const at::Tensor rows = D(dout).view({n, s.d_model});
  const at::Tensor dwte = at::zeros({s.vocab, s.d_model}, at::kDouble).index_add_(0, index, rows);
  const double m_wte =
      Max(at::zeros({s.vocab, s.d_model}, at::kDouble).index_add_(0, index, rows.abs()));
  Output(&k, "dwte", dwte, n * kU * m_wte, n * kU * m_wte + 2 * kUb * m_wte);
  const double m_wpe = Max(D(dout).abs().sum(0));
  Output(&k, "dwpe", D(dout).sum(0), s.batch * kU * m_wpe,
         s.batch * kU * m_wpe + 2 * kUb * m_wpe);
  return k;
}

// LayerNorm forward over C = D, rows offset from 0 so that the mean's error
// matters: kappa = max over rows of mean|x| / sigma scales the cancellation in
// x - mean and in the variance (first order: (C + 8)(1 + kappa) u relative on
// the normalised value and on rstd; rsqrtf's 2 ulp included).
KernelRef LayerNormForward(const RefShape& s, at::Generator& g) {
  KernelRef k;
  k.name = "layernorm_forward";
  const int64_t n = s.batch * s.seq_len, c = s.d_model;
  const at::Tensor x = Draw(g, {n, c}, 2.0, 0.5).add_(Draw(g, {n, 1}, 1.0));
  const at::Tensor w = Draw(g, {c}, 0.1, 1.0);
  const at::Tensor b = Draw(g, {c}, 0.1);
  k.inputs = {Ref("x", x), Ref("weight", w), Ref("bias", b)};
  auto [y, mean, rstd] = at::native_layer_norm(D(x), {c}, D(w), D(b), kLayerNormEps);
  const at::Tensor mean_abs = D(x).abs().mean(-1, true);
  const double kappa = Max(mean_abs * rstd);
  const double kappa_x = Max((D(x) - mean).abs() * rstd) + kappa;
  const double rel = (c + 8) * (1 + kappa) * kU;
  const double bf16_rel = (2 + 2 * kappa_x) * kUb;
  const at::Tensor norm = (D(x) - mean) * rstd;
  const double m_y = Max((norm.abs() + 1) * D(w).abs() + D(b).abs());
  Output(&k, "y", y, 2 * rel * m_y, 2 * rel * m_y + bf16_rel * m_y);
  const double m_mean = Max(mean_abs);
  Output(&k, "mean", mean.view({n}), (c + 1) * kU * m_mean,
         (c + 1) * kU * m_mean + kUb * m_mean);
  const double m_rstd = Max(rstd);
  Output(&k, "rstd", rstd.view({n}), rel * m_rstd, rel * m_rstd + bf16_rel * m_rstd);
  return k;
}

// LayerNorm backward with the forward's mean and rstd given (as the step
// keeps them): dx = rstd (dn - mean(dn) - norm mean(dn norm)), dn = dout w:
// two C-term means (gamma_C) and a few roundings; dw, db: N-term column sums.
KernelRef LayerNormBackward(const RefShape& s, at::Generator& g) {
  KernelRef k;
  k.name = "layernorm_backward";
  const int64_t n = s.batch * s.seq_len, c = s.d_model;
  const at::Tensor x = Draw(g, {n, c}, 2.0, 0.5);
  const at::Tensor w = Draw(g, {c}, 0.1, 1.0);
  const at::Tensor b = Draw(g, {c}, 0.1);
  const at::Tensor dout = Draw(g, {n, c}, 1.0);
  auto forward = at::native_layer_norm(x, {c}, w, b, kLayerNormEps);
  const at::Tensor mean = std::get<1>(forward).view({n}).to(at::kFloat);
  const at::Tensor rstd = std::get<2>(forward).view({n}).to(at::kFloat);
  k.inputs = {Ref("dout", dout), Ref("x", x),       Ref("weight", w),
              Ref("mean", mean), Ref("rstd", rstd)};
  auto [dx, dw, db] = at::native_layer_norm_backward(
      D(dout), D(x), {c}, D(mean).view({n, 1}), D(rstd).view({n, 1}), D(w), D(b),
      {true, true, true});
  const at::Tensor norm = (D(x) - D(mean).view({n, 1})) * D(rstd).view({n, 1});
  const at::Tensor dn = (D(dout) * D(w)).abs();
  const at::Tensor m_dx = D(rstd).view({n, 1}) *
                          (dn + dn.mean(-1, true) + norm.abs() * (dn * norm.abs()).mean(-1, true));
  Output(&k, "dx", dx, (c + 8) * kU * Max(m_dx), (c + 8) * kU * Max(m_dx) + 3 * kUb * Max(m_dx));
  const double m_dw = Max((D(dout).abs() * norm.abs()).sum(0));
  Output(&k, "dweight", dw, (n + 4) * kU * m_dw, (n + 4) * kU * m_dw + 3 * kUb * m_dw);
  const double m_db = Max(D(dout).abs().sum(0));
  Output(&k, "dbias", db, n * kU * m_db, n * kU * m_db + 2 * kUb * m_db);
  return k;
}

// y = x W^T + b (torch.nn.Linear): D products and the bias, any order:
// gamma_{D+2} (|x| |W|^T + |b|).
KernelRef LinearForward(const RefShape& s, at::Generator& g) {
  KernelRef k;
  k.name = "linear_forward";
  const int64_t n = s.batch * s.seq_len, in = s.d_model, out = 3 * s.d_model;
  const at::Tensor x = Draw(g, {n, in}, 1.0);
  const at::Tensor w = Draw(g, {out, in}, 0.1);
  const at::Tensor b = Draw(g, {out}, 0.1);
  k.inputs = {Ref("x", x), Ref("weight", w), Ref("bias", b)};
  const at::Tensor y = at::linear(D(x), D(w), D(b));
  const double m = Max(at::linear(D(x).abs(), D(w).abs(), D(b).abs()));
  Output(&k, "y", y, (in + 2) * kU * m, (in + 2) * kU * m + 3 * kUb * m);
  return k;
}

// dx = dy W (3D terms), dW = dy^T x (N terms), db = sum dy (N terms).
KernelRef LinearBackward(const RefShape& s, at::Generator& g) {
  KernelRef k;
  k.name = "linear_backward";
  const int64_t n = s.batch * s.seq_len, in = s.d_model, out = 3 * s.d_model;
  const at::Tensor x = Draw(g, {n, in}, 1.0);
  const at::Tensor w = Draw(g, {out, in}, 0.1);
  const at::Tensor dy = Draw(g, {n, out}, 1.0);
  k.inputs = {Ref("x", x), Ref("weight", w), Ref("dy", dy)};
  const double m_dx = Max(D(dy).abs().matmul(D(w).abs()));
  Output(&k, "dx", D(dy).matmul(D(w)), (out + 1) * kU * m_dx,
         (out + 1) * kU * m_dx + 3 * kUb * m_dx);
  const double m_dw = Max(D(dy).abs().t().matmul(D(x).abs()));
  Output(&k, "dweight", D(dy).t().matmul(D(x)), (n + 1) * kU * m_dw,
         (n + 1) * kU * m_dw + 3 * kUb * m_dw);
  const double m_db = Max(D(dy).abs().sum(0));
  Output(&k, "dbias", D(dy).sum(0), n * kU * m_db, n * kU * m_db + 2 * kUb * m_db);
  return k;
}

// GELU, exact: 0.5 x (1 + erf(x / sqrt 2)); erff's 2 ulp, the argument's
// rounding (its effect on erf is below 1 ulp of 1) and three roundings:
// 8 u |x| (an absolute bound: 1 + erf cancels for x << 0).
KernelRef GeluForward(const RefShape& s, at::Generator& g) {
  KernelRef k;
  k.name = "gelu_forward";
  const at::Tensor x = Draw(g, {s.batch * s.seq_len, 4 * s.d_model}, 2.0);
  k.inputs = {Ref("x", x)};
  const double m = Max(D(x));
  Output(&k, "y", at::gelu(D(x)), 8 * kU * m, 8 * kU * m + 2 * kUb * m);
  return k;
}

// dx = dy (Phi(x) + x phi(x)): Phi as above, expf's 2 ulp on phi with the
// argument's x^2 rounding: 16 u |dy| (1 + |x|).
KernelRef GeluBackward(const RefShape& s, at::Generator& g) {
  KernelRef k;
  k.name = "gelu_backward";
  const at::Tensor x = Draw(g, {s.batch * s.seq_len, 4 * s.d_model}, 2.0);
  const at::Tensor dy = Draw(g, {s.batch * s.seq_len, 4 * s.d_model}, 1.0);
  k.inputs = {Ref("x", x), Ref("dy", dy)};
  const double m = Max(D(dy).abs() * (1 + D(x).abs()));
  Output(&k, "dx", at::gelu_backward(D(dy), D(x)), 16 * kU * m, 16 * kU * m + 3 * kUb * m);
  return k;
}

// softmax over keys 0..t of a scaled score row; T-term sum, expf's 2 ulp,
// and the argument s - max rounded (R u relative on exp, R the row's range):
// (T + 6 + R) u relative on each probability.
double SoftmaxRel(const at::Tensor& scores, int64_t t) {
  // The range over the causal part only: future keys take the row's first
  // score (always visible), which leaves its max and min unchanged.
  const at::Tensor first = scores.select(-1, 0).unsqueeze(-1).expand_as(scores);
  const at::Tensor visible = at::where(CausalMask(t), first, scores);
  return (t + 6 + Max(RowRange(visible))) * kU;
}

at::Tensor CausalSoftmax(const at::Tensor& scores, int64_t t, int64_t shift = 0) {
  const at::Tensor future =
      at::ones({t, t}, at::TensorOptions().dtype(at::kBool)).triu(1 + shift);
  return scores.masked_fill(future, -std::numeric_limits<double>::infinity()).softmax(-1);
}

KernelRef CausalSoftmaxForwardRef(const RefShape& s, at::Generator& g) {
  KernelRef k;
  k.name = "causal_softmax_forward";
  const at::Tensor scores = Draw(g, {s.batch, s.n_heads, s.seq_len, s.seq_len}, 3.0);
  k.inputs = {Ref("scores", scores)};
  const at::Tensor att = CausalSoftmax(D(scores), s.seq_len);
  const double rel = SoftmaxRel(D(scores), s.seq_len);
  const double m = Max(att);
  const double bf16 = (2 * Max(D(scores)) + 1) * kUb * m;
  Output(&k, "att", att, rel * m, rel * m + bf16);
  return k;
}

// ds = att (datt - sum att datt): a T-term dot and 4 roundings.
KernelRef CausalSoftmaxBackwardRef(const RefShape& s, at::Generator& g) {
  KernelRef k;
  k.name = "causal_softmax_backward";
  const at::Tensor scores = Draw(g, {s.batch, s.n_heads, s.seq_len, s.seq_len}, 3.0);
  const at::Tensor att = CausalSoftmax(scores, s.seq_len).to(at::kFloat);
  const at::Tensor datt = Draw(g, {s.batch, s.n_heads, s.seq_len, s.seq_len}, 1.0);
  k.inputs = {Ref("att", att), Ref("datt", datt)};
  const at::Tensor ds = at::_softmax_backward_data(D(datt), D(att), -1, at::kDouble);
  const at::Tensor a = D(att), dd = D(datt).abs();
  const double m = Max(a * (dd + (a * dd).sum(-1, true)));
  Output(&k, "dscores", ds, (s.seq_len + 4) * kU * m,
         (s.seq_len + 4) * kU * m + 3 * kUb * m);
  return k;
}

struct Heads {
  at::Tensor q, k, v;  // (B, H, T, hs)
};

Heads SplitHeads(const at::Tensor& qkv, const RefShape& s) {
  const int64_t hs = s.d_model / s.n_heads;
  const std::vector<at::Tensor> parts = qkv.split(s.d_model, 2);
  auto heads = [&](const at::Tensor& t) {
    return t.view({s.batch, s.seq_len, s.n_heads, hs}).transpose(1, 2);
  };
  return {heads(parts[0]), heads(parts[1]), heads(parts[2])};
}

at::Tensor MergeHeads(const at::Tensor& y, const RefShape& s) {
  return y.transpose(1, 2).reshape({s.batch, s.seq_len, s.d_model});
}

// qkv (B, T, 3D) -> y (B, T, D) and att (B, H, T, T), as
// nn::CausalSelfAttention between its two linear layers. The scores' error
// ds = (hs + 2) u max(|q||k|^T scale) moves each probability by at most
// 2 ds relative, so att: ((T + 6 + R) u + 2 ds) max att; y = att v adds a
// T-term sum: ((T + 1) u + that) max(att |v|).
KernelRef AttentionForward(const RefShape& s, at::Generator& g) {
  KernelRef k;
  k.name = "attention_forward";
  const int64_t hs = s.d_model / s.n_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  const at::Tensor qkv = Draw(g, {s.batch, s.seq_len, 3 * s.d_model}, 1.0);
  k.inputs = {Ref("qkv", qkv), Ref("n_heads", at::full({1}, s.n_heads, at::kInt))};
  const Heads h = SplitHeads(D(qkv), s);
  const at::Tensor scores = h.q.matmul(h.k.transpose(-2, -1)) * scale;
  const at::Tensor att = CausalSoftmax(scores, s.seq_len);
  const at::Tensor y = MergeHeads(att.matmul(h.v), s);
  const double d_scores =
      (hs + 2) * kU * Max(h.q.abs().matmul(h.k.abs().transpose(-2, -1)) * scale);
  const double d_scores_bf16 = 2 * kUb * Max(h.q.abs().matmul(h.k.abs().transpose(-2, -1)) * scale);
  const double rel_p = SoftmaxRel(scores, s.seq_len) + 2 * d_scores;
  const double rel_p_bf16 = 2 * d_scores_bf16 + kUb;
  const double m_att = Max(att), m_y = Max(att.matmul(h.v.abs()));
  Output(&k, "y", y, ((s.seq_len + 1) * kU + rel_p) * m_y,
         ((s.seq_len + 1) * kU + rel_p + rel_p_bf16 + 2 * kUb) * m_y);
  Output(&k, "att", att, rel_p * m_att, (rel_p + rel_p_bf16) * m_att);
  return k;
}

// The attention's backward from qkv, the forward's att and dy to dq, dk, dv
// (the three parts of dqkv). datt = dy v^T (hs terms: error da); the softmax
// backward adds (T + 4) u of its magnitude and passes 2 att da; dq = scale ds
// k sums T terms ((T + 2) u of its magnitude) and carries T dds max|k|; dk the
// same with q; dv = att^T dy, T terms.
KernelRef AttentionBackward(const RefShape& s, at::Generator& g) {
  KernelRef k;
  k.name = "attention_backward";
  const int64_t hs = s.d_model / s.n_heads, t = s.seq_len;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  const at::Tensor qkv = Draw(g, {s.batch, t, 3 * s.d_model}, 1.0);
  const Heads h32 = SplitHeads(qkv, s);
  const at::Tensor att =
      CausalSoftmax(D(h32.q).matmul(D(h32.k).transpose(-2, -1)) * scale, t).to(at::kFloat);
  const at::Tensor dy = Draw(g, {s.batch, t, s.d_model}, 1.0);
  k.inputs = {Ref("qkv", qkv), Ref("att", att), Ref("dy", dy),
              Ref("n_heads", at::full({1}, s.n_heads, at::kInt))};
  const Heads h = SplitHeads(D(qkv), s);
  const at::Tensor a = D(att);
  const at::Tensor dyh = D(dy).view({s.batch, t, s.n_heads, hs}).transpose(1, 2);
  const at::Tensor datt = dyh.matmul(h.v.transpose(-2, -1));
  const at::Tensor dv = a.transpose(-2, -1).matmul(dyh);
  const at::Tensor ds = at::_softmax_backward_data(datt, a, -1, at::kDouble);
  const at::Tensor dq = ds.matmul(h.k) * scale;
  const at::Tensor dk = ds.transpose(-2, -1).matmul(h.q) * scale;
  const double da = hs * kU * Max(dyh.abs().matmul(h.v.abs().transpose(-2, -1)));
  const at::Tensor datt_abs = datt.abs();
  const double dds = (t + 4) * kU * Max(a * (datt_abs + (a * datt_abs).sum(-1, true))) +
                     2 * Max(a) * da;
  const double m_dq = Max(ds.abs().matmul(h.k.abs()) * scale);
  const double m_dk = Max(ds.abs().transpose(-2, -1).matmul(h.q.abs()) * scale);
  const double m_dv = Max(a.transpose(-2, -1).matmul(dyh.abs()));
  const double b_dq = (t + 2) * kU * m_dq + t * dds * Max(h.k) * scale;
  const double b_dk = (t + 2) * kU * m_dk + t * dds * Max(h.q) * scale;
  const double b_dv = (t + 1) * kU * m_dv;
  Output(&k, "dq", MergeHeads(dq, s), b_dq, b_dq + 4 * kUb * m_dq);
  Output(&k, "dk", MergeHeads(dk, s), b_dk, b_dk + 4 * kUb * m_dk);
  Output(&k, "dv", MergeHeads(dv, s), b_dv, b_dv + 3 * kUb * m_dv);
  return k;
}

// losses[n] = logsumexp(logits[n]) - logits[n, target]: the V-term sum and
// exp as in the softmax, log and two roundings of |lse| + |logit|; dlogits =
// (softmax - onehot) / N with four more roundings.
KernelRef Classifier(const RefShape& s, at::Generator& g) {
  KernelRef k;
  k.name = "classifier";
  const int64_t n = s.batch * s.seq_len;
  const at::Tensor logits = Draw(g, {n, s.vocab}, 2.0);
  const at::Tensor targets = at::randint(s.vocab, {n}, g, at::kInt);
  k.inputs = {Ref("logits", logits), Ref("targets", targets)};
  const at::Tensor l = D(logits).set_requires_grad(true);
  const at::Tensor target = targets.to(at::kLong);
  const at::Tensor losses =
      at::cross_entropy_loss(l, target, {}, at::Reduction::None).detach();
  at::cross_entropy_loss(l, target).backward();
  const at::Tensor dlogits = l.grad();
  const double range = Max(RowRange(D(logits)));
  const at::Tensor lse = D(logits).logsumexp(-1);
  const double m_loss = Max(1 + lse.abs() + D(logits).gather(1, target.unsqueeze(1)).abs());
  const double rel = (s.vocab + 6 + range) * kU;
  const double bf16_rel = (2 * Max(D(logits)) + 1) * kUb;
  Output(&k, "losses", losses, rel * m_loss, (rel + bf16_rel) * m_loss);
  const at::Tensor onehot = at::zeros({n, s.vocab}, at::kDouble).scatter_(1, target.unsqueeze(1), 1.0);
  const double m_grad = Max((D(logits).softmax(-1) + onehot) / n);
  Output(&k, "dlogits", dlogits, (rel + 4 * kU) * m_grad, (rel + 4 * kU + bf16_rel) * m_grad);
  return k;
}

// The step's optimizer: the gradient's norm (n squares summed in any order:
// (n + 1) u relative on the sum, half on the root, + 2 u), clipping
// (max / (norm + 1e-6), rounded to fp32), AdamW as the trainer's AdamWUpdate
// on two tensors (decayed, not). m and v carry the clip coefficient's
// relative error (once, twice) and a few roundings; p's update
// step_size m / (sqrt(v / bc2) + eps) is bounded element by element from
// those (v has no cancellation, m may).
KernelRef GradNormClipAdamW(const RefShape& s, at::Generator& g) {
  (void)s;
  KernelRef k;
  k.name = "grad_norm_clip_adamw";
  const int64_t n0 = 1000, n1 = 700, n = n0 + n1;
  const int64_t step = 3;
  const double lr = 1e-3, max_norm = 1.0;
  AdamWOptions options;
  options.weight_decay = 0.1;
  const at::Tensor p = Draw(g, {n}, 0.5);
  const at::Tensor grad = Draw(g, {n}, 1.0);
  const at::Tensor m = Draw(g, {n}, 0.01);
  const at::Tensor v = Draw(g, {n}, 1e-2).square_();
  k.inputs = {Ref("p", p), Ref("g", grad), Ref("m", m), Ref("v", v),
              Ref("tensor_numel", at::tensor({static_cast<int>(n0), static_cast<int>(n1)},
                                             at::kInt)),
              Ref("tensor_decay", at::tensor({1, 0}, at::kInt)),
              Ref("settings", at::tensor({static_cast<double>(step), lr, max_norm,
                                          options.beta1, options.beta2, options.eps,
                                          options.weight_decay},
                                         at::kDouble))};
  const double norm = D(grad).norm().item<double>();
  CHECK_GT(norm, max_norm) << "the reference must clip";
  const double clip = max_norm / (norm + 1e-6);
  AdamWSlice slice;
  slice.param = D(p).clone();
  slice.grad = D(grad) * clip;
  slice.exp_avg = D(m).clone();
  slice.exp_avg_sq = D(v).clone();
  slice.decay = {{0, n0, true}, {n0, n1, false}};
  AdamWUpdate(slice, step, lr, options);

  const double norm_rel = ((n + 1) / 2.0 + 2) * kU;
  Output(&k, "grad_norm", at::tensor({norm}, at::kDouble), norm_rel * norm,
         (norm_rel + kUb) * norm);
  for (bool bf16 : {false, true}) {
    // bf16: the gradient arrives rounded to bf16 (the optimizer stays fp32).
    const double grad_rel = norm_rel + 2 * kU + (bf16 ? kUb : 0);
    const at::Tensor gc = (D(grad) * clip).abs();
    const at::Tensor m_mag = options.beta1 * D(m).abs() + (1 - options.beta1) * gc;
    const at::Tensor dm = (4 * kU + grad_rel) * m_mag;
    const at::Tensor v_mag = options.beta2 * D(v) + (1 - options.beta2) * gc.square();
    const double v_rel = 5 * kU + 2 * grad_rel;
    const double bc1 = 1 - std::pow(options.beta1, step);
    const double bc2 = 1 - std::pow(options.beta2, step);
    const at::Tensor den = slice.exp_avg_sq.sqrt() / std::sqrt(bc2) + options.eps;
    const at::Tensor update = (lr / bc1) * slice.exp_avg.abs() / den;
    const at::Tensor dp = (lr / bc1) * (dm / den) + update * (v_rel / 2 + 6 * kU) +
                          2 * kU * (D(p).abs() + update);
    auto set = [&](const std::string& name, const at::Tensor& value, double bound) {
      if (!bf16) {
        k.outputs.push_back(Ref(name, value));
        k.bound_fp32[name] = bound;
      } else {
        k.bound_bf16[name] = bound;
      }
    };
    set("p", slice.param, Max(dp));
    set("m", slice.exp_avg, Max(dm));
    set("v", slice.exp_avg_sq, v_rel * Max(v_mag));
  }
  return k;
}

}  // namespace

std::vector<std::string> KernelRefNames() {
  return {"embedding_forward",       "embedding_backward",   "layernorm_forward",
          "layernorm_backward",      "linear_forward",       "linear_backward",
          "gelu_forward",            "gelu_backward",        "causal_softmax_forward",
          "causal_softmax_backward", "attention_forward",    "attention_backward",
          "classifier",              "grad_norm_clip_adamw"};
}

KernelRefs MakeKernelRefs(const RefShape& shape, uint64_t seed) {
  CHECK_EQ(shape.d_model % shape.n_heads, 0);
  at::Generator generator = at::detail::createCPUGenerator(seed);
  KernelRefs refs;
  refs.seed = seed;
  for (auto make : {EmbeddingForward, EmbeddingBackward, LayerNormForward,
                    LayerNormBackward, LinearForward, LinearBackward, GeluForward,
                    GeluBackward, CausalSoftmaxForwardRef, CausalSoftmaxBackwardRef,
                    AttentionForward, AttentionBackward, Classifier, GradNormClipAdamW}) {
    refs.kernels.push_back(make(shape, generator));
  }
  return refs;
}

}  // namespace cuda
}  // namespace mtb
