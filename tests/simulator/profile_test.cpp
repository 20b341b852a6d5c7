#include "simulator/profile.h"

#include <gtest/gtest.h>

#include "support/plans.h"

namespace lathe {
namespace {

// Achieved rates never exceed the peaks they are measured against; GEMMs in prefill
// reuse tiles (a high implied L2 hit rate), decode GEMVs stream their weights once.
TEST(Profile, UtilizationIsBoundedAndL2FollowsReuse) {
  for (const char* hw : {"h100-sxm", "a100-80g", "l4", "cpu-host"}) {
    for (const char* model : {"llama-3-8b", "tiny-moe"}) {
      testing::Built b = testing::build_plan_graphs(model, hw, {4, 1024, 64});
      Lowered l = testing::lower_plan(b, {});
      SimResult r = simulate(l.prefill, l.decode, b.target, b.workload);
      std::vector<KernelProfile> prof = profile_ops(r, l.prefill, l.decode, b.target);
      ASSERT_EQ(prof.size(), r.ops.size());
      int gemm_hits = 0;
      for (size_t i = 0; i < prof.size(); ++i) {
        const OpRow& o = r.ops[i];
        const KernelProfile& k = prof[i];
        EXPECT_LE(k.compute_utilization, 1.0 + 1e-9) << hw << " " << o.name;
        EXPECT_LE(k.bandwidth_utilization, 1.0 + 1e-9) << hw << " " << o.name;
        EXPECT_GE(k.compute_utilization, 0.0);
        if (!b.target.is_gpu()) {
          EXPECT_FALSE(k.l2_hit_rate.has_value());
          continue;
        }
        if (o.cls == KernelClass::elementwise) {
          EXPECT_FALSE(k.l2_hit_rate.has_value()) << o.name;
        }
        if (!k.l2_hit_rate) continue;
        EXPECT_GE(*k.l2_hit_rate, 0.0);
        EXPECT_LT(*k.l2_hit_rate, 1.0);
        if (o.kernel.find("matmul") != std::string::npos && o.phase == Phase::decode &&
            std::string(model) == "llama-3-8b") {
          EXPECT_LT(*k.l2_hit_rate, 0.1) << o.name;
        }
        if (o.cls == KernelClass::gemm && o.phase == Phase::prefill && o.flops > 1e10) {
          EXPECT_GT(*k.l2_hit_rate, 0.5) << hw << " " << o.name;
          ++gemm_hits;
        }
      }
      if (b.target.is_gpu() && std::string(model) == "llama-3-8b") {
        EXPECT_GT(gemm_hits, 100) << hw;
      }
    }
  }
}

}  // namespace
}  // namespace lathe
