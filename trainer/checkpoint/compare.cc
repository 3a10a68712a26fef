#include "trainer/checkpoint/compare.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/sha256.h"
#include "common/base/status.h"
#include "common/results/json_io.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config_names.h"
#include "trainer/train_result.pb.h"

namespace mtb::checkpoint {
namespace {

int64_t Numel(const TensorEntry& entry) {
  int64_t numel = 1;
  for (int64_t d : entry.global_shape()) numel *= d;
  return numel;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const int exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) {  // inf, NaN
    const uint32_t bits = sign | 0x7f800000 | (mantissa << 13);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  const float magnitude = exponent == 0
                              ? std::ldexp(static_cast<float>(mantissa), -24)
                              : std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  return sign != 0 ? -magnitude : magnitude;
}

// Element i of raw little-endian `bytes` of `dtype`, as a double.
double ValueAt(const std::string& bytes, const std::string& dtype, int64_t i) {
  const char* p = bytes.data() + i * ElementBytes(dtype);
  if (dtype == "float32") {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (dtype == "bfloat16") {
    uint16_t h;
    std::memcpy(&h, p, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  if (dtype == "float16") {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return HalfToFloat(h);
  }
  if (dtype == "int64") {
    int64_t v;
    std::memcpy(&v, p, 8);
    return static_cast<double>(v);
  }
  if (dtype == "int32") {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  return static_cast<uint8_t>(*p);
}

std::vector<int64_t> IndexNd(int64_t flat, const TensorEntry& entry) {
  std::vector<int64_t> index(entry.global_shape_size());
  for (int d = entry.global_shape_size() - 1; d >= 0; --d) {
    const int64_t size = entry.global_shape(d);
    index[d] = size > 0 ? flat % size : 0;
    flat = size > 0 ? flat / size : 0;
  }
  return index;
}

// The differences of two tensors of the same dtype and shape.
TensorDifference CompareValues(const TensorEntry& entry, const std::string& left,
                               const std::string& right, double tolerance) {
  TensorDifference difference;
  difference.set_name(entry.name());
  difference.set_kind("values");
  const int64_t numel = Numel(entry);
  const int64_t element_bytes = ElementBytes(entry.dtype());
  for (int64_t i = 0; i < numel; ++i) {
    const char* a = left.data() + i * element_bytes;
    const char* b = right.data() + i * element_bytes;
    if (std::memcmp(a, b, element_bytes) == 0) continue;  // bit-equal
    const double x = ValueAt(left, entry.dtype(), i);
    const double y = ValueAt(right, entry.dtype(), i);
    const double gap = std::isnan(x) || std::isnan(y) ? INFINITY : std::fabs(x - y);
    if (gap <= tolerance) continue;
    if (difference.elements_differing() == 0) {
      difference.set_first_index(i);
      for (int64_t d : IndexNd(i, entry)) difference.add_first_index_nd(d);
      difference.set_left_value(x);
      difference.set_right_value(y);
    }
    difference.set_elements_differing(difference.elements_differing() + 1);
    difference.set_max_abs_difference(std::max(difference.max_abs_difference(), gap));
  }
  return difference;
}

struct Side {
  std::string dir;
  CheckpointManifest manifest;
  RankState state;  // rank 0's: the global position (step, samples, keys)
  TrainConfig config;
  std::map<std::string, const TensorEntry*> tensors;
};

absl::StatusOr<Side> Open(const std::string& dir) {
  RETURN_IF_ERROR(Verify(dir));
  Side side;
  side.dir = dir;
  ASSIGN_OR_RETURN(side.manifest, ReadManifest(dir));
  RETURN_IF_ERROR(ReadJsonFile(dir + "/rank_00000.meta", &side.state));
  if (!side.manifest.config_json().empty()) {
    RETURN_IF_ERROR(FromJsonIgnoringUnknownFields(side.manifest.config_json(), &side.config));
  }
  for (const TensorEntry& entry : side.manifest.tensors()) side.tensors[entry.name()] = &entry;
  return side;
}

// The non-tensor parts, each as named lines that do not depend on the
// layout (the micro-step count and the rank do, so they are left out).
std::map<std::string, std::vector<std::string>> StateParts(const Side& side) {
  const RankState& s = side.state;
  const TrainConfig& c = side.config;
  return {
      {"scheduler",
       {absl::StrCat("last_lr ", absl::StrFormat("%.17g", s.last_lr())),
        absl::StrCat("lr ", absl::StrFormat("%.17g", c.lr())),
        absl::StrCat("lr_schedule ", ConfigName(c.lr_schedule())),
        absl::StrCat("lr_warmup_steps ", c.lr_warmup_steps()),
        absl::StrCat("lr_decay_steps ", c.lr_decay_steps()),
        absl::StrCat("min_lr ", absl::StrFormat("%.17g", c.min_lr()))}},
      {"train state",
       {absl::StrCat("step ", s.step()), absl::StrCat("tokens_seen ", s.tokens_seen()),
        absl::StrCat("seed ", s.seed()), absl::StrCat("rng_step ", s.rng_step())}},
      {"data position", {absl::StrCat("data_position ", s.data_position())}},
  };
}

}  // namespace

absl::StatusOr<std::string> ReadGlobalTensor(const std::string& dir,
                                             const CheckpointManifest& manifest,
                                             const TensorEntry& entry) {
  std::string bytes(Numel(entry) * ElementBytes(entry.dtype()), '\0');
  RangeRequest request;
  request.name = entry.name();
  request.dtype = entry.dtype();
  request.global_shape.assign(entry.global_shape().begin(), entry.global_shape().end());
  request.offset = 0;
  request.length = Numel(entry);
  request.destination = bytes.data();
  RETURN_IF_ERROR(ReadTensorRanges(dir, manifest, {request}));
  return bytes;
}

absl::StatusOr<CheckpointComparison> Compare(const std::string& left, const std::string& right,
                                             double tolerance) {
  ASSIGN_OR_RETURN(const Side a, Open(left));
  ASSIGN_OR_RETURN(const Side b, Open(right));
  CheckpointComparison comparison;
  comparison.set_left(left);
  comparison.set_right(right);
  comparison.set_tolerance(tolerance);

  // Tensors, by name, digested by part as they are read.
  Sha256Hasher model_a, model_b, optimizer_a, optimizer_b, other_a, other_b;
  auto hasher = [&](const std::string& name, bool left_side) -> Sha256Hasher& {
    if (name.rfind("model/", 0) == 0) return left_side ? model_a : model_b;
    if (name.rfind("optimizer/", 0) == 0) return left_side ? optimizer_a : optimizer_b;
    return left_side ? other_a : other_b;
  };
  auto digest = [&](const TensorEntry& entry, const std::string& bytes, bool left_side) {
    Sha256Hasher& h = hasher(entry.name(), left_side);
    h.Update(absl::StrCat(entry.name(), "\n", entry.dtype(), "\n",
                          absl::StrJoin(entry.global_shape(), "x"), "\n", bytes.size(), "\n"));
    h.Update(bytes);
  };
  std::map<std::string, int> names;  // 1: left only, 2: right only, 3: both
  for (const auto& [name, entry] : a.tensors) names[name] |= 1;
  for (const auto& [name, entry] : b.tensors) names[name] |= 2;
  for (const auto& [name, sides] : names) {
    if (sides != 3) {
      TensorDifference* d = comparison.add_differences();
      d->set_name(name);
      d->set_kind(sides == 1 ? "only in LEFT" : "only in RIGHT");
      d->set_detail(absl::StrCat(name, ": only in ", sides == 1 ? left : right));
      continue;
    }
    const TensorEntry& x = *a.tensors.at(name);
    const TensorEntry& y = *b.tensors.at(name);
    ASSIGN_OR_RETURN(const std::string x_bytes, ReadGlobalTensor(left, a.manifest, x));
    ASSIGN_OR_RETURN(const std::string y_bytes, ReadGlobalTensor(right, b.manifest, y));
    digest(x, x_bytes, true);
    digest(y, y_bytes, false);
    comparison.set_tensors_compared(comparison.tensors_compared() + 1);
    if (x.dtype() != y.dtype() || !std::equal(x.global_shape().begin(), x.global_shape().end(),
                                              y.global_shape().begin(), y.global_shape().end())) {
      TensorDifference* d = comparison.add_differences();
      d->set_name(name);
      d->set_kind(x.dtype() != y.dtype() ? "dtype" : "shape");
      d->set_detail(absl::StrCat(name, ": ", x.dtype(), " [", absl::StrJoin(x.global_shape(), ", "),
                                 "] vs ", y.dtype(), " [", absl::StrJoin(y.global_shape(), ", "),
                                 "]"));
      continue;
    }
    TensorDifference values = CompareValues(x, x_bytes, y_bytes, tolerance);
    if (values.elements_differing() > 0) {
      values.set_detail(absl::StrFormat(
          "%s: element %d [%s]: left %.9g, right %.9g; max |difference| %.9g over %d element(s) "
          "beyond the tolerance %g",
          name, values.first_index(), absl::StrJoin(values.first_index_nd(), ", "),
          values.left_value(), values.right_value(), values.max_abs_difference(),
          values.elements_differing(), tolerance));
      *comparison.add_differences() = std::move(values);
    }
  }
  auto add_part = [&](const std::string& part, std::string x, std::string y) {
    PartDigest* digest = comparison.add_parts();
    digest->set_part(part);
    digest->set_left_sha256(std::move(x));
    digest->set_right_sha256(std::move(y));
    digest->set_equal(digest->left_sha256() == digest->right_sha256());
  };
  add_part("model", model_a.FinishHex(), model_b.FinishHex());
  add_part("optimizer", optimizer_a.FinishHex(), optimizer_b.FinishHex());
  const auto state_a = StateParts(a);
  const auto state_b = StateParts(b);
  for (const char* part : {"scheduler", "train state", "data position"}) {
    const std::vector<std::string>& x = state_a.at(part);
    const std::vector<std::string>& y = state_b.at(part);
    add_part(part, Sha256Hex(absl::StrJoin(x, "\n")), Sha256Hex(absl::StrJoin(y, "\n")));
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] != y[i]) {
        comparison.add_state_differences(absl::StrCat(part, ": ", x[i], " vs ", y[i]));
      }
    }
  }
  const std::string other_x = other_a.FinishHex(), other_y = other_b.FinishHex();
  if (other_x != Sha256Hex("") || other_y != Sha256Hex(""))
    add_part("other tensors", other_x, other_y);
  comparison.set_equal(comparison.differences().empty() && comparison.state_differences().empty());
  return comparison;
}

std::string RenderComparison(const CheckpointComparison& c) {
  std::string out;
  for (const TensorDifference& d : c.differences()) absl::StrAppend(&out, d.detail(), "\n");
  for (const std::string& line : c.state_differences()) absl::StrAppend(&out, line, "\n");
  for (const PartDigest& part : c.parts()) {
    absl::StrAppend(
        &out,
        absl::StrFormat("%-14s %s  %s%s\n", part.part() + ":", part.left_sha256().substr(0, 16),
                        part.right_sha256().substr(0, 16), part.equal() ? "  equal" : "  differ"));
  }
  absl::StrAppend(&out, c.equal() ? "EQUAL" : "DIFFERENT", ": ", c.tensors_compared(),
                  " tensors compared over their global elements",
                  c.tolerance() > 0 ? absl::StrCat(" within tolerance ", c.tolerance())
                                    : std::string(" bit for bit"),
                  "; ", c.left(), " vs ", c.right(), "\n");
  return out;
}

}  // namespace mtb::checkpoint
