#include "moe_comm/output.h"

#include <cstdlib>
#include <string>

#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "gtest/gtest.h"

namespace mtb::moe_comm {
namespace {

MoeCommResult TwoSkews() {
  MoeCommResult result;
  result.set_schema_version(1);
  result.set_mode("benchmark");
  result.set_pass(true);
  result.mutable_run_context()->set_world_size(2);
  for (const char* skew : {"uniform", "zipf:1.5"}) {
    ConfigResult* row = result.add_configs();
    row->mutable_config()->set_tokens_per_rank(64);
    row->mutable_config()->set_num_experts(4);
    row->mutable_config()->set_top_k(2);
    row->mutable_config()->set_skew(skew);
    row->mutable_dispatch()->set_mean_ms(skew[0] == 'u' ? 1.0 : 2.0);
    row->mutable_combine()->set_mean_ms(1.5);
    row->set_drop_rate(skew[0] == 'u' ? 0.0 : 0.25);
    for (int64_t load : {100, 20, 4, 4}) row->add_expert_load(load);
    row->add_dispatch_bytes_sent(512);
    row->add_dispatch_bytes_received(1024);
  }
  return result;
}

TEST(MoeOutput, PlotsPutEachSkewAtItsZipfExponent) {
  const std::string drops = RenderSkewPlot(TwoSkews(), "drops");
  EXPECT_NE(drops.find("data-x=\"0\""), std::string::npos) << drops;
  EXPECT_NE(drops.find("data-x=\"1.5\""), std::string::npos) << drops;
  EXPECT_NE(drops.find("data-y=\"25\""), std::string::npos) << drops;
  const std::string time = RenderSkewPlot(TwoSkews(), "time");
  EXPECT_NE(time.find("dispatch N=64"), std::string::npos);
  EXPECT_NE(time.find("combine N=64"), std::string::npos);
}

TEST(MoeOutput, JsonParsesBackAndCompanionsLieBesideIt) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const std::string json = dir + "/r.json";
  auto lines = WriteOutputs(TwoSkews(), json, true, true);
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_EQ(lines->size(), 4u);
  MoeCommResult back;
  ASSERT_TRUE(ReadJsonFile(json, &back).ok());
  EXPECT_EQ(back.configs_size(), 2);
  EXPECT_EQ(back.configs(1).expert_load(0), 100);
  const auto md = ReadFileToString(dir + "/r.md");
  ASSERT_TRUE(md.ok());
  EXPECT_NE(md->find("100 20 4 4"), std::string::npos) << *md;
  EXPECT_TRUE(ReadFileToString(dir + "/r.time.svg").ok());
  EXPECT_TRUE(ReadFileToString(dir + "/r.drops.svg").ok());
}

}  // namespace
}  // namespace mtb::moe_comm
