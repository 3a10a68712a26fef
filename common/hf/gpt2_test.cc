#include "common/hf/gpt2.h"

#include "absl/strings/match.h"
#include "common/results/json_io.h"
#include "gtest/gtest.h"

namespace mtb::hf {
namespace {

TEST(Gpt2, NamesMapBothWaysWithAndWithoutTheTransformerPrefix) {
  EXPECT_EQ(Gpt2Name("wte"), "transformer.wte.weight");
  EXPECT_EQ(Gpt2Name("h.11.mlp.c_fc.bias"), "transformer.h.11.mlp.c_fc.bias");
  for (const char* ours : {"wte", "wpe", "ln_f.weight", "h.0.attn.c_attn.weight",
                           "h.3.mlp.c_proj.bias", "h.12.ln_2.weight"}) {
    EXPECT_EQ(OurName(Gpt2Name(ours)), ours);
  }
  EXPECT_EQ(OurName("h.0.ln_1.bias"), "h.0.ln_1.bias") << "GPT2Model's names";
  EXPECT_EQ(OurName("wpe.weight"), "wpe");
  EXPECT_EQ(OurName("lm_head.weight"), std::nullopt);
  EXPECT_EQ(OurName("transformer.h.0.attn.bias"), std::nullopt);
  EXPECT_EQ(OurName("transformer.h.x.ln_1.bias"), std::nullopt);
}

TEST(Gpt2, OnlyTheFourProjectionWeightsAreConv1D) {
  EXPECT_TRUE(IsConv1DWeight("h.0.attn.c_attn.weight"));
  EXPECT_TRUE(IsConv1DWeight("h.0.attn.c_proj.weight"));
  EXPECT_TRUE(IsConv1DWeight("h.7.mlp.c_fc.weight"));
  EXPECT_TRUE(IsConv1DWeight("h.7.mlp.c_proj.weight"));
  EXPECT_FALSE(IsConv1DWeight("h.0.attn.c_attn.bias"));
  EXPECT_FALSE(IsConv1DWeight("wte"));
  EXPECT_TRUE(IsGpt2Buffer("transformer.h.2.attn.bias"));
  EXPECT_TRUE(IsGpt2Buffer("h.2.attn.masked_bias"));
  EXPECT_FALSE(IsGpt2Buffer("h.2.attn.c_attn.bias"));
}

TEST(Gpt2, OurConfigRoundTripsThroughJsonAndPassesItsOwnCheck) {
  const Gpt2Config config = MakeGpt2Config({64, 16, 32, 2, 4}, "float32");
  const std::string json = ToJson(config);
  EXPECT_TRUE(absl::StrContains(json, "\"activation_function\": \"gelu\"")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"n_embd\": 32")) << json;
  Gpt2Config read;
  ASSERT_TRUE(FromJsonIgnoringUnknownFields(json, &read).ok());
  EXPECT_EQ(ToJson(read), json);
  EXPECT_TRUE(CheckGpt2Config(read, "config.json").ok());
  EXPECT_EQ(ShapeOf(read).n_head, 4);
}

TEST(Gpt2, OpenAisGpt2ConfigIsRefusedNamingEveryDifferentField) {
  // GPT-2's own config.json (abridged): tanh GELU by default, plus an
  // untied head and a different epsilon to see every field named.
  Gpt2Config gpt2;
  ASSERT_TRUE(FromJsonIgnoringUnknownFields(
                  R"({"n_embd": 768, "n_head": 12, "n_layer": 12, "vocab_size": 50257,
                      "n_positions": 1024, "layer_norm_epsilon": 1e-6,
                      "tie_word_embeddings": false, "bos_token_id": 50256})",
                  &gpt2)
                  .ok());
  const absl::Status status = CheckGpt2Config(gpt2, "gpt2/config.json");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(),
            "gpt2/config.json: not a model our GPT computes: activation_function='gelu_new' "
            "(ours: gelu, the exact erf GELU); layer_norm_epsilon=1e-06 (ours: 1e-05); "
            "tie_word_embeddings=false (ours: the LM head is wte)");
}

}  // namespace
}  // namespace mtb::hf
