#include <string>

#include "common/results/json_io.h"
#include "gtest/gtest.h"
#include "planner/cluster.h"
#include "planner/model.h"
#include "planner/reproduce.h"
#include "planner/validate.h"

namespace mtb::planner {
namespace {

Cluster Read(const std::string& path) { return *ReadClusterFile(path); }

TEST(Validate, PredictsEveryCellOfOursWithTheEstimatesMemory) {
  StrategyMatrixResult matrix;
  ASSERT_TRUE(ReadJsonFile("planner/testdata/matrix_tiny_2ranks.json", &matrix).ok());
  const absl::StatusOr<ValidationResult> result =
      Validate(matrix, Read("planner/testdata/hand_cluster.json"));
  ASSERT_TRUE(result.ok()) << result.status();
  // ddp, zero1, zero2, fsdp, fsdp_no_reshard; the two peers skipped.
  EXPECT_EQ(result->cells_size(), 5);
  for (const ValidationCell& cell : result->cells()) {
    EXPECT_GT(cell.predicted_step_ms(), 0);
    EXPECT_GT(cell.memory_ratio(), 1.0) << cell.strategy();
  }
  ASSERT_EQ(result->rankings_size(), 1);
  EXPECT_EQ(result->rankings(0).measured_order_size(), 5);
  // The planner's memory is the matrix's own closed form, cell by cell.
  EXPECT_EQ(result->notes(1).rfind("0 of 5 cells", 0), 0u) << result->notes(1);
}

TEST(Validate, AMatrixWithRowsPerGemmBackendIsValidatedOnItsFirstBackend) {
  StrategyMatrixResult matrix;
  ASSERT_TRUE(ReadJsonFile("planner/testdata/matrix_tiny_2ranks.json", &matrix).ok());
  const int rows = matrix.rows_size();
  for (int i = 0; i < rows; ++i) {
    if (matrix.rows(i).strategy().rfind("pytorch_", 0) == 0) continue;
    matrix.mutable_rows(i)->set_gemm("onednn");
    StrategyMatrixRow blas = matrix.rows(i);
    blas.set_gemm("blas");
    blas.set_step_ms(blas.step_ms() * 2);
    *matrix.add_rows() = blas;
  }
  const absl::StatusOr<ValidationResult> result =
      Validate(matrix, Read("planner/testdata/hand_cluster.json"));
  ASSERT_TRUE(result.ok()) << result.status();
  // The five strategies once (not twice, which would rank each against itself).
  EXPECT_EQ(result->cells_size(), 5);
  ASSERT_EQ(result->rankings_size(), 1);
  EXPECT_EQ(result->rankings(0).measured_order_size(), 5);
  for (const ValidationCell& cell : result->cells()) {
    for (const StrategyMatrixRow& row : matrix.rows()) {
      if (row.strategy() == cell.strategy() && row.gemm() == "onednn") {
        EXPECT_EQ(cell.measured_step_ms(), row.step_ms()) << cell.strategy();
      }
    }
  }
}

TEST(Validate, MatrixWithoutOurStrategiesIsInvalidArgument) {
  StrategyMatrixResult matrix;
  StrategyMatrixRow* row = matrix.add_rows();
  row->set_model("tiny");
  row->set_strategy("pytorch_ddp");
  const absl::Status status = Validate(matrix, Read("planner/testdata/hand_cluster.json")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("no row of ddp"), std::string::npos);
}

TEST(Validate, KendallTauCountsConcordantPairs) {
  EXPECT_EQ(KendallTau({"a", "b", "c"}, {"a", "b", "c"}), 1.0);
  EXPECT_EQ(KendallTau({"a", "b", "c"}, {"c", "b", "a"}), -1.0);
  EXPECT_NEAR(KendallTau({"a", "b", "c"}, {"b", "a", "c"}), 1.0 / 3, 1e-12);
}

TEST(Reproduce, MegatronFlopsFormulaByHand) {
  const ModelSpec model = *ModelFromShape("1.7b", 51200, 2304, 24, 24, 2048);
  const double h = 2304, s = 2048, l = 24, v = 51200;
  EXPECT_DOUBLE_EQ(MegatronIterationFlops(model, 512),
                   96 * 512 * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h)));
}

TEST(Reproduce, FirstRowCalibratesAndEveryRowIsPredicted) {
  PublishedTable table;
  ASSERT_TRUE(ReadJsonFile("planner/testdata/megatron_2021_table1.json", &table).ok());
  const absl::StatusOr<ReproductionResult> result =
      Reproduce(table, Read("planner/testdata/selene_a100.cluster.json"));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->rows_size(), 10);
  EXPECT_NEAR(result->rows(0).calibrated_error(), 0, 1e-9);
  for (const ReproducedRow& row : result->rows()) {
    EXPECT_LT(row.predicted_tflops_per_device(), 312) << row.label();
    EXPECT_TRUE(row.memory().fits()) << row.label();
  }
  EXPECT_GT(result->calibrated_fraction_of_peak(), 0);
  EXPECT_LT(result->calibrated_fraction_of_peak(), 1);
}

TEST(Reproduce, RowWhoseLayoutDoesNotDivideItsModelIsInvalidArgument) {
  PublishedTable table;
  ASSERT_TRUE(ReadJsonFile("planner/testdata/megatron_2021_table1.json", &table).ok());
  table.mutable_rows(0)->mutable_layout()->set_pp(7);
  table.mutable_rows(0)->mutable_layout()->set_dp(32);
  const absl::Status status =
      Reproduce(table, Read("planner/testdata/selene_a100.cluster.json")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("not divisible by pp 7"), std::string::npos) << status;
}

}  // namespace
}  // namespace mtb::planner
