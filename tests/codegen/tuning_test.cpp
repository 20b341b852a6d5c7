#include "codegen/tuning.h"

#include <gtest/gtest.h>

#include <set>

#include "codegen/cpu/emit_cpu.h"
#include "ir/assert.h"
#include "support/plans.h"

namespace lathe {
namespace {

using testing::build_plan_graphs;
using testing::lower_plan;

TEST(Tuning, KeysNameTheTunableKernels) {
  PlanOptions o;
  o.weights = parse_weight_format("int8");
  auto b = build_plan_graphs("tiny", "cpu-host", {2, 16, 4}, o);
  Lowered l = lower_plan(b, o);
  std::set<std::string> kinds;
  for (NodeId id : l.prefill.topo_order())
    if (auto k = tuning_key(l.prefill, id)) kinds.insert(k->kind);
  EXPECT_EQ(kinds, (std::set<std::string>{"gemm", "flash_attention"}));
  kinds.clear();
  for (NodeId id : l.decode.topo_order())
    if (auto k = tuning_key(l.decode, id)) kinds.insert(k->kind);
  EXPECT_EQ(kinds, (std::set<std::string>{"decode_attention"}));  // decode GEMVs have no knob
  for (NodeId id : l.prefill.topo_order())
    EXPECT_FALSE(tuning_key(l.prefill, id, "cuda").has_value());
}

TEST(Tuning, FileRoundTripsAndAppliesToMatchingNodes) {
  auto b = build_plan_graphs("tiny", "cpu-host", {2, 16, 4});
  Lowered l = lower_plan(b, {});
  TuningFile t;
  t.machine = "test machine";
  t.model = "tiny";
  for (const Graph* g : {&l.prefill, &l.decode})
    for (NodeId id : g->topo_order())
      if (auto k = tuning_key(*g, id)) {
        TuningEntry e;
        e.kind = k->kind;
        e.shape = k->shape;
        e.params = tuning_candidates(k->kind).back();
        e.default_us = 10;
        e.best_us = 8;
        bool dup = false;
        for (const TuningEntry& x : t.entries) dup |= x.kind == e.kind && x.shape == e.shape;
        if (!dup) t.entries.push_back(e);
      }
  ASSERT_GE(t.entries.size(), 3u);
  TuningFile back = tuning_from_json(tuning_to_json(t), "t.json");
  EXPECT_EQ(tuning_to_json(back), tuning_to_json(t));
  int changed = apply_tuning(l.prefill, back) + apply_tuning(l.decode, back);
  EXPECT_GT(changed, 0);
  // Tuned nodes emit their parameters as template arguments.
  bool split = false, qt = false, tiles = false;
  for (const Graph* g : {&l.prefill, &l.decode})
    for (const CpuKernel& k : emit_cpu_kernels(*g)) {
      split |= k.function.find("attention_split_kernel<") != std::string::npos;
      size_t a = k.function.find("lk::attention_kernel<");
      qt |= a != std::string::npos &&
            k.function.find(", 32>(ctx", a) == k.function.find(">(ctx", a) - 4;
      tiles |= k.function.find(", 64, 64>(ctx, st, d,") != std::string::npos;
    }
  EXPECT_TRUE(split);
  EXPECT_TRUE(qt);
  EXPECT_TRUE(tiles);
}

TEST(Tuning, MalformedFilesAreErrors) {
  EXPECT_THROW(tuning_from_json("{}", "a.json"), Error);
  EXPECT_THROW(tuning_from_json("not json", "a.json"), Error);
  EXPECT_THROW(
      tuning_from_json(
          R"({"format": "lathe-tuning", "version": 2, "backend": "cpu", "entries": []})", "a.json"),
      Error);
  EXPECT_THROW(tuning_from_json(R"({"format": "lathe-tuning", "version": 1, "backend": "cpu",
      "entries": [{"kind": "gemm", "shape": "x", "params": {"tile": 3}}]})",
                                "a.json"),
               Error);
}

}  // namespace
}  // namespace lathe
