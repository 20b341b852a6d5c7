#include <gtest/gtest.h>

#include "runtime/cpu/probe.h"
#include "support/cpu_run.h"

namespace lathe {
namespace {

TEST(CpuSmoke, TinyDefaultPlanMatchesReference) {
  Workload w{1, 8, 4};
  PlanOptions o;
  Plan p = testing::make_plan("tiny", w, o);
  WeightSource src = synthetic_source(1);
  WeightStore store = WeightStore::build({&p.prefill, &p.decode}, src, 2);
  SessionOptions so;
  so.poison = true;
  so.threads = 2;
  CpuSession s(p, store, testing::test_jit(), so);
  auto ref_graphs = testing::build_plan_graphs("tiny", "cpu-host", w, PlanOptions{});
  Reference ref(ref_graphs.prefill, ref_graphs.decode, src);
  std::vector<std::vector<int32_t>> prompts = {{1, 5, 9, 13, 17, 21, 25, 29}};
  StepResult r = s.prefill(prompts);
  auto rl = ref.prefill(prompts);
  double e = normalized_error(r.logits[0], rl[0]);
  std::printf("prefill err %.3g\n", e);
  EXPECT_LT(e, 1e-4);
  for (int step = 0; step < 3; ++step) {
    int32_t t = r.argmax[0];
    r = s.decode({t});
    rl = ref.decode({t});
    e = normalized_error(r.logits[0], rl[0]);
    std::printf("decode err %.3g (token %d)\n", e, t);
    EXPECT_LT(e, 1e-4);
  }
}

// The probe's fit of the integer GEMMs' two fixed costs recovers them exactly from
// rates made by the model it assumes, and leaves a half at 0 when its pair shows no
// cost.
TEST(Probe, FitsTwoFixedCosts) {
  const double peak = 900, e = 0.4, hk = 200, hm = 12;
  auto rate = [&](double M, double K) { return peak * e / (1 + hk / K + hm / M); };
  double eff = 0, half_k = 0, half_rows = 0;
  fit_two_fixed_costs(peak, rate(128, 2048), rate(128, 512), rate(32, 2048), 128, 2048, 512, 32, eff, half_k,
                      half_rows);
  EXPECT_NEAR(eff, e, 1e-9);
  EXPECT_NEAR(half_k, hk, 1e-6);
  EXPECT_NEAR(half_rows, hm, 1e-6);
  // 32 rows no slower than 128: no per-row cost.
  fit_two_fixed_costs(peak, rate(128, 2048), rate(128, 512), rate(128, 2048), 128, 2048, 512, 32, eff, half_k,
                      half_rows);
  EXPECT_EQ(half_rows, 0.0);
  EXPECT_NEAR(half_k, hk / (1 + hm / 128) , 1e-6);
}

}  // namespace
}  // namespace lathe
