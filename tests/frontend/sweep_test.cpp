#include "frontend/sweep.h"

#include <gtest/gtest.h>

#include "frontend/specs.h"
#include "ir/assert.h"

namespace lathe {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_sweep_toml(text, "s.toml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* kHead = "[sweep]\nmodels = [\"tiny\"]\nhardware = [\"cpu-host\"]\n";

TEST(SweepSpec, ReadsAxesRangesAndDefaults) {
  SweepSpec s =
      parse_sweep_toml(std::string(kHead) +
                           "batch = { from = 1, to = 100, mul = 4 }\n"
                           "prompt = { from = 128, to = 512, step = 128 }\n"
                           "gen = 7\n"
                           "weights = [\"auto\", \"int8\", \"int4:g32\"]\n"
                           "kv = [\"auto\", \"int4\"]\n"
                           "kv_layout = [\"auto\", \"paged:8\"]\n"
                           "fusion = [\"all\", \"none\", \"fuse-qkv+flash-attention\"]\n"
                           "objectives = [\"max tokens_per_s\", \"tpot_ms\"]\n"
                           "[sweep.whatif]\nhbm_bandwidth_gbs = [\"x1\", \"x2\", 100]\n"
                           "[sweep.constraints]\nfits = false\ntpot_ms = 50\ntokens_per_s = 10\n",
                       "s.toml");
  EXPECT_EQ(s.name, "s");
  EXPECT_EQ(s.batch, (std::vector<int64_t>{1, 4, 16, 64}));
  EXPECT_EQ(s.prompt, (std::vector<int64_t>{128, 256, 384, 512}));
  EXPECT_EQ(s.gen, (std::vector<int64_t>{7}));
  ASSERT_EQ(s.weights.size(), 3u);
  EXPECT_FALSE(s.weights[0].has_value());
  EXPECT_EQ(s.weights[2]->group, 32);
  EXPECT_EQ(s.fusion[2].enabled, (std::vector<std::string>{"fuse-qkv", "flash-attention"}));
  EXPECT_FALSE(s.fusion[1].all);
  EXPECT_TRUE(s.fusion[1].enabled.empty());
  ASSERT_EQ(s.objectives.size(), 2u);
  EXPECT_FALSE(s.objectives[0].minimize);
  EXPECT_TRUE(s.objectives[1].minimize);  // tpot_ms: lower is better
  EXPECT_FALSE(s.fits);
  ASSERT_EQ(s.constraints.size(), 2u);
  EXPECT_EQ(s.constraints[0].text(), "tpot_ms <= 50");
  EXPECT_EQ(s.constraints[1].text(), "tokens_per_s >= 10");
  ASSERT_EQ(s.whatif.size(), 1u);
  EXPECT_EQ(s.whatif[0].values, (std::vector<std::string>{"x1", "x2", "100"}));
  // 1 model x 3 hardware what-ifs x 3 weights x 2 kv x 2 layouts x 3 fusion x 4 x 4 x 1
  EXPECT_EQ(sweep_point_count(s), 3u * 3 * 2 * 2 * 3 * 4 * 4);
}

TEST(SweepSpec, BadInputIsALocatedError) {
  struct Case {
    std::string body, want;
  };
  const Case cases[] = {
      {"batch = []\n", "s.toml:4:9: sweep.batch: empty axis"},
      {"batch = { from = 9, to = 3 }\n", "s.toml:4:9: sweep.batch: empty range"},
      {"batch = { from = 1, to = 3, step = 1, mul = 2 }\n", "either 'step' or 'mul'"},
      {"batch = [2, 2]\n", "2 appears twice"},
      {"weights = [\"int8\", \"int8:g0\"]\n", "sweep.weights"},
      {"weights = [\"int8\", \"int8\"]\n", "appears twice"},
      {"objectives = [\"min tpto_ms\"]\n", "did you mean 'tpot_ms'"},
      {"objectives = [\"fastest\"]\n", "unknown objective metric 'fastest'"},
      {"objectives = [\"tpot_ms\", \"max tpot_ms\"]\n", "appears twice"},
      {"fusion = [\"fuse-qkvv\"]\n", "did you mean 'fuse-qkv'"},
      {"fusion = [\"all\", \"default\"]\n", "\"all\" appears twice"},
      {"fusion = [\"fuse-qkv+flash-attention\", \"flash-attention+fuse-qkv\"]\n", "appears twice"},
      {"kv_layout = [\"paged:0\"]\n", "sweep.kv_layout"},
      {"act = [\"int8\"]\n", "expected f32, f16, bf16 or auto"},
      {"tp = [0]\n", "expected integers in [1, 1024]"},
      {"weight = [\"int8\"]\n", "did you mean 'weights'"},
      {"[sweep.whatif]\nbandwith = [\"x2\"]\n", "sweep.whatif.bandwith: unknown hardware field"},
      {"[sweep.whatif]\nhbm_bandwidth_gbs = [true]\n", "expected numbers"},
      {"[sweep.whatif]\nhbm_bandwidth_gbs = [\"x1\", \"x1.0\"]\n",
       "s.toml:5:28: sweep.whatif.hbm_bandwidth_gbs: \"x1.0\" is the same point as \"x1\""},
      {"[sweep.whatif]\nhbm_bandwidth_gbs = [3000, 3000.0]\n", "\"3000\", already in the axis"},
      // a value that leaves a hardware entry unusable is named where it is written
      {"[sweep.whatif]\nmemory_gb = [\"x1\", \"x1e-5\"]\n",
       "s.toml:5:20: sweep.whatif.memory_gb: cpu-host+memory_gb=x1e-5:"},
      {"[sweep.whatif]\nmemory_gb = [\"x1\", \"x-2\"]\n",
       "s.toml:5:20: sweep.whatif.memory_gb: 'x-2': a factor is x followed by a number >= 0"},
      {"[sweep.constraints]\ntpot_ms = 0\n", "expected a positive bound"},
      {"[sweep.constraints]\nthroughput = 3\n", "unknown key"},
  };
  for (const Case& c : cases) {
    std::string e = error_of(std::string(kHead) + c.body);
    EXPECT_NE(e.find(c.want), std::string::npos) << c.body << " -> " << e;
  }
  EXPECT_NE(error_of("[sweep]\nhardware = [\"cpu-host\"]\n").find("'models'"), std::string::npos);
  EXPECT_NE(error_of("[sweep]\nmodels = [\"tiny\"]\nhardware = [\"no-such-gpu\"]\n")
                .find("s.toml:3:13: sweep.hardware"),
            std::string::npos);
  EXPECT_NE(error_of("[sweep]\nmodels = [\"tinny\"]\nhardware = [\"cpu-host\"]\n")
                .find("did you mean 'tiny'"),
            std::string::npos);
  EXPECT_NE(error_of("").find("expected a [sweep] table"), std::string::npos);
}

TEST(SweepSpec, BuiltinSweepsParseAndLoadByName) {
  std::vector<std::string> names = builtin_names("sweeps");
  ASSERT_GE(names.size(), 3u);
  for (const std::string& n : names) {
    SweepSpec s = load_sweep(n);
    EXPECT_FALSE(s.objectives.empty()) << n;
    EXPECT_GT(sweep_point_count(s), 0u) << n;
  }
  EXPECT_THROW(load_sweep("no-such-sweep"), Error);
}

TEST(SweepSpec, TargetSpecAppliesOverrides) {
  Target t = load_target_spec("a100-80g+hbm_bandwidth_gbs=x1.5+efficiency.gemm=0.6");
  EXPECT_DOUBLE_EQ(t.hbm_bandwidth_gbs, load_target("a100-80g").hbm_bandwidth_gbs * 1.5);
  EXPECT_DOUBLE_EQ(t.eff.gemm, 0.6);
  EXPECT_EQ(t.name, "a100-80g+hbm_bandwidth_gbs=x1.5+efficiency.gemm=0.6");
  EXPECT_THROW(load_target_spec("a100-80g+nonsense=2"), Error);
}

}  // namespace
}  // namespace lathe
