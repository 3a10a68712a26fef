#include "trainer/cuda/kernel_refs.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace mtb {
namespace cuda {
namespace {

constexpr char kMagic[] = "mtb-kernel-refs";
constexpr int kVersion = 1;

const char* DtypeName(RefDtype dtype) {
  switch (dtype) {
    case RefDtype::kF32:
      return "f32";
    case RefDtype::kF64:
      return "f64";
    case RefDtype::kI32:
      return "i32";
  }
  return "?";
}

bool ParseDtype(const std::string& text, RefDtype* dtype) {
  if (text == "f32") {
    *dtype = RefDtype::kF32;
  } else if (text == "f64") {
    *dtype = RefDtype::kF64;
  } else if (text == "i32") {
    *dtype = RefDtype::kI32;
  } else {
    return false;
  }
  return true;
}

size_t DtypeBytes(RefDtype dtype) { return dtype == RefDtype::kF64 ? 8 : 4; }

bool ValidName(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

std::string FileName(const std::string& kernel, const RefTensor& tensor, bool input) {
  return absl::StrCat(kernel, ".", input ? "in" : "out", ".", tensor.name, ".",
                      DtypeName(tensor.dtype));
}

std::string WriteTensor(const std::string& path, const RefTensor& tensor) {
  if (static_cast<int64_t>(tensor.values.size()) != tensor.numel()) {
    return absl::StrCat(path, ": ", tensor.values.size(), " values for ", tensor.numel(),
                        " elements");
  }
  std::string bytes(tensor.values.size() * DtypeBytes(tensor.dtype), '\0');
  for (size_t i = 0; i < tensor.values.size(); ++i) {
    const double v = tensor.values[i];
    char* at = bytes.data() + i * DtypeBytes(tensor.dtype);
    if (tensor.dtype == RefDtype::kF32) {
      const float f = static_cast<float>(v);
      std::memcpy(at, &f, 4);
    } else if (tensor.dtype == RefDtype::kF64) {
      std::memcpy(at, &v, 8);
    } else {
      const int32_t n = static_cast<int32_t>(v);
      std::memcpy(at, &n, 4);
    }
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) return absl::StrCat(path, ": write failed");
  return "";
}

std::string ReadTensor(const std::string& path, RefTensor* tensor) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::StrCat(path, ": cannot open");
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const size_t want = static_cast<size_t>(tensor->numel()) * DtypeBytes(tensor->dtype);
  if (bytes.size() != want) {
    return absl::StrCat(path, ": ", bytes.size(), " bytes, the manifest's shape needs ",
                        want);
  }
  tensor->values.resize(tensor->numel());
  for (size_t i = 0; i < tensor->values.size(); ++i) {
    const char* at = bytes.data() + i * DtypeBytes(tensor->dtype);
    if (tensor->dtype == RefDtype::kF32) {
      float f;
      std::memcpy(&f, at, 4);
      tensor->values[i] = f;
    } else if (tensor->dtype == RefDtype::kF64) {
      std::memcpy(&tensor->values[i], at, 8);
    } else {
      int32_t n;
      std::memcpy(&n, at, 4);
      tensor->values[i] = n;
    }
  }
  return "";
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = absl::StrCat(shape.size());
  for (int64_t d : shape) absl::StrAppend(&text, " ", d);
  return text;
}

}  // namespace

int64_t RefTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const RefTensor* KernelRef::Input(const std::string& name) const {
  for (const RefTensor& t : inputs) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string WriteKernelRefs(const std::string& dir, const KernelRefs& refs) {
  std::ostringstream manifest;
  manifest << kMagic << " " << kVersion << "\nseed " << refs.seed << "\n";
  for (const KernelRef& kernel : refs.kernels) {
    if (!ValidName(kernel.name)) return absl::StrCat("bad kernel name '", kernel.name, "'");
    manifest << "kernel " << kernel.name << "\n";
    for (bool input : {true, false}) {
      for (const RefTensor& tensor : input ? kernel.inputs : kernel.outputs) {
        if (!ValidName(tensor.name)) {
          return absl::StrCat(kernel.name, ": bad tensor name '", tensor.name, "'");
        }
        const std::string file = FileName(kernel.name, tensor, input);
        if (std::string error = WriteTensor(absl::StrCat(dir, "/", file), tensor);
            !error.empty()) {
          return error;
        }
        manifest << (input ? "input " : "output ") << tensor.name << " "
                 << DtypeName(tensor.dtype) << " " << file << " " << ShapeText(tensor.shape)
                 << "\n";
      }
    }
    for (const RefTensor& tensor : kernel.outputs) {
      auto fp32 = kernel.bound_fp32.find(tensor.name);
      auto bf16 = kernel.bound_bf16.find(tensor.name);
      if (fp32 == kernel.bound_fp32.end() || bf16 == kernel.bound_bf16.end() ||
          !(fp32->second > 0) || !(bf16->second > 0)) {
        return absl::StrCat(kernel.name, "/", tensor.name, ": no positive bound");
      }
      manifest << "bound " << tensor.name << " " << absl::StrFormat("%.17g", fp32->second)
               << " " << absl::StrFormat("%.17g", bf16->second) << "\n";
    }
    manifest << "end\n";
  }
  const std::string path = absl::StrCat(dir, "/manifest.txt");
  std::ofstream file(path, std::ios::trunc);
  file << manifest.str();
  file.close();
  if (!file) return absl::StrCat(path, ": write failed");
  return "";
}

std::string ReadKernelRefs(const std::string& dir, KernelRefs* refs) {
  const std::string path = absl::StrCat(dir, "/manifest.txt");
  std::ifstream file(path);
  if (!file) return absl::StrCat(path, ": cannot open");
  *refs = KernelRefs();
  std::string line;
  int line_number = 0;
  KernelRef* kernel = nullptr;
  auto fail = [&](const std::string& why) {
    return absl::StrCat(path, ":", line_number, ": ", why, " in '", line, "'");
  };
  while (std::getline(file, line)) {
    ++line_number;
    const std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (line_number == 1) {
      if (f.size() != 2 || f[0] != kMagic || f[1] != std::to_string(kVersion)) {
        return fail(absl::StrCat("not a '", kMagic, " ", kVersion, "' manifest"));
      }
      continue;
    }
    if (f[0] == "seed" && f.size() == 2 && kernel == nullptr) {
      if (!absl::SimpleAtoi(f[1], &refs->seed)) return fail("bad seed");
    } else if (f[0] == "kernel" && f.size() == 2 && kernel == nullptr) {
      if (!ValidName(f[1])) return fail("bad kernel name");
      refs->kernels.emplace_back();
      kernel = &refs->kernels.back();
      kernel->name = f[1];
    } else if ((f[0] == "input" || f[0] == "output") && f.size() >= 5 && kernel != nullptr) {
      RefTensor tensor;
      tensor.name = f[1];
      int64_t rank = 0;
      if (!ValidName(tensor.name)) return fail("bad tensor name");
      if (!ParseDtype(f[2], &tensor.dtype)) return fail("bad dtype");
      if (f[3].find('/') != std::string::npos || f[3].empty()) return fail("bad file name");
      if (!absl::SimpleAtoi(f[4], &rank) || rank < 0 ||
          static_cast<int64_t>(f.size()) != 5 + rank) {
        return fail("bad rank");
      }
      for (int64_t i = 0; i < rank; ++i) {
        int64_t d = 0;
        if (!absl::SimpleAtoi(f[5 + i], &d) || d < 0) return fail("bad dimension");
        tensor.shape.push_back(d);
      }
      if (std::string error = ReadTensor(absl::StrCat(dir, "/", f[3]), &tensor);
          !error.empty()) {
        return error;
      }
      (f[0] == "input" ? kernel->inputs : kernel->outputs).push_back(std::move(tensor));
    } else if (f[0] == "bound" && f.size() == 4 && kernel != nullptr) {
      double fp32 = 0, bf16 = 0;
      if (!absl::SimpleAtod(f[2], &fp32) || !absl::SimpleAtod(f[3], &bf16) || !(fp32 > 0) ||
          !(bf16 > 0)) {
        return fail("bad bound");
      }
      kernel->bound_fp32[f[1]] = fp32;
      kernel->bound_bf16[f[1]] = bf16;
    } else if (f[0] == "end" && f.size() == 1 && kernel != nullptr) {
      for (const RefTensor& out : kernel->outputs) {
        if (!kernel->bound_fp32.count(out.name)) {
          return fail(absl::StrCat("output ", out.name, " has no bound"));
        }
      }
      kernel = nullptr;
    } else {
      return fail("unexpected record");
    }
  }
  if (line_number == 0) return absl::StrCat(path, ": empty");
  if (kernel != nullptr) return absl::StrCat(path, ": kernel ", kernel->name, " has no end");
  return "";
}

std::vector<CheckLine> CheckKernels(const KernelRefs& refs, const KernelRunner& run,
                                    CheckPrecision precision,
                                    const std::vector<std::string>& only) {
  const std::set<std::string> wanted(only.begin(), only.end());
  std::vector<CheckLine> lines;
  for (const KernelRef& kernel : refs.kernels) {
    if (!wanted.empty() && !wanted.count(kernel.name)) continue;
    std::map<std::string, std::vector<double>> observed;
    if (std::string error = run(kernel, &observed); !error.empty()) {
      CheckLine line;
      line.kernel = kernel.name;
      line.output = "*";
      line.detail = error;
      lines.push_back(line);
      continue;
    }
    for (const RefTensor& expected : kernel.outputs) {
      CheckLine line;
      line.kernel = kernel.name;
      line.output = expected.name;
      line.bound = (precision == CheckPrecision::kFp32 ? kernel.bound_fp32
                                                       : kernel.bound_bf16)
                       .at(expected.name);
      auto got = observed.find(expected.name);
      if (got == observed.end()) {
        line.detail = "no output";
      } else if (got->second.size() != expected.values.size()) {
        line.detail = absl::StrCat(got->second.size(), " values, want ",
                                   expected.values.size());
      } else {
        for (size_t i = 0; i < expected.values.size(); ++i) {
          double error = std::fabs(got->second[i] - expected.values[i]);
          if (!std::isfinite(error)) error = INFINITY;
          if (error > line.max_error || line.worst_index < 0) {
            line.max_error = error;
            line.worst_index = static_cast<int64_t>(i);
          }
        }
        line.pass = line.max_error <= line.bound;
      }
      lines.push_back(line);
    }
  }
  return lines;
}

std::string FormatCheckLine(const CheckLine& line) {
  std::string text = absl::StrCat(line.pass ? "PASS " : "FAIL ", line.kernel, "/",
                                  line.output);
  if (!line.detail.empty()) return absl::StrCat(text, " ", line.detail);
  return absl::StrCat(text, absl::StrFormat(" max_err=%.3g bound=%.3g ratio=%.3g at=%d",
                                            line.max_error, line.bound,
                                            line.max_error / line.bound,
                                            line.worst_index));
}

}  // namespace cuda
}  // namespace mtb
