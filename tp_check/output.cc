#include "tp_check/output.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "common/report/report.h"
#include "common/base/status.h"

namespace mtb::tp_check {
namespace {

// Errors span many magnitudes (0, 1e-7, inf): two significant digits, %g.
std::string Errors(double value) { return absl::StrFormat("%.2g", value); }

std::string Verdict(bool pass) { return pass ? "PASS" : "FAIL"; }

std::string CollectiveSummary(const equivalence::CheckResult& check) {
  int64_t calls = 0, expected_calls = 0, bytes = 0, expected_bytes = 0;
  for (const equivalence::CollectiveCheck& c : check.collectives()) {
    calls += c.count();
    expected_calls += c.expected_count();
    bytes += c.bytes_sent();
    expected_bytes += c.expected_bytes();
  }
  return absl::StrCat(calls, "/", expected_calls, " calls, ", bytes, "/",
                      expected_bytes, " B");
}

}  // namespace

std::string RenderCheckTable(const TpCheckResult& result) {
  MarkdownTable table;
  table.headers = {"check",       "ranks",
                   "tensors ok",  "max abs err",
                   "max rel err", "collectives measured/expected (per rank)",
                   "result"};
  table.align = {Align::kLeft,  Align::kRight, Align::kRight, Align::kRight,
                 Align::kRight, Align::kLeft,  Align::kLeft};
  for (const equivalence::CheckResult& check : result.checks()) {
    double max_abs = 0, max_rel = 0;
    int ok = 0;
    for (const equivalence::TensorCheck& tensor : check.tensors()) {
      max_abs = std::max(max_abs, tensor.max_abs_error());
      max_rel = std::max(max_rel, tensor.max_rel_error());
      ok += tensor.ok() ? 1 : 0;
    }
    table.rows.push_back(
        {check.name(), absl::StrCat(check.world_size()),
         absl::StrCat(ok, "/", check.tensors_size()), Errors(max_abs),
         Errors(max_rel), CollectiveSummary(check), Verdict(check.pass())});
  }
  return table.Render();
}

std::string RenderMarkdownReport(const TpCheckResult& result) {
  const RunContext& context = result.run_context();
  const CheckOptions& options = result.options();
  std::string out = absl::StrCat(
      "# tp_check: tensor parallelism against the unsharded layers\n\n",
      Verdict(result.pass()), " on ", context.world_size(), " ranks (",
      context.backend(), "); git ", context.git_commit(),
      context.git_dirty() ? " (dirty)" : "", ", ", context.build_mode(), ", ",
      context.start_time_utc(), ". Closed forms and tensor names: "
      "docs/tp_check.md.\n\n");

  MarkdownTable settings;
  settings.headers = {"option", "value"};
  settings.rows = {
      {"checks", options.checks().empty()
                     ? "all"
                     : absl::StrJoin(options.checks(), ", ")},
      {"B, T, D, F, heads, V",
       absl::StrCat(options.batch(), ", ", options.seq_len(), ", ",
                    options.hidden(), ", ", options.ffn_hidden(), ", ",
                    options.heads(), ", ", options.vocab())},
      {"gather_output", options.gather_output() ? "true" : "false"},
      {"dropout", absl::StrCat(options.dropout())},
      {"seed", absl::StrCat(options.seed())},
      {"rtol, atol", absl::StrCat(options.rtol(), ", ", options.atol())},
  };
  absl::StrAppend(&out, settings.Render(), "\n", RenderCheckTable(result));

  for (const equivalence::CheckResult& check : result.checks()) {
    absl::StrAppend(&out, "\n## ", check.name(), ": ", Verdict(check.pass()),
                    "\n\n");
    if (!check.perturbed().empty()) {
      absl::StrAppend(&out, "Perturbed by the test hook: ", check.perturbed(),
                      ".\n\n");
    }
    MarkdownTable tensors;
    tensors.headers = {"tensor",  "kind", "shape per rank", "max abs err",
                       "max rel err", "ok", "detail"};
    tensors.align = {Align::kLeft,  Align::kLeft, Align::kLeft, Align::kRight,
                     Align::kRight, Align::kLeft, Align::kLeft};
    for (const equivalence::TensorCheck& t : check.tensors()) {
      tensors.rows.push_back(
          {t.name(), t.kind(), absl::StrCat("[", absl::StrJoin(t.shape(), ", "),
                                            "]"),
           Errors(t.max_abs_error()), Errors(t.max_rel_error()),
           t.ok() ? "yes" : "NO", t.message()});
    }
    MarkdownTable collectives;
    collectives.headers = {"phase",          "op",
                           "calls",          "expected calls",
                           "bytes sent",     "bytes received",
                           "expected bytes", "ok"};
    collectives.align = {Align::kLeft,  Align::kLeft,  Align::kRight,
                         Align::kRight, Align::kRight, Align::kRight,
                         Align::kRight, Align::kLeft};
    for (const equivalence::CollectiveCheck& c : check.collectives()) {
      collectives.rows.push_back(
          {c.phase(), c.op(), absl::StrCat(c.count()),
           absl::StrCat(c.expected_count()), absl::StrCat(c.bytes_sent()),
           absl::StrCat(c.bytes_received()), absl::StrCat(c.expected_bytes()),
           c.ok() ? "yes" : "NO"});
    }
    absl::StrAppend(&out, tensors.Render(), "\n", collectives.Render());
    if (!check.collective_mismatch_ranks().empty()) {
      absl::StrAppend(&out, "\nCollectives differed from the closed form on "
                            "ranks ",
                      absl::StrJoin(check.collective_mismatch_ranks(), ", "),
                      ".\n");
    }
    if (check.vocab_shard_columns() > 0) {
      absl::StrAppend(&out, "\nWidest logits tensor on any rank: ",
                      check.largest_logits_columns(), " columns (V/n = ",
                      check.vocab_shard_columns(), ").\n");
    }
  }
  return out;
}

absl::StatusOr<std::string> WriteOutputs(const TpCheckResult& result,
                                         const std::string& json_path,
                                         bool markdown) {
  RETURN_IF_ERROR(WriteJsonFile(result, json_path));
  if (!markdown) return std::string();
  const std::string md_path = ReplaceExtension(json_path, "md");
  ASSIGN_OR_RETURN(const std::string kept,
                   WriteCompanionFile(md_path, json_path,
                                      RenderMarkdownReport(result)));
  return kept.empty() ? absl::StrCat("report: ", md_path) : kept;
}

}  // namespace mtb::tp_check
