#include "simulator/prepared.h"

#include <gtest/gtest.h>

#include "ir/buffers.h"
#include "support/plans.h"

namespace lathe {
namespace {

using testing::build_plan_graphs;
using testing::lower_plan;

// The precomputed live-activation table gives what peak_live_bytes computes from the
// graph, at bindings other than the ones the graph was built for, for fused and
// unfused, dense and MoE, prefill and decode graphs.
TEST(LivePeak, EqualsPeakLiveBytesAtAnyBindings) {
  for (const char* model : {"tiny", "tiny-moe", "llama-3-8b"})
    for (bool passes : {true, false}) {
      PlanOptions o = passes ? PlanOptions{} : testing::no_passes();
      auto b = build_plan_graphs(model, "a100-80g", {2, 64, 16}, o);
      Lowered l = lower_plan(b, o);
      for (const Graph* g : {&l.prefill, &l.decode}) {
        LivePeak peak(*g);
        for (Bindings bind : {Bindings{1, 1, 1}, Bindings{3, 17, 40}, Bindings{64, 1, 4000},
                              Bindings{7, 512, 512}}) {
          double want = peak_live_bytes(*g, bind);
          EXPECT_NEAR(peak.at(bind), want, 1e-9 * want)
              << model << " " << phase_name(g->phase) << " B" << bind.B << " S" << bind.S << " T"
              << bind.T;
        }
        EXPECT_LE(peak.candidate_positions(), g->num_nodes() + 1);
      }
    }
}

// One preparation costs many workloads and targets: each result equals a fresh
// simulate() of the same graphs, figure for figure (per-op rows included).
TEST(PreparedPlan, ReusedAcrossWorkloadsAndTargetsEqualsSimulate) {
  PlanOptions o;
  o.weights = parse_weight_format("int4:g128");
  auto b = build_plan_graphs("mixtral-8x7b", "h100-sxm", {4, 256, 32}, o);
  Lowered l = lower_plan(b, o);
  PreparedPlan prep(l.prefill, l.decode);
  for (const char* hw : {"h100-sxm", "a100-80g", "l4"})
    for (Workload w :
         {Workload{4, 256, 32}, Workload{1, 17, 1}, Workload{33, 1000, 300}, Workload{2, 64, 0}}) {
      Target t = load_target(hw);
      for (bool ideal : {false, true}) {
        SimOptions so;
        so.ideal = ideal;
        SimResult a = prep.simulate(t, w, so), e = simulate(l.prefill, l.decode, t, w, so);
        EXPECT_EQ(a.ttft_s, e.ttft_s);
        EXPECT_EQ(a.tpot_s, e.tpot_s);
        EXPECT_EQ(a.e2e_s, e.e2e_s);
        EXPECT_EQ(a.mem.total, e.mem.total);
        EXPECT_EQ(a.mem.max_batch, e.mem.max_batch);
        ASSERT_EQ(a.ops.size(), e.ops.size());
        for (size_t i = 0; i < a.ops.size(); ++i)
          EXPECT_EQ(a.ops[i].time_s, e.ops[i].time_s) << a.ops[i].name;
      }
    }
}

// At the bindings the memory plan ran for, activations are its arena; elsewhere the
// peak of live values (which the arena is never below).
TEST(PreparedPlan, ActivationsAreTheArenaAtThePlannedBindings) {
  auto b = build_plan_graphs("small", "cpu-host", {2, 64, 16});
  Lowered l = lower_plan(b, {});
  PreparedPlan prep(l.prefill, l.decode);
  double arena =
      double(std::max(l.prefill.attrs.i("arena_bytes"), l.decode.attrs.i("arena_bytes")));
  EXPECT_EQ(prep.activation_bytes({2, 64, 16}), arena);
  double other = prep.activation_bytes({2, 64, 17});  // decode planned for T = 80, now 81
  EXPECT_GT(other, 0);
  EXPECT_LE(other, arena * 1.01);
}

}  // namespace
}  // namespace lathe
