// Before/after IR of every pass, on the tiny dense and MoE models, both phases, as a
// chain of golden files: NN_pass.ir is the graph after pass NN of the default
// pipeline, so each pass is tested on exactly its predecessor's output.
#include <gtest/gtest.h>

#include "ir/text.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "support/golden.h"
#include "support/plans.h"

namespace lathe {
namespace {

PlanOptions golden_options() {
  PlanOptions o;
  o.weights = parse_weight_format("int8");
  o.kv_dtype = DType::int4;
  return o;
}

class PassGolden : public ::testing::TestWithParam<std::tuple<const char*, Phase>> {};

TEST_P(PassGolden, EachPassMatchesItsGoldenAfterImage) {
  auto [model, phase] = GetParam();
  PlanOptions o = golden_options();
  auto b = testing::build_plan_graphs(model, "cpu-host", {2, 16, 8}, o);
  std::string dir = "passes/" + std::string(model) + "." + std::string(phase_name(phase)) + "/";
  Graph g = phase == Phase::prefill ? b.prefill : b.decode;
  std::vector<std::string> files = {"00_input.ir"};
  for (const PassInfo& p : pass_registry()) {
    char name[96];
    std::snprintf(name, sizeof name, "%02zu_%s.ir", files.size(), std::string(p.name).c_str());
    files.push_back(name);
  }
  testing::expect_golden(dir + files[0], print_graph(g));
  PassContext ctx{o, b.target};
  for (size_t i = 1; i < files.size(); ++i) {
    const PassInfo& p = pass_registry()[i - 1];
    // Input: the previous golden image parsed back (the live graph in update mode).
    Graph in = testing::updating_golden() ? g : parse_graph(testing::read_text(testing::golden_path(dir + files[i - 1])));
    p.fn(in, ctx);
    EXPECT_TRUE(verify(in).empty()) << p.name;
    testing::expect_golden(dir + files[i], print_graph(in));
    p.fn(g, ctx);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PassGolden,
                         ::testing::Values(std::tuple{"tiny", Phase::decode}, std::tuple{"tiny", Phase::prefill},
                                           std::tuple{"tiny-moe", Phase::decode},
                                           std::tuple{"tiny-moe", Phase::prefill}));

}  // namespace
}  // namespace lathe
