#include "frontend/scenario.h"

#include <gtest/gtest.h>

#include <cmath>

#include "frontend/specs.h"
#include "ir/assert.h"

namespace lathe {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_scenario_toml(text, "s.toml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Scenario, BuiltinsParseAndNameRealSpecs) {
  std::vector<BuiltinSpec> all = builtin_specs("scenarios");
  ASSERT_GE(all.size(), 4u);
  int kinds[4] = {0, 0, 0, 0};
  for (const BuiltinSpec& b : all) {
    ScenarioSpec s = parse_scenario_toml(b.text, b.path);
    EXPECT_EQ(s.name, b.name) << b.path;
    EXPECT_EQ(detect_spec_kind(b.text, b.path), SpecKind::scenario);
    ASSERT_TRUE(s.model && s.hardware) << b.path;
    load_model(*s.model);
    load_target(*s.hardware);
    ++kinds[int(s.kind)];
  }
  for (int k : kinds) EXPECT_GE(k, 1);  // serve, rag, moe and edge each have an example
}

TEST(Scenario, ReadsEveryTable) {
  ScenarioSpec s = parse_scenario_toml(R"(
[scenario]
name = "x"
kind = "serve"
model = "llama-3-8b"
weights = "int4:g64"
kv = "int8"
[scenario.serve]
batching = "dynamic"
max_batch = 8
batch_timeout_ms = 15
slo_tpot_ms = 40
router = "least-loaded"
replicas = 2
[scenario.arrivals]
rate = 2.5
requests = 100
prompt = "lognormal:300,0.5"
output = "fixed:64"
priority_mix = [1, 3]
)",
                                       "s.toml");
  EXPECT_EQ(s.serve.batching, BatchingKind::dynamic_batch);
  EXPECT_EQ(s.serve.max_batch, 8);
  EXPECT_DOUBLE_EQ(s.serve.batch_timeout_s, 0.015);
  EXPECT_DOUBLE_EQ(s.serve.slo_tpot_s, 0.040);
  EXPECT_EQ(s.serve.router, RouterKind::least_loaded);
  EXPECT_EQ(s.arrivals.requests, 100);
  EXPECT_EQ(s.arrivals.prompt.kind, Distribution::Kind::lognormal);
  EXPECT_EQ(s.arrivals.output.a, 64);
  ASSERT_EQ(s.arrivals.priority_mix.size(), 2u);
  ASSERT_TRUE(s.options.weights.has_value());
  EXPECT_EQ(format_name(*s.options.weights), "int4:g64");
}

TEST(Scenario, ErrorsAreLocated) {
  std::string e =
      error_of("[scenario]\nname = \"x\"\nkind = \"serve\"\n[scenario.serve]\nmax_bacth = 3\n");
  EXPECT_NE(e.find("s.toml:5:"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'max_batch'"), std::string::npos) << e;
  e = error_of("[scenario]\nname = \"x\"\nkind = \"rag\"\n[scenario.moe]\ngpus = 2\n");
  EXPECT_NE(e.find("takes [scenario.rag]"), std::string::npos) << e;
  e = error_of(
      "[scenario]\nname = \"x\"\nkind = \"serve\"\n[scenario.arrivals]\nprompt = \"gauss:3\"\n");
  EXPECT_NE(e.find("s.toml:5:"), std::string::npos) << e;
  EXPECT_NE(e.find("scenario.arrivals.prompt"), std::string::npos) << e;
  e = error_of("[scenario]\nname = \"x\"\nkind = \"party\"\n");
  EXPECT_NE(e.find("s.toml:3:"), std::string::npos) << e;
  e = error_of(
      "[scenario]\nname = \"x\"\nkind = \"edge\"\n[scenario.edge]\nweights = [\"int5\"]\n");
  EXPECT_NE(e.find("scenario.edge.weights"), std::string::npos) << e;
  e = error_of(
      "[scenario]\nname = \"x\"\nkind = \"edge\"\n[[scenario.edge.claims]]\nlabel = \"f16\"\nms = "
      "3\n");
  EXPECT_NE(e.find("claims[0].ms"), std::string::npos) << e;
  e = error_of("[scenario]\nname = \"x\"\nkind = \"moe\"\n[scenario.moe]\nload = \"histogram\"\n");
  EXPECT_NE(e.find("needs a histogram"), std::string::npos) << e;
  EXPECT_THROW(load_scenario("no-such-scenario"), Error);
}

TEST(Distribution, ParsesAndRejects) {
  EXPECT_EQ(parse_distribution("uniform:10,20")->b, 20);
  EXPECT_EQ(parse_distribution("512")->kind, Distribution::Kind::fixed);
  EXPECT_NEAR(parse_distribution("lognormal:100,0.5")->mean(), 100 * std::exp(0.125), 1e-9);
  for (const char* bad :
       {"uniform:20,10", "uniform:5", "fixed:-1", "lognormal:0,1", "poisson:3", "", "uniform:a,b"})
    EXPECT_FALSE(parse_distribution(bad).has_value()) << bad;
}

}  // namespace
}  // namespace lathe
