#include "trainer/config/config.h"

#include "absl/flags/reflection.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "common/results/json_io.h"
#include "trainer/config/flags.h"
#include "trainer/strategy/registry.h"

namespace mtb {
namespace {

TrainConfig FromFlags() {
  absl::StatusOr<TrainConfig> config = TrainConfigFromFlags();
  CHECK(config.ok()) << config.status();
  return *config;
}

TrainConfig Defaults() {
  TrainConfig config = FromFlags();
  ResolveConfig(&config, 1);
  return config;
}

TEST(TrainConfig, FlagDefaultsResolveToAValidConfig) {
  const TrainConfig config = Defaults();
  EXPECT_TRUE(ValidateConfig(config).ok()) << ValidateConfig(config);
  EXPECT_DOUBLE_EQ(config.min_lr(), config.lr() / 10);
  EXPECT_EQ(config.lr_decay_steps(), config.steps());
  EXPECT_GE(config.intra_op_threads(), 1);
}

TEST(TrainConfig, ResolveKeepsValuesTheUserGave) {
  TrainConfig config = FromFlags();
  config.set_min_lr(1e-5);
  config.set_lr_decay_steps(50);
  config.set_intra_op_threads(3);
  ResolveConfig(&config, 1);
  EXPECT_DOUBLE_EQ(config.min_lr(), 1e-5);
  EXPECT_EQ(config.lr_decay_steps(), 50);
  EXPECT_EQ(config.intra_op_threads(), 3);
}

TEST(TrainConfig, DefaultWarmupsShrinkToFitAOneStepRunAndSaySo) {
  TrainConfig config = FromFlags();  // lr warm-up 10, timing 2
  config.set_steps(1);
  const std::vector<std::string> notes =
      FitDefaultWarmupsToSteps(&config, WarmupsGiven{});
  EXPECT_EQ(config.lr_warmup_steps(), 0);
  EXPECT_EQ(config.timing_warmup_steps(), 0);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0],
            "--steps=1: the learning-rate warm-up shrinks from its default 10 "
            "to 0 steps (one step is the end of the cosine schedule: it runs at "
            "--min_lr; --lr_schedule=constant runs it at --lr)");
  EXPECT_EQ(notes[1],
            "--steps=1: the timing warm-up shrinks from its default 2 to 0 "
            "steps so that some step is timed");
  ResolveConfig(&config, 1);
  EXPECT_TRUE(ValidateConfig(config).ok()) << ValidateConfig(config);
}

TEST(TrainConfig, WarmupsThatFitOrThatTheUserGaveAreLeftAlone) {
  TrainConfig config = FromFlags();  // 200 steps: both fit
  EXPECT_TRUE(FitDefaultWarmupsToSteps(&config, WarmupsGiven{}).empty());
  EXPECT_EQ(config.lr_warmup_steps(), 10);
  config.set_steps(4);
  config.set_lr_warmup_steps(4);
  config.set_timing_warmup_steps(4);
  EXPECT_TRUE(FitDefaultWarmupsToSteps(&config, WarmupsGiven{true, true})
                  .empty());
  EXPECT_EQ(config.lr_warmup_steps(), 4);
  EXPECT_EQ(config.timing_warmup_steps(), 4);
  // ... and the user's value that cannot work is refused with the reason.
  config.set_timing_warmup_steps(0);
  ResolveConfig(&config, 1);
  const absl::Status status = ValidateConfig(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "--lr_warmup_steps=4 must be < --steps=4: the learning rate would "
            "never reach --lr (leave the flag unset and its default shrinks to "
            "fit a short run)");
}

TEST(TrainConfig, ACosineDecayEndingAtOrBeforeTheWarmUpEndIsRefused) {
  TrainConfig config = Defaults();  // cosine, warm-up 10, 200 steps
  config.set_lr_decay_steps(10);
  const absl::Status status = ValidateConfig(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "--lr_decay_steps=10 must be after the warm-up end "
            "(--lr_warmup_steps=10): the cosine decay would have no length and "
            "the rate would drop from --lr to --min_lr at once");
  config.set_lr_decay_steps(11);
  EXPECT_TRUE(ValidateConfig(config).ok());
  // A constant schedule has no decay end to get wrong.
  config.set_lr_schedule(TrainConfig::constant);
  config.set_lr_decay_steps(3);
  EXPECT_TRUE(ValidateConfig(config).ok());
}

void ExpectInvalid(const TrainConfig& config, const std::string& substring) {
  const absl::Status status = ValidateConfig(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(substring), std::string::npos)
      << status.message();
}

TEST(TrainConfig, HeadsThatDoNotDivideTheWidthNameBothFlags) {
  TrainConfig config = Defaults();
  config.set_d_model(100);
  config.set_n_heads(3);
  ExpectInvalid(config, "--d_model=100 must be divisible by --n_heads=3");
}

// Tensor parallelism trains with dropout (docs/tp.md "Dropout"); it still
// refuses exact mode, with its reason.
TEST(TrainConfig, TensorParallelismTakesDropoutButNotExactMode) {
  TrainConfig c = Defaults();
  c.set_tp(2);
  c.set_dropout(0.1);
  EXPECT_TRUE(ValidateConfig(c).ok()) << ValidateConfig(c);
  c.set_reduction(TrainConfig::exact);
  EXPECT_NE(ValidateConfig(c).message().find(
                "--reduction=exact does not extend to --tp=2"),
            std::string::npos)
      << ValidateConfig(c);
}

TEST(TrainConfig, EachRuleNamesItsFlag) {
  TrainConfig c = Defaults();
  c.set_dropout(1.0);
  ExpectInvalid(c, "--dropout=1 must be in [0, 1)");
  c = Defaults();
  c.set_precision(static_cast<TrainConfig::Precision>(7));
  ExpectInvalid(c, "--precision=7 must be fp32 or bf16");
  c = Defaults();
  c.set_batch_size(0);
  ExpectInvalid(c, "--batch_size=0 must be at least 1");
  c = Defaults();
  c.set_vocab_size(70000);
  ExpectInvalid(c, "--vocab_size=70000");
  c = Defaults();
  c.set_lr_schedule(static_cast<TrainConfig::LrSchedule>(7));
  ExpectInvalid(c, "--lr_schedule=7 must be constant or cosine");
  c = Defaults();
  c.set_lr_warmup_steps(-1);
  ExpectInvalid(c, "--lr_warmup_steps=-1 must be non-negative");
  c = Defaults();
  c.set_timing_warmup_steps(c.steps());
  ExpectInvalid(c, "--timing_warmup_steps");
  c = Defaults();
  c.set_min_lr(1.0);
  ExpectInvalid(c, "--min_lr=1 must be in [0, --lr=");
  c = Defaults();
  c.set_strategy(static_cast<TrainConfig::Strategy>(7));
  ExpectInvalid(c,
                "--strategy=7 is not a strategy: use ddp, zero1, zero2, "
                "fsdp (or single, the one-rank reference)");
  c = Defaults();  // ddp
  c.set_fsdp_keep_gathered_until_backward(true);
  ExpectInvalid(c,
                "--reshard_after_forward applies to --strategy=fsdp, not ddp: "
                "it would do nothing");
  c = Defaults();
  c.set_strategy(TrainConfig::zero2);
  c.set_fsdp_prefetch(true);
  ExpectInvalid(c, "--fsdp_prefetch applies to --strategy=fsdp, not zero2");
  // Given on the command line: refused even at its default value.
  const absl::Status given =
      ValidateConfig(Defaults(), {"reshard_after_forward"});
  EXPECT_EQ(given.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(given.message(),
            "--reshard_after_forward applies to --strategy=fsdp, not ddp: it "
            "would do nothing");
  TrainConfig sharded = Defaults();
  sharded.set_strategy(TrainConfig::fsdp);
  EXPECT_EQ(ValidateConfig(sharded, {"bucket_cap_mb"}).message(),
            "--bucket_cap_mb applies to --strategy=ddp, zero1 or zero2, not "
            "fsdp: it would do nothing");
  EXPECT_TRUE(ValidateConfig(Defaults(), {"bucket_cap_mb"}).ok());
  c.set_strategy(TrainConfig::fsdp);
  c.set_fsdp_keep_gathered_until_backward(true);
  EXPECT_TRUE(ValidateConfig(c).ok()) << ValidateConfig(c);
  c = Defaults();
  c.set_grad_accum(0);
  ExpectInvalid(c, "--grad_accum=0 must be at least 1");
  c = Defaults();
  c.set_grad_sync("sometimes");
  ExpectInvalid(c, "--grad_sync=sometimes must be auto, every or last");
  c = Defaults();
  c.set_bucket_cap_mb(0);
  ExpectInvalid(c, "--bucket_cap_mb=0 must be positive");
  c = Defaults();
  c.set_peak_flops(-1);
  ExpectInvalid(c, "--peak_flops=-1 must be non-negative");
}

TEST(TrainConfig, DefaultsAreDdpWithGradSyncLastAndAValidWorldOfTwo) {
  const TrainConfig config = Defaults();
  EXPECT_EQ(config.strategy(), TrainConfig::ddp);
  EXPECT_EQ(config.grad_sync(), "last");  // "auto" resolved
  EXPECT_EQ(config.bucket_cap_mb(), 25);
  EXPECT_TRUE(ValidateConfigForWorldSize(config, 2).ok());
}

TEST(TrainConfig, GradSyncAutoIsEveryForZero2AndFsdpAndLastOtherwise) {
  for (const auto& [strategy, expected] :
       {std::pair<const char*, const char*>{"ddp", "last"},
        {"zero1", "last"},
        {"zero2", "every"},
        {"fsdp", "every"},
        {"single", "last"}}) {
    TrainConfig config = Defaults();
    config.set_strategy(*StrategyFromName(strategy));
    config.set_grad_sync("auto");
    ResolveConfig(&config, 1);
    EXPECT_EQ(config.grad_sync(), expected) << strategy;
    EXPECT_TRUE(ValidateConfig(config).ok()) << strategy;
  }
  // Given explicitly, zero2 keeps "last".
  TrainConfig config = Defaults();
  config.set_strategy(TrainConfig::zero2);
  config.set_grad_sync("last");
  ResolveConfig(&config, 1);
  EXPECT_EQ(config.grad_sync(), "last");
}

// The enum fields keep the spellings the flags take in the JSON, each value
// reads back as itself, and a spelling no value has is refused: by the
// JSON reader and by the flag's parser, with the flag's own line.
TEST(ConfigNames, EveryEnumValueRoundTripsThroughItsJsonName) {
  int values = 0;
  for (const char* field : {"strategy", "precision", "reduction", "lr_schedule"}) {
    const google::protobuf::FieldDescriptor* descriptor =
        TrainConfig::descriptor()->FindFieldByName(field);
    ASSERT_NE(descriptor, nullptr) << field;
    ASSERT_EQ(descriptor->type(), google::protobuf::FieldDescriptor::TYPE_ENUM)
        << field;
    const google::protobuf::EnumDescriptor* type = descriptor->enum_type();
    for (int i = 0; i < type->value_count(); ++i) {
      const google::protobuf::EnumValueDescriptor* value = type->value(i);
      TrainConfig config = Defaults();
      config.GetReflection()->SetEnum(&config, descriptor, value);
      const std::string json = ToJson(config);
      EXPECT_NE(json.find(absl::StrCat("\"", field, "\": \"", value->name(),
                                       "\"")),
                std::string::npos)
          << json;
      TrainConfig back;
      ASSERT_TRUE(FromJson(json, &back).ok()) << field << " " << value->name();
      EXPECT_EQ(back.GetReflection()->GetEnum(back, descriptor), value);
      ++values;
    }
  }
  EXPECT_EQ(values, 5 + 2 + 2 + 2);
  // The names outside readers match, literally.
  TrainConfig config = Defaults();
  config.set_strategy(TrainConfig::zero2);
  config.set_precision(TrainConfig::bf16);
  config.set_reduction(TrainConfig::exact);
  config.set_lr_schedule(TrainConfig::constant);
  const std::string json = ToJson(config);
  for (const char* line : {"\"strategy\": \"zero2\"", "\"precision\": \"bf16\"",
                           "\"reduction\": \"exact\"",
                           "\"lr_schedule\": \"constant\""}) {
    EXPECT_NE(json.find(line), std::string::npos) << line << " in " << json;
  }
}

TEST(ConfigNames, ASpellingNoValueHasIsRefused) {
  TrainConfig config = Defaults();
  std::string json = ToJson(config);
  const std::string ddp = "\"strategy\": \"ddp\"";
  const size_t at = json.find(ddp);
  ASSERT_NE(at, std::string::npos) << json;
  TrainConfig back;
  ASSERT_TRUE(FromJson(json, &back).ok());  // the unchanged file reads
  json.replace(at, ddp.size(), "\"strategy\": \"zero3\"");
  EXPECT_FALSE(FromJson(json, &back).ok());
  EXPECT_EQ(StrategyFromName("zero3").status().message(),
            "--strategy=zero3 is not a strategy: use ddp, zero1, zero2, fsdp "
            "(or single, the one-rank reference)");
  EXPECT_EQ(PrecisionFromName("fp16").status().message(),
            "--precision=fp16 must be fp32 or bf16");
  EXPECT_EQ(ReductionFromName("fixed").status().message(),
            "--reduction=fixed must be float or exact");
  EXPECT_EQ(LrScheduleFromName("linear").status().message(),
            "--lr_schedule=linear must be constant or cosine");
  // The C++ spelling of a keyword value is not a flag's spelling.
  EXPECT_FALSE(ReductionFromName("float_").ok());
  EXPECT_EQ(*ReductionFromName("float"), TrainConfig::float_);
  // Every registry entry is a value of the enum, and back.
  for (const StrategyEntry& entry : AllStrategyEntries()) {
    const absl::StatusOr<TrainConfig::Strategy> value =
        StrategyFromName(entry.name);
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_EQ(ConfigName(*value), entry.name);
  }
  EXPECT_EQ(static_cast<size_t>(TrainConfig::Strategy_descriptor()->value_count()),
            AllStrategyEntries().size());
}

TEST(TrainConfig, WorldSizeRulesNameTheFlagAndTheWorldSize) {
  TrainConfig c = Defaults();
  c.set_strategy(TrainConfig::single);
  EXPECT_TRUE(ValidateConfigForWorldSize(c, 1).ok());
  EXPECT_EQ(ValidateConfigForWorldSize(c, 4).message(),
            "--strategy=single runs one rank, but the world size is 4: use "
            "--strategy=ddp (or zero1, zero2, fsdp) or --nproc=1");
}

TEST(TrainConfig, IntraOpThreadsAreTheCoresSharedByTheHostsRanks) {
  TrainConfig config = FromFlags();
  ResolveConfig(&config, /*ranks_per_host=*/1024);
  EXPECT_EQ(config.intra_op_threads(), 1);
}

TEST(TrainConfig, FingerprintIgnoresOnlyFieldsThatDoNotChangeNumbers) {
  const TrainConfig base = Defaults();
  TrainConfig same = base;
  same.set_repeat(5);
  same.set_timing_warmup_steps(7);
  same.set_intra_op_threads(9);
  same.set_log_every(10);
  same.set_activation_checkpointing(true);
  same.set_peak_flops(1e12);
  // fsdp's scheduling switches give the same bits (fsdp_test).
  same.set_fsdp_keep_gathered_until_backward(true);
  same.set_fsdp_prefetch(true);
  EXPECT_EQ(ConfigFingerprint(base), ConfigFingerprint(same));
  EXPECT_EQ(ConfigFingerprint(base).size(), 64u);
  TrainConfig other = base;
  other.set_lr(2e-3);
  EXPECT_NE(ConfigFingerprint(base), ConfigFingerprint(other));
  other = base;
  other.set_seed(base.seed() + 1);
  EXPECT_NE(ConfigFingerprint(base), ConfigFingerprint(other));
  other = base;
  other.set_grad_sync("every");  // averages in another order
  EXPECT_NE(ConfigFingerprint(base), ConfigFingerprint(other));
}

TEST(TrainConfig, ExactModePinsOneThreadAndKeepsItInTheFingerprint) {
  TrainConfig config = FromFlags();
  config.set_reduction(TrainConfig::exact);
  ResolveConfig(&config, /*ranks_per_host=*/1);
  EXPECT_EQ(config.intra_op_threads(), 1);
  config.set_intra_op_threads(3);
  ResolveConfig(&config, 1);
  EXPECT_EQ(config.intra_op_threads(), 3);  // --intra_op_threads wins

  TrainConfig base = Defaults();
  base.set_reduction(TrainConfig::exact);
  base.set_exact_chunk(2);
  TrainConfig threads = base;
  threads.set_intra_op_threads(base.intra_op_threads() + 1);
  EXPECT_NE(ConfigFingerprint(base), ConfigFingerprint(threads));
  TrainConfig chunk = base;
  chunk.set_exact_chunk(1);
  EXPECT_NE(ConfigFingerprint(base), ConfigFingerprint(chunk));
  TrainConfig floating = base;
  floating.set_reduction(TrainConfig::float_);
  EXPECT_NE(ConfigFingerprint(base), ConfigFingerprint(floating));
}

TEST(TrainConfig, ExactModeRefusesWhatItCannotMakeExact) {
  TrainConfig c = Defaults();
  c.set_reduction(TrainConfig::exact);
  c.set_batch_size(6);
  c.set_exact_chunk(4);
  EXPECT_EQ(ValidateConfig(c).message(),
            "--reduction=exact: the micro-batch --batch_size=6 is not a "
            "multiple of --exact_chunk=4 (every chunk must hold the same "
            "samples on every layout)");
  c.set_batch_size(8);
  EXPECT_TRUE(ValidateConfig(c).ok()) << ValidateConfig(c);
  c.set_precision(TrainConfig::bf16);
  EXPECT_EQ(ValidateConfig(c).message(),
            "--reduction=exact supports --precision=fp32 only, not bf16");
  c.set_precision(TrainConfig::fp32);
  c.set_exact_chunk(0);
  EXPECT_EQ(ValidateConfig(c).message(), "--exact_chunk=0 must be at least 1");
  c.set_exact_chunk(4);
  c.set_reduction(static_cast<TrainConfig::Reduction>(7));
  EXPECT_EQ(ValidateConfig(c).message(),
            "--reduction=7 must be float or exact");
  // A chunk means nothing in float mode: refused rather than ignored.
  c.set_reduction(TrainConfig::float_);
  c.set_batch_size(6);
  EXPECT_EQ(ValidateConfig(c).message(),
            "--exact_chunk applies to --reduction=exact, not float: it would do "
            "nothing (float reduction runs each micro-batch whole)");
  c.set_exact_chunk(1);
  EXPECT_TRUE(ValidateConfig(c).ok());
}

TEST(TrainConfig, AFlagThatDoesNothingUnderAnotherFlagsValueIsRefused) {
  // Given on the command line, even at its default value.
  TrainConfig c = Defaults();  // float reduction, cosine schedule
  for (const auto& [flag, message] :
       std::vector<std::pair<std::string, std::string>>{
           {"exact_chunk",
            "--exact_chunk applies to --reduction=exact, not float: it would do "
            "nothing (float reduction runs each micro-batch whole)"},
           {"testonly_exact_grid_finer_bits",
            "--testonly_exact_grid_finer_bits applies to --reduction=exact, not "
            "float: it would do nothing (float reduction has no grid)"}}) {
    const absl::Status status = ValidateConfig(c, {flag});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_EQ(status.message(), message);
  }
  c.set_lr_schedule(TrainConfig::constant);
  for (const char* flag : {"lr_decay_steps", "min_lr"}) {
    const absl::Status status = ValidateConfig(c, {flag});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_EQ(status.message(),
              absl::StrCat("--", flag,
                           " applies to --lr_schedule=cosine, not constant: it would "
                           "do nothing (a constant rate stays at --lr after the "
                           "warm-up)"));
  }
  // Where the condition holds, each is accepted (the control: the refusal is
  // the condition's, not the flag's).
  EXPECT_TRUE(ValidateConfig(c, {"lr_warmup_steps"}).ok());
  c.set_lr_schedule(TrainConfig::cosine);
  EXPECT_TRUE(ValidateConfig(c, {"lr_decay_steps", "min_lr"}).ok());
  c.set_reduction(TrainConfig::exact);
  c.set_exact_chunk(2);
  EXPECT_TRUE(ValidateConfig(c, {"exact_chunk", "testonly_exact_grid_finer_bits"}).ok())
      << ValidateConfig(c, {"exact_chunk"});
  // Every entry names a flag and an enum field of TrainConfig it depends
  // on, with a value that enum has.
  for (const ConditionalFlag& conditional : kConditionalFlags) {
    EXPECT_NE(TrainConfig::descriptor()->FindFieldByName(conditional.flag), nullptr)
        << conditional.flag;
    const google::protobuf::FieldDescriptor* under =
        TrainConfig::descriptor()->FindFieldByName(conditional.under);
    ASSERT_NE(under, nullptr) << conditional.under;
    ASSERT_EQ(under->type(), google::protobuf::FieldDescriptor::TYPE_ENUM);
    EXPECT_NE(under->enum_type()->FindValueByName(conditional.value), nullptr)
        << conditional.under << "=" << conditional.value;
  }
}

TEST(TrainConfig, GemmIsAutoOneDnnOrBlasAndNamesTheFlag) {
  TrainConfig c = Defaults();
  for (const char* gemm : {"", "auto", "onednn", "blas"}) {
    c.set_gemm(gemm);
    EXPECT_TRUE(ValidateConfig(c).ok()) << gemm;
  }
  c.set_gemm("mkl");
  EXPECT_EQ(ValidateConfig(c).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateConfig(c).message(),
            "--gemm=mkl is not a GEMM backend: use auto, onednn or blas");
  // Float mode's numbers do not pin the library; exact mode's do.
  TrainConfig onednn = Defaults(), blas = Defaults();
  blas.set_gemm("blas");
  EXPECT_EQ(ConfigFingerprint(onednn), ConfigFingerprint(blas));
  onednn.set_reduction(TrainConfig::exact);
  blas.set_reduction(TrainConfig::exact);
  EXPECT_NE(ConfigFingerprint(onednn), ConfigFingerprint(blas));
}

}  // namespace
}  // namespace mtb

namespace mtb {
namespace {

// The options table printed at start names flags by FlagValues: every one of
// them is a trainer flag (a field renamed without its flag, or a flag
// renamed without the table, fails here).
TEST(FlagValues, EveryFlagTheOptionsTablePrintsExists) {
  const std::vector<std::pair<std::string, std::string>> rows =
      FlagValues(Defaults());
  ASSERT_EQ(static_cast<int>(rows.size()),
            TrainConfig::descriptor()->field_count());
  for (const auto& [flag, value] : rows) {
    ASSERT_EQ(flag.rfind("--", 0), 0u) << flag;
    EXPECT_NE(absl::FindCommandLineFlag(flag.substr(2)), nullptr) << flag;
  }
  // The negative case: a field's own name where a flag has another.
  EXPECT_EQ(absl::FindCommandLineFlag("fsdp_keep_gathered_until_backward"),
            nullptr);
}

TEST(FlagValues, ANegatedFieldPrintsItsFlagsValue) {
  TrainConfig config = Defaults();
  config.set_fsdp_keep_gathered_until_backward(true);
  bool found = false;
  for (const auto& [flag, value] : FlagValues(config)) {
    if (flag != "--reshard_after_forward") continue;
    found = true;
    EXPECT_EQ(value, "false");
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace mtb
