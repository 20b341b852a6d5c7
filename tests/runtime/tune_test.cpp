// Tuned CPU kernels (codegen/tuning.h) against the float64 reference, and the tuner.
#include "runtime/tune.h"

#include <gtest/gtest.h>

#include "support/cpu_run.h"

namespace lathe {
namespace {

std::vector<std::vector<int32_t>> prompts(int64_t vocab) {
  std::vector<std::vector<int32_t>> p;
  for (int len : {5, 11, 8}) {
    std::vector<int32_t> t;
    for (int i = 0; i < len; ++i) t.push_back(int32_t((len * 97 + i * 31 + 3) % vocab));
    p.push_back(t);
  }
  return p;
}

// Every knob at a non-default value, including splits with more parts than cached
// positions (empty parts) and row tiles smaller than the step's rows: the logits of
// prefill and three decode steps match the reference.
TEST(TunedKernels, MatchTheReference) {
  for (const char* weights : {"f32", "int8"}) {
    PlanOptions o;
    o.weights = parse_weight_format(weights);
    Workload w{3, 11, 4};
    Plan plan = testing::make_plan("tiny", w, o);
    for (Graph* g : {&plan.prefill, &plan.decode})
      for (NodeId id : g->topo_order()) {
        auto k = tuning_key(*g, id);
        if (!k) continue;
        std::map<std::string, int64_t> p;
        if (k->kind == "gemm") p = {{"tune_rows", 4}, {"tune_cols", 32}};
        if (k->kind == "flash_attention") p = {{"tune_qt", 4}};
        if (k->kind == "decode_attention") p = {{"tune_split", 8}};
        apply_params(*g, k->kind, k->shape, p);
      }
    auto built = testing::build_plan_graphs("tiny", "cpu-host", w, PlanOptions{});
    Reference ref(built.prefill, built.decode, synthetic_source(42));
    WeightStore ws = WeightStore::build({&plan.prefill, &plan.decode}, synthetic_source(42), 2);
    SessionOptions so;
    so.poison = true;
    so.threads = 2;
    CpuSession s(plan, ws, testing::test_jit(), so);
    auto ps = prompts(plan.decode.attrs.i("vocab"));
    double tol = std::string(weights) == "f32" ? 1e-4 : 3 * (0.0039 + 0.0039);
    StepResult r = s.prefill(ps);
    std::vector<std::vector<double>> want = ref.prefill(ps);
    for (int step = 0; step < 4; ++step) {
      std::vector<int32_t> next;
      for (size_t q = 0; q < want.size(); ++q) {
        EXPECT_LT(normalized_error(r.logits[q], want[q]), tol)
            << weights << " step " << step << " sequence " << q;
        next.push_back(int32_t(std::max_element(want[q].begin(), want[q].end()) - want[q].begin()));
      }
      if (step == 3) break;
      r = s.decode(next);
      want = ref.decode(next);
    }
  }
}

// The tuner times every candidate of every key and writes only winners; the tuned
// plan runs.
TEST(Tuner, WritesWinnersAmongTheCandidates) {
  Plan plan = testing::make_plan("tiny", {1, 32, 4}, PlanOptions{});
  WeightStore ws = WeightStore::build({&plan.prefill, &plan.decode}, synthetic_source(1), 2);
  TuneOptions o;
  o.threads = 2;
  o.reps = 1;
  o.decode_steps = 2;
  TuneResult r = tune_cpu(plan, ws, testing::test_jit(), o);
  ASSERT_EQ(r.all.size(), 6u);  // 4 prefill GEMMs, flash attention, decode attention
  for (const TuningEntry& e : r.all) {
    EXPECT_EQ(e.candidates.size(), tuning_candidates(e.kind).size()) << e.kind;
    for (const auto& [params, us] : e.candidates) EXPECT_GT(us, 0) << e.kind << " " << e.shape;
    EXPECT_LE(e.best_us, e.default_us);
  }
  for (const TuningEntry& e : r.file.entries) {
    EXPECT_FALSE(e.params.empty());
    EXPECT_LT(e.best_us, e.default_us);
  }
  if (!r.file.entries.empty()) {
    EXPECT_GT(r.prefill_default_s, 0);
    EXPECT_GT(r.decode_tuned_s, 0);
  }
  TuningFile back = tuning_from_json(tuning_to_json(r.file), "t.json");
  Plan tuned = plan;
  EXPECT_EQ(apply_tuning(tuned, back), [&] {
    int n = 0;
    for (const Graph* g : {&tuned.prefill, &tuned.decode})
      for (NodeId id : g->topo_order())
        if (auto k = tuning_key(*g, id))
          for (const TuningEntry& e : back.entries) n += e.kind == k->kind && e.shape == k->shape;
    return n;
  }());
}

}  // namespace
}  // namespace lathe
