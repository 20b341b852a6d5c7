#include "sweep/advise.h"

#include <gtest/gtest.h>

#include "frontend/sweep.h"
#include "ir/assert.h"

namespace lathe {
namespace {

const Recommendation& item(const Advice& a, const std::string& parameter) {
  for (const Recommendation& r : a.items)
    if (r.parameter == parameter) return r;
  ADD_FAILURE() << "no recommendation for " << parameter;
  static Recommendation none;
  return none;
}

// The recommended plan meets the SLOs and fits; one more sequence does not.
TEST(Advise, RecommendedBatchIsTheLargestThatMeetsTheConstraints) {
  AdviseRequest r;
  r.model = "llama-3-8b";
  r.hardware = "a100-80g";
  r.prompt = 512;
  r.gen = 128;
  r.slo_tpot_ms = 30;
  r.slo_ttft_ms = 1500;
  r.threads = 2;
  Advice a = advise(r);
  ASSERT_EQ(a.items.size(), 5u);
  const SweepRow& p = a.plan;
  EXPECT_TRUE(p.feasible);
  EXPECT_LE(p.tpot_ms, 30);
  EXPECT_LE(p.ttft_ms, 1500);
  EXPECT_TRUE(p.fits);
  EXPECT_EQ(item(a, "max batch").value, std::to_string(p.batch));
  EXPECT_EQ(item(a, "weights").value, p.weights);
  EXPECT_EQ(item(a, "KV dtype").value, p.kv);
  EXPECT_EQ(item(a, "TP degree").value, std::to_string(p.tp));
  for (const Recommendation& x : a.items) {
    EXPECT_FALSE(x.reason.empty()) << x.parameter;
    EXPECT_NE(x.runner_up, x.value) << x.parameter;
  }
  // Batch + 1 with the same options breaks a constraint.
  SweepSpec s;
  s.models = {r.model};
  s.hardware = {r.hardware};
  s.prompt = {r.prompt};
  s.gen = {r.gen};
  s.batch = {p.batch + 1};
  s.weights = {parse_weight_format(p.weights)};
  if (p.weights == "bf16") s.weights = {std::nullopt};
  s.kv = {parse_kv_dtype(p.kv)};
  s.kv_layout = {parse_kv_layout(p.kv_layout)};
  s.tp = {p.tp};
  s.constraints = {{SweepMetric::tpot_ms, 30}, {SweepMetric::ttft_ms, 1500}};
  s.text = "next";
  SweepOptions o;
  o.keep_rows = true;
  SweepSummary sum = run_sweep(expand_sweep(s), o);
  ASSERT_EQ(sum.rows.size(), 1u);
  EXPECT_FALSE(sum.rows[0].feasible) << "batch " << p.batch + 1 << " also meets the constraints";
}

// The recommended batch fits the plan lathe compiles for it (its memory planner's arena,
// a few percent above the peak of live values the sweep rows use), and one more
// sequence does not: Llama-3-70B on an H100 was recommended batch 737 (fp8, KV int4,
// tp 2), which `lathe simulate` refuses, naming 711.
TEST(Advise, RecommendedBatchFitsItsCompiledPlan) {
  AdviseRequest r;
  r.model = "llama-3-70b";
  r.hardware = "h100-sxm";
  r.threads = 2;
  Advice a = advise(r);
  const SweepRow& p = a.plan;
  auto exact = [&](int64_t batch) {
    SweepSpec s;
    s.models = {r.model};
    s.hardware = {r.hardware};
    s.prompt = {r.prompt};
    s.gen = {r.gen};
    s.batch = {batch};
    s.weights = {p.weights == "bf16" ? std::nullopt : parse_weight_format(p.weights)};
    s.kv = {parse_kv_dtype(p.kv)};
    s.kv_layout = {parse_kv_layout(p.kv_layout)};
    s.tp = {p.tp};
    s.text = "exact";
    return simulate_point(expand_sweep(s), 0).mem;
  };
  MemoryFootprint at = exact(p.batch), next = exact(p.batch + 1);
  EXPECT_TRUE(at.fits) << "batch " << p.batch << ": " << at.total / 1e9 << " of " << at.capacity / 1e9 << " GB";
  EXPECT_FALSE(next.fits) << "batch " << p.batch + 1 << " fits too";
  EXPECT_NEAR(p.memory_gb, at.total / 1e9, 1e-9);  // the figures shown are the compiled plan's
  EXPECT_NE(item(a, "max batch").reason.find("its compiled plan needs"), std::string::npos)
      << item(a, "max batch").reason;
}

// --max-batch is the top of the search, also when it is not on the power-of-two grid:
// the recommendation never exceeds it, and reaches it when nothing else stops it.
TEST(Advise, MaxBatchIsNeverExceeded) {
  for (int64_t top : {8, 10}) {
    AdviseRequest r;
    r.model = "tiny";
    r.hardware = "h100-sxm";
    r.prompt = 64;
    r.gen = 32;
    r.max_batch = top;
    r.threads = 2;
    Advice a = advise(r);
    EXPECT_EQ(a.plan.batch, top);
    const std::string& why = item(a, "max batch").reason;
    EXPECT_NE(why.find("batch " + std::to_string(top + 1) + " is stopped by the batch grid (it ends at " +
                       std::to_string(top) + ")"),
              std::string::npos)
        << why;
  }
}

TEST(Advise, ImpossibleSlosAreAClearError) {
  AdviseRequest r;
  r.model = std::string("llama-3-8b");
  r.hardware = std::string("l4");
  r.slo_tpot_ms = 0.01;
  r.threads = 2;
  try {
    advise(r);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fastest plans reach TPOT"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lathe
