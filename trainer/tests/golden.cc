#include "trainer/tests/golden.h"

#include <memory>

#include "ATen/Parallel.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/base/status.h"
#include "trainer/config/config.h"
#include "trainer/data/data.h"
#include "trainer/run/strategy.h"
#include "trainer/tests/test_config.h"
#include "trainer/run/trainer.h"

namespace mtb {

// TinyConfig's model and data with what the golden run adds to exercise more
// of the code: accumulation, dropout, a cosine schedule with warm-up,
// clipping and decay. Any change to TinyConfig changes the golden losses too.
TrainConfig GoldenConfig() {
  TrainConfig c = TinyConfig();
  c.set_grad_accum(2);
  c.set_dropout(0.1);
  c.set_lr(3e-3);
  c.set_weight_decay(0.1);
  c.set_lr_schedule(TrainConfig::cosine);
  c.set_lr_warmup_steps(2);
  c.set_lr_decay_steps(5);
  c.set_min_lr(3e-4);
  c.set_max_grad_norm(1.0);
  c.set_steps(5);
  c.set_seed(2024);
  ResolveConfig(&c, 1);
  return c;
}

absl::StatusOr<std::vector<double>> TrainLosses(const TrainConfig& config) {
  at::set_num_threads(config.intra_op_threads());
  ASSIGN_OR_RETURN(std::unique_ptr<DataSource> data, TensorData(OpenSamplesFor(config)));
  SingleStrategy strategy;
  ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer,
                   Trainer::Create(config, RankInfo{}, &strategy, data.get()));
  std::vector<double> losses;
  for (int step = 1; step <= config.steps(); ++step) {
    ASSIGN_OR_RETURN(const StepRecord record, trainer->Step());
    losses.push_back(record.loss());
  }
  return losses;
}

std::string FormatGoldenLosses(const std::vector<double>& losses,
                               const std::string& gemm) {
  std::string text =
      "# First losses of trainer/tests/golden.h's GoldenConfig(): a seeded tiny GPT\n"
      "# (vocab 64, d_model 32, 2 layers, seq 16, batch 4 x grad_accum 2,\n"
      "# synthetic data, dropout 0.1, AdamW cosine, clip 1.0, seed 2024, "
      "fp32).\n";
  if (gemm == "blas") {
    absl::StrAppend(&text,
                    "# Regenerate: bazel run //trainer:golden_losses > "
                    "testdata/golden_losses_tiny.txt\n");
  } else {
    absl::StrAppend(&text, "# GEMMs: ", gemm,
                    ". Regenerate: bazel run //trainer:golden_losses -- "
                    "--gemm=", gemm, " > testdata/golden_losses_tiny_", gemm,
                    ".txt\n");
  }
  absl::StrAppend(&text, "# <step> <loss>\n");
  for (size_t i = 0; i < losses.size(); ++i) {
    absl::StrAppend(&text, i + 1, " ", absl::StrFormat("%.17g", losses[i]),
                    "\n");
  }
  return text;
}

absl::StatusOr<std::vector<double>> ParseGoldenLosses(absl::string_view text) {
  std::vector<double> losses;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    int step = 0;
    double loss = 0;
    if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &step) ||
        !absl::SimpleAtod(fields[1], &loss) ||
        step != static_cast<int>(losses.size()) + 1) {
      return absl::DataLossError(
          absl::StrCat("golden losses: bad line '", line, "'"));
    }
    losses.push_back(loss);
  }
  return losses;
}

}  // namespace mtb
