#include "simulator/prepared.h"

#include <gtest/gtest.h>

#include <iomanip>
#include <random>

#include "frontend/sweep.h"
#include "ir/assert.h"
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

// Builds and lowers a plan for a target given as a spec with overrides
// ("l4+roofline_exponent=3"), as the sweep does.
Lowered lower_on(const std::string& model, const Target& t, const PlanOptions& o, Workload w) {
  testing::Built b;
  b.model = load_model(model);
  b.target = t;
  b.workload = w;
  b.prefill = build_graph(b.model, build_options(b.model, t, o, w, Phase::prefill));
  b.decode = build_graph(b.model, build_options(b.model, t, o, w, Phase::decode));
  return lower_plan(b, o);
}

// A plan shape, target and options drawn from what sweeps and what-ifs combine.
struct PlanCase {
  std::string model, hw;
  PlanOptions options;
  bool ideal = false;
};

PlanCase random_plan_case(std::mt19937_64& rng) {
  auto pick = [&](const auto& v) {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  const std::vector<std::string> models = {"tiny", "tiny-moe", "small", "llama-3-8b",
                                           "mixtral-8x7b"};
  const std::vector<std::string> hws = {"a100-80g",
                                        "h100-sxm",
                                        "l4",
                                        "cpu-host",
                                        "jetson-agx-orin-64g",
                                        "h200+roofline_exponent=3",
                                        "a100-40g+launch_overhead_us=0",
                                        "h100-sxm+efficiency.gemm=x0.5+hbm_bandwidth_gbs=x1.5",
                                        "cpu-host+efficiency.dequant=0.3",
                                        "l4+gemm_tile_m=64+sm_count=7"};
  const std::vector<std::string> weights = {"",         "bf16",      "int8", "q8_0",
                                            "int4:g32", "int4:g128", "fp8"};
  const std::vector<std::string> kvs = {"", "int8", "int4", "fp8", "f16"};
  const std::vector<std::string> layouts = {"", "LHTD", "LTHD", "TLHD", "paged:16", "paged:128"};
  PlanCase c;
  c.model = pick(models);
  c.hw = pick(hws);
  Target t = load_target_spec(c.hw);
  std::string w = pick(weights), kv = pick(kvs), layout = pick(layouts);
  if (w == "fp8" && !t.supports(DType::fp8_e4m3)) w = "int8";
  if (kv == "fp8" && !t.supports(DType::fp8_e4m3)) kv = "int8";
  if (!w.empty()) c.options.weights = parse_weight_format(w);
  if (!kv.empty()) c.options.kv_dtype = parse_kv_dtype(kv);
  if (!layout.empty()) c.options.kv_layout = parse_kv_layout(layout);
  if (c.model == "llama-3-8b" || c.model == "mixtral-8x7b")
    c.options.tp = pick(std::vector<int>{1, 1, 2, 4});
  std::uniform_real_distribution<double> u(0, 1);
  if (u(rng) < 0.25) c.options.passes = "none";
  c.ideal = u(rng) < 0.3;
  return c;
}

// The bytes a ValueSize evaluates (two monomials read once) are value_bytes of the
// value (its shape walked at the bindings), for every value of fused and unfused,
// dense and MoE, quantized graphs at bindings other than the graph's own.
TEST(ValueSize, EqualsValueBytesAtAnyBindings) {
  for (const char* model : {"tiny", "tiny-moe", "mixtral-8x7b"})
    for (const char* w : {"bf16", "int4:g32", "q8_0"})
      for (bool passes : {true, false}) {
        PlanOptions o = passes ? PlanOptions{} : testing::no_passes();
        o.weights = parse_weight_format(w);
        o.kv_dtype = DType::int4;
        Lowered l = lower_plan(build_plan_graphs(model, "a100-80g", {2, 64, 16}, o), o);
        for (const Graph* g : {&l.prefill, &l.decode})
          for (ValueKind kind :
               {ValueKind::input, ValueKind::weight, ValueKind::state, ValueKind::activation})
            for (ValueId v : g->values_of(kind)) {
              ValueSize size = value_size(g->value(v));
              for (Bindings b : {Bindings{1, 1, 1}, Bindings{3, 17, 40}, Bindings{64, 1, 4001}})
                ASSERT_EQ(size.bytes(b), value_bytes(g->value(v), b))
                    << model << " " << w << " " << g->value(v).name;
            }
      }
}

// The prepared costing (one cost form per group of identical kernels, kept across
// calls; decode kernels that do not read T costed once instead of three times) gives
// what costing every node afresh from the graph gives, on random plan shapes
// (dense, MoE, quantized weights and KV, KV layouts, tensor parallel, unfused),
// targets (with --set overrides), ideal mode and workloads (gen 0 and 1 included):
//  - each prefill row is cost_node() of its node at (B, P, P), figure for figure;
//  - each decode row's FLOPs, bytes and compute / memory / network / launch times
//    are the mean of cost_node() at the first and last context times the steps, and
//    its bound, class and math dtype those at the middle context;
//  - each decode row's time is the sum over every step of cost_node() at that
//    step's context: to rounding in ideal mode (closed form), within Simpson's error
//    otherwise (a percent).
TEST(PreparedPlan, EqualsCostingEveryNodeAfreshOnRandomPlans) {
  std::mt19937_64 rng(8);
  int plans = 0, rows = 0;
  for (int i = 0; plans < 120; ++i) {
    PlanCase c = random_plan_case(rng);
    SCOPED_TRACE(c.model + " on " + c.hw + " case " + std::to_string(i));
    Target t = load_target_spec(c.hw);
    Lowered l;
    try {
      l = lower_on(c.model, t, c.options, {2, 64, 16});
    } catch (const Error&) {
      continue;  // a combination that cannot be planned (group size, tp, dtype)
    }
    PreparedPlan prep(l.prefill, l.decode);
    CostOptions co;
    co.ideal = c.ideal;
    std::uniform_int_distribution<int64_t> batch(1, 40), prompt(1, 700), gen(0, 30);
    for (int k = 0; k < 3; ++k) {
      Workload w{batch(rng), prompt(rng), k == 0 ? int64_t(i % 2) : gen(rng)};
      SimOptions so;
      so.ideal = c.ideal;
      SimResult r = prep.simulate(t, w, so);
      ++plans;
      int64_t steps = std::max<int64_t>(0, w.gen - 1);
      int64_t t0 = w.prompt + 1, t1 = w.prompt + std::max<int64_t>(1, steps);
      double n = double(steps);
      for (const OpRow& row : r.ops) {
        ++rows;
        const Graph& g = row.phase == Phase::prefill ? l.prefill : l.decode;
        const Node& node = g.node(row.node);
        if (row.phase == Phase::prefill) {
          NodeCost e = cost_node(g, node, t, {w.batch, w.prompt, w.prompt}, co);
          ASSERT_EQ(row.flops, e.flops) << row.name;
          ASSERT_EQ(row.bytes, e.bytes) << row.name;
          ASSERT_EQ(row.compute_s, e.compute_s) << row.name;
          ASSERT_EQ(row.memory_s, e.memory_s) << row.name;
          ASSERT_EQ(row.network_s, e.network_s) << row.name;
          ASSERT_EQ(row.launch_s, e.launch_s) << row.name;
          ASSERT_EQ(row.time_s, e.time_s) << row.name;
          ASSERT_EQ(row.bound, e.bound) << row.name;
          ASSERT_EQ(row.cls, e.cls) << row.name;
          ASSERT_EQ(row.math, e.math) << row.name;
          continue;
        }
        NodeCost a = cost_node(g, node, t, {w.batch, 1, t0}, co);
        NodeCost z = cost_node(g, node, t, {w.batch, 1, t1}, co);
        NodeCost m = cost_node(g, node, t, {w.batch, 1, (t0 + t1 + 1) / 2}, co);
        ASSERT_EQ(row.flops, 0.5 * (a.flops + z.flops) * n) << row.name;
        ASSERT_EQ(row.bytes, 0.5 * (a.bytes + z.bytes) * n) << row.name;
        ASSERT_EQ(row.compute_s, 0.5 * (a.compute_s + z.compute_s) * n) << row.name;
        ASSERT_EQ(row.memory_s, 0.5 * (a.memory_s + z.memory_s) * n) << row.name;
        ASSERT_EQ(row.network_s, 0.5 * (a.network_s + z.network_s) * n) << row.name;
        ASSERT_EQ(row.launch_s, a.launch_s * n) << row.name;
        ASSERT_EQ(row.bound, m.bound) << row.name;
        ASSERT_EQ(row.cls, m.cls) << row.name;
        ASSERT_EQ(row.math, m.math) << row.name;
        if (steps == 0) {
          ASSERT_EQ(row.step_time_s, m.time_s) << row.name;
          continue;
        }
        double every_step = 0;
        for (int64_t ctx = t0; ctx < t0 + steps; ++ctx)
          every_step += cost_node(g, node, t, {w.batch, 1, ctx}, co).time_s;
        ASSERT_NEAR(row.time_s, every_step, (c.ideal ? 1e-12 : 1e-2) * every_step) << row.name;
      }
      // The phase totals are the rows' sums (grouped: to rounding).
      double prefill_time = 0, decode_bytes = 0;
      for (const OpRow& row : r.ops) {
        if (row.phase == Phase::prefill)
          prefill_time += row.time_s;
        else
          decode_bytes += row.bytes;
      }
      EXPECT_NEAR(r.prefill.time_s, prefill_time, 1e-12 * prefill_time);
      EXPECT_NEAR(r.decode.bytes, decode_bytes, 1e-12 * decode_bytes);
    }
  }
  EXPECT_EQ(plans, 120);
  EXPECT_GT(rows, 10000);
}

void expect_same_phase(const PhaseSummary& a, const PhaseSummary& e) {
  EXPECT_EQ(a.time_s, e.time_s);
  EXPECT_EQ(a.flops, e.flops);
  EXPECT_EQ(a.bytes, e.bytes);
  EXPECT_EQ(a.kernels, e.kernels);
  EXPECT_EQ(a.steps, e.steps);
  EXPECT_EQ(a.bound, e.bound);
  EXPECT_EQ(a.compute_share, e.compute_share);
  EXPECT_EQ(a.memory_share, e.memory_share);
  EXPECT_EQ(a.launch_share, e.launch_share);
  EXPECT_EQ(a.network_share, e.network_share);
}

// Costs carried between calls (SimReuse: the prefill at the same batch and prompt,
// decode kernels that do not read T at the same batch) give the figures of calls
// without it, in a sweep's order and with plans, targets and modes switching under
// the same SimReuse.
TEST(PreparedPlan, ReuseBetweenCallsGivesTheSameFigures) {
  PlanOptions int4;
  int4.weights = parse_weight_format("int4:g32");
  PlanOptions tp2;
  tp2.tp = 2;
  tp2.kv_dtype = DType::int8;
  Lowered dense = lower_plan(build_plan_graphs("llama-3-8b", "a100-80g", {4, 128, 16}, int4), int4);
  Lowered moe = lower_plan(build_plan_graphs("tiny-moe", "a100-80g", {4, 128, 16}, tp2), tp2);
  PreparedPlan plans[] = {PreparedPlan(dense.prefill, dense.decode),
                          PreparedPlan(moe.prefill, moe.decode)};
  const Target targets[] = {load_target("a100-80g"), load_target("cpu-host"),
                            load_target_spec("l4+roofline_exponent=3")};
  SimReuse reuse;
  int calls = 0;
  // Mode 0 and 1: one plan; mode 2: both plans, alternating at every call.
  for (int mode = 0; mode < 3; ++mode)
    for (const Target& t : targets)
      for (bool ideal : {false, true})
        for (int64_t batch : {1, 7})
          for (int64_t prompt : {5, 300})
            for (int64_t gen : {0, 1, 2, 50})
              for (const PreparedPlan& plan : plans) {
                if (mode < 2 && &plan != &plans[mode]) continue;
                SimOptions so;
                so.ideal = ideal;
                so.per_op = false;
                Workload w{batch, prompt, gen};
                SimResult a = plan.simulate(t, w, so, &reuse), e = plan.simulate(t, w, so);
                SCOPED_TRACE(t.name + " B" + std::to_string(batch) + " P" + std::to_string(prompt) +
                             " G" + std::to_string(gen));
                expect_same_phase(a.prefill, e.prefill);
                expect_same_phase(a.decode, e.decode);
                EXPECT_EQ(a.ttft_s, e.ttft_s);
                EXPECT_EQ(a.tpot_s, e.tpot_s);
                EXPECT_EQ(a.e2e_s, e.e2e_s);
                EXPECT_EQ(a.tokens_per_s, e.tokens_per_s);
                EXPECT_EQ(a.mem.total, e.mem.total);
                ++calls;
              }
  EXPECT_EQ(calls, 3 * 2 * 2 * 2 * 4 * 4);
}

// Figures of six plans as the costing gave them before cost forms existed (commit
// 7bf690e, which walked the graph at every call), to the last bit: TTFT, TPOT,
// prefill and decode FLOPs and bytes, total memory, and the sum of the per-op rows'
// times. Any coefficient that changes (a dim, a dtype size, an attribute, a
// formula) changes one of them. Re-pinned on purpose: the mixtral tp-2 case when
// all-reduces on NVSwitch boards took the one-shot algorithm (one 5 us step instead of
// the ring's two: 64 all-reduces, 0.32 ms less in TTFT and in TPOT); then when grouped
// expert GEMMs counted every touched expert's tiles in their waves (mixtral TTFT 25.2 ->
// 21.1 ms) and the KV layout's contiguity stopped scaling the query and output bytes of
// decode attention (TPOT moves in the 8th digit), and when paged:16 KV held whole blocks
// (the mixtral case's 350 positions take 352: total memory +266,240 bytes); then when
// decode attention counted converting its cache to f32 as scalar work (TPOT +0.7% for
// llama-3-8b's bf16 cache at batch 8, +0.02% / +0.002% for the int8 / int4 ones); then
// when an unfused kv_read paid for its layout's contiguity as decode attention does
// (tiny-moe without passes: TTFT and TPOT +0.12 us); then when a fused RMSNorm's scalar
// work was timed as well as counted (llama-3-8b int4 at batch 8: TTFT +0.14%).
TEST(PreparedPlan, FiguresEqualTheGraphWalkingCostingBitForBit) {
  struct Case {
    const char* model;
    const char* hw;
    Workload w;
    const char *weights, *kv, *layout;
    int tp;
    bool ideal, passes;
    double want[8];
  };
  // clang-format off
  const Case cases[] = {
      {"llama-3-8b", "a100-80g", {8, 1024, 256}, "int4:g128", nullptr, nullptr, 1, false, true,
       {0.62185270353341582, 0.0053628245071868199, 116709916758016, 49109803040, 31855091036160, 1308016943040, 6632071168, 4.3666954715038502}},
      {"llama-3-8b", "a100-80g", {8, 1024, 256}, "int4:g128", nullptr, nullptr, 1, true, true,
       {0.3773617838415288, 0.0025156832800392348, 116572477804544, 49109803040, 31855091036160, 1308016943040, 6632071168, 2.2202603172194939}},
      {"mixtral-8x7b", "h100-sxm", {4, 300, 50}, "fp8", "int8", "paged:16", 2, false, true,
       {0.021095844066857029, 0.0070201224866297653, 15202315687936, 31431681232, 2515986758656, 795697507360, 23670777344, 0.70639088223057578}},
      {"tiny-moe", "cpu-host", {3, 17, 9}, nullptr, nullptr, nullptr, 1, false, false,
       {0.00031352403393386248, 0.00018542453349689031, 42029832, 6654311.9999999991, 23000160, 25124160, 3625264, 0.0028032760876232714}},
      {"llama-3-70b", "l4+roofline_exponent=3", {2, 700, 33}, "q8_0", "int4", "LTHD", 4, false, true,
       {0.98509046346742646, 0.079904773346200428, 48279165555712, 46784636904, 2254648541184, 593185583616, 20665151744, 7.4569420030490603}},
      {"small", "a100-40g+efficiency.gemm=x0.5", {5, 64, 2}, "int8", "bf16", "TLHD", 1, true, false,
       {0.00031171697234726691, 0.00012093277942122186, 16656949760, 484719892, 423233600, 188050472, 243730432, 0.00097720414353697784}},
  };
  // clang-format on
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.model) + " on " + c.hw);
    PlanOptions o;
    if (c.weights) o.weights = parse_weight_format(c.weights);
    if (c.kv) o.kv_dtype = parse_kv_dtype(c.kv);
    if (c.layout) o.kv_layout = parse_kv_layout(c.layout);
    o.tp = c.tp;
    if (!c.passes) o.passes = "none";
    Target t = load_target_spec(c.hw);
    Lowered l = lower_on(c.model, t, o, c.w);
    SimOptions so;
    so.ideal = c.ideal;
    SimResult r = simulate(l.prefill, l.decode, t, c.w, so);
    double op_time = 0;
    for (const OpRow& row : r.ops)
      op_time += row.time_s + row.compute_s + row.memory_s + row.network_s;
    const double got[8] = {r.ttft_s,       r.tpot_s,       r.prefill.flops, r.prefill.bytes,
                           r.decode.flops, r.decode.bytes, r.mem.total,     op_time};
    for (int k = 0; k < 8; ++k)
      EXPECT_EQ(got[k], c.want[k]) << "figure " << k << ": " << std::setprecision(17) << got[k];
  }
}

}  // namespace
}  // namespace lathe
