#include "common/hf/gpt2_tensors.h"

#include <string>

#include "ATen/ATen.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace mtb::hf {
namespace {

constexpr Gpt2Shape kShape = {/*vocab_size=*/11, /*n_positions=*/5, /*n_embd=*/4,
                              /*n_layer=*/2, /*n_head=*/2};

// Every parameter distinct, from a seeded generator of our own.
OurParameters Parameters() {
  at::Generator generator = at::detail::createCPUGenerator(7);
  OurParameters parameters;
  for (const auto& [name, shape] : Gpt2ParameterShapes(kShape)) {
    parameters.emplace_back(name, at::randn(shape, generator, at::kFloat));
  }
  return parameters;
}

SafetensorsFile Decode(const std::string& bytes) {
  absl::StatusOr<SafetensorsFile> file = DecodeSafetensors(bytes, "m.safetensors");
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? *std::move(file) : SafetensorsFile{};
}

void ExpectRefused(const std::vector<SafetensorsTensor>& tensors, const std::string& substring) {
  absl::StatusOr<std::string> bytes = EncodeSafetensors(tensors, {});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<OurParameters> decoded =
      DecodeGpt2Safetensors(Decode(*bytes), kShape, "m.safetensors");
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(decoded.status().message(), substring)) << decoded.status();
}

// The file's tensors for `parameters`, to edit.
std::vector<SafetensorsTensor> Tensors(const OurParameters& parameters) {
  std::vector<SafetensorsTensor> tensors;
  const SafetensorsFile file = Decode(*EncodeGpt2Safetensors(parameters, false));
  for (const SafetensorsFile::Entry& entry : file.tensors) {
    tensors.push_back({entry.name, entry.dtype, entry.shape, std::string(file.Data(entry))});
  }
  return tensors;
}

TEST(Gpt2Tensors, EncodeDecodeEncodeIsByteIdenticalInFp32AndBf16) {
  for (const bool bf16 : {false, true}) {
    absl::StatusOr<std::string> first = EncodeGpt2Safetensors(Parameters(), bf16);
    ASSERT_TRUE(first.ok()) << first.status();
    absl::StatusOr<OurParameters> decoded =
        DecodeGpt2Safetensors(Decode(*first), kShape, "m.safetensors");
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    absl::StatusOr<std::string> second = EncodeGpt2Safetensors(*decoded, bf16);
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(*first, *second) << (bf16 ? "bf16" : "fp32");
  }
}

TEST(Gpt2Tensors, ProjectionsAreStoredAsConv1DAndComeBackInOurOrientation) {
  const OurParameters ours = Parameters();
  const SafetensorsFile file = Decode(*EncodeGpt2Safetensors(ours, false));
  const SafetensorsFile::Entry* c_fc = file.Find("transformer.h.1.mlp.c_fc.weight");
  ASSERT_NE(c_fc, nullptr);
  EXPECT_EQ(c_fc->shape, (std::vector<int64_t>{4, 16})) << "Conv1D's (in, out)";
  EXPECT_EQ(file.Find("lm_head.weight"), nullptr) << "tied: left out";
  absl::StatusOr<OurParameters> decoded = DecodeGpt2Safetensors(file, kShape, "m.safetensors");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ((*decoded)[i].first, ours[i].first);
    EXPECT_TRUE(at::equal((*decoded)[i].second, ours[i].second)) << ours[i].first;
  }
}

TEST(Gpt2Tensors, Gpt2ModelNamesBuffersAndATiedHeadAreAccepted) {
  std::vector<SafetensorsTensor> tensors = Tensors(Parameters());
  for (SafetensorsTensor& tensor : tensors) tensor.name = tensor.name.substr(12);  // GPT2Model's
  tensors.push_back({"h.0.attn.bias", "F32", {1}, std::string(4, '\0')});
  SafetensorsTensor head = tensors.front();  // wte.weight
  head.name = "lm_head.weight";
  tensors.push_back(head);
  absl::StatusOr<std::string> bytes = EncodeSafetensors(tensors, {});
  ASSERT_TRUE(bytes.ok());
  EXPECT_TRUE(DecodeGpt2Safetensors(Decode(*bytes), kShape, "m.safetensors").ok());
}

TEST(Gpt2Tensors, WrongOrientationMissingUnknownAndUntiedAreRefusedNamingTheTensor) {
  const OurParameters ours = Parameters();
  std::vector<SafetensorsTensor> linear = Tensors(ours);
  for (SafetensorsTensor& tensor : linear) {
    if (tensor.name == "transformer.h.0.attn.c_attn.weight") tensor.shape = {12, 4};
  }
  ExpectRefused(linear,
                "m.safetensors: transformer.h.0.attn.c_attn.weight: is (12, 4) = (out, in): "
                "nn.Linear's orientation; GPT-2 files hold Conv1D's (in, out) (4, 12)");

  std::vector<SafetensorsTensor> missing = Tensors(ours);
  missing.pop_back();
  ExpectRefused(missing, "transformer.ln_f.bias: missing");

  std::vector<SafetensorsTensor> unknown = Tensors(ours);
  unknown.push_back({"transformer.h.0.attn.q_proj.weight", "F32", {1}, std::string(4, '\0')});
  ExpectRefused(unknown, "transformer.h.0.attn.q_proj.weight: not a parameter of a GPT-2 model");

  std::vector<SafetensorsTensor> deeper = Tensors(ours);
  deeper.push_back({"transformer.h.2.ln_1.bias", "F32", {4}, std::string(16, '\0')});
  ExpectRefused(deeper, "transformer.h.2.ln_1.bias: not a parameter of a 2-layer model");

  std::vector<SafetensorsTensor> untied = Tensors(ours);
  SafetensorsTensor head = untied.front();
  head.name = "lm_head.weight";
  head.data[0] ^= 1;
  untied.push_back(head);
  ExpectRefused(untied, "lm_head.weight: differs from wte");

  std::vector<SafetensorsTensor> wide = Tensors(ours);
  wide.front().shape = {11, 2};
  wide.front().data.resize(11 * 2 * 4);
  ExpectRefused(wide, "transformer.wte.weight: shape (11, 2), expected (11, 4)");
}

}  // namespace
}  // namespace mtb::hf
