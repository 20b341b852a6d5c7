#include <gtest/gtest.h>

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

}  // namespace
}  // namespace lathe
