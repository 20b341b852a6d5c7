// What each pass claims, checked through the simulator's byte counts; idempotence;
// round trips; the full pipeline on every built-in model.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "codegen/plan.h"
#include "ir/assert.h"
#include "ir/buffers.h"
#include "ir/text.h"
#include "ir/verifier.h"
#include "passes/memory_plan.h"
#include "passes/pipeline.h"
#include "support/plans.h"

namespace lathe {
namespace {

using testing::build_plan_graphs;

double total_bytes(const Graph& g, const Target& t) {
  Bindings b = graph_bindings(g);
  CostOptions co;
  co.ideal = true;
  double s = 0;
  for (NodeId id : g.topo_order()) s += cost_node(g, g.node(id), t, b, co).bytes;
  return s;
}

double act_bytes(const Graph& g, const std::string& value) {
  return value_bytes(g.value(g.find_value(value)), graph_bindings(g));
}

// Runs `passes` (a comma list) on the decode graph of tiny and returns before/after.
std::pair<Graph, Graph> run(const std::string& before_passes, const std::string& pass, Phase ph = Phase::decode) {
  auto b = build_plan_graphs("tiny", "cpu-host", {3, 16, 8});
  Graph g = ph == Phase::decode ? b.decode : b.prefill;
  PlanOptions o;
  PassContext ctx{o, b.target};
  for (const PassInfo& p : pass_registry())
    if (before_passes.find(std::string(p.name)) != std::string::npos) p.fn(g, ctx);
  Graph after = g;
  find_pass(pass)->fn(after, ctx);
  return {g, after};
}

TEST(PassDeltas, FuseQkvReadsTheNormedInputOnce) {
  auto [before, after] = run("", "fuse-qkv");
  Target t = load_target("cpu-host");
  double h = act_bytes(before, "l0.h_attn");
  EXPECT_DOUBLE_EQ(total_bytes(before, t) - total_bytes(after, t), 2 * 2 * h);  // 2 layers x 2 extra reads
  EXPECT_EQ(before.num_nodes() - after.num_nodes(), 2u * 2);
}

TEST(PassDeltas, FuseGateUpReadsTheNormedInputOnce) {
  auto [before, after] = run("", "fuse-gate-up");
  Target t = load_target("cpu-host");
  EXPECT_DOUBLE_EQ(total_bytes(before, t) - total_bytes(after, t), 2 * act_bytes(before, "l0.h_ffn"));
  EXPECT_EQ(before.num_nodes() - after.num_nodes(), 2u);
}

TEST(PassDeltas, FuseNormMatmulRemovesTheNormedActivation) {
  auto [before, after] = run("fuse-qkv,fuse-gate-up", "fuse-norm-matmul");
  Target t = load_target("cpu-host");
  double h = act_bytes(before, "l0.h_attn"), x = act_bytes(before, "x2");
  // Layer norms: the normed activation is written and read once (2h each, 4 norms);
  // the final norm: the LM head now reads only last rows of x instead of all of x
  // through h (x + h).
  EXPECT_DOUBLE_EQ(total_bytes(before, t) - total_bytes(after, t), 4 * 2 * h + x + h);
  EXPECT_EQ(before.num_nodes() - after.num_nodes(), 5u);
}

TEST(PassDeltas, FuseEpilogueRemovesIntermediates) {
  auto [before, after] = run("fuse-qkv,fuse-gate-up,fuse-norm-matmul", "fuse-epilogue");
  Target t = load_target("cpu-host");
  double g = act_bytes(before, "l0.gate"), y = act_bytes(before, "l0.attn_out");
  // Per layer: silu_mul 6 x |gate| (gate, up written; gate read, act written and read;
  // up read) and two residual adds 2 x |y| each.
  EXPECT_DOUBLE_EQ(total_bytes(before, t) - total_bytes(after, t), 2 * (6 * g + 2 * 2 * y));
  EXPECT_EQ(before.num_nodes() - after.num_nodes(), 2u * 4);
}

TEST(PassDeltas, AttentionFusionsCutKernelsAndBytes) {
  for (Phase ph : {Phase::prefill, Phase::decode}) {
    auto [b1, a1] = run("", "fuse-rope-kvwrite", ph);
    auto [b2, a2] = run("", "flash-attention", ph);
    Target t = load_target("cpu-host");
    EXPECT_EQ(b1.num_nodes() - a1.num_nodes(), 2u * 2);
    EXPECT_EQ(b2.num_nodes() - a2.num_nodes(), 2u * (ph == Phase::prefill ? 4 : 3));
    EXPECT_LT(total_bytes(a1, t), total_bytes(b1, t));
    // The score matrix disappears: at least [B, heads, S, T] f32 written and read 3 times.
    double scores = act_bytes(b2, "l0.scores");
    EXPECT_GE(total_bytes(b2, t) - total_bytes(a2, t), 2 * 2 * scores);
  }
}

TEST(PassDeltas, Int4WeightsAreAbout4p5Of16) {
  auto bytes_for = [](const char* fmt) {
    PlanOptions o;
    o.passes = "quantize-weights";
    o.weights = parse_weight_format(fmt);
    auto b = build_plan_graphs("llama-3-8b", "a100-80g", {1, 16, 2}, o);
    Lowered l = testing::lower_plan(b, o);
    double s = 0;
    for (ValueId v : l.decode.values_of(ValueKind::weight))
      if (l.decode.value(v).name.find("layers.") == 0 && l.decode.value(v).shape.size() == 2)
        s += value_bytes(l.decode.value(v), {1, 1, 1});
    return s;
  };
  EXPECT_DOUBLE_EQ(bytes_for("int4:g32") / bytes_for("bf16"), 4.5 / 16);
  EXPECT_DOUBLE_EQ(bytes_for("int4:g128") / bytes_for("bf16"), 4.125 / 16);
  EXPECT_DOUBLE_EQ(bytes_for("q8_0") / bytes_for("bf16"), 8.5 / 16);
}

TEST(Passes, Fp8NeedsAnFp8Target) {
  PlanOptions o;
  o.weights = parse_weight_format("fp8");
  auto b = build_plan_graphs("tiny", "a100-80g", {1, 8, 2}, o);
  try {
    testing::lower_plan(b, o);
    FAIL() << "fp8 accepted on sm_80";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sm_89"), std::string::npos) << e.what();
  }
  auto h = build_plan_graphs("tiny", "h100-sxm", {1, 8, 2}, o);
  EXPECT_NO_THROW(testing::lower_plan(h, o));
}

TEST(Passes, GroupMustDivideTheReductionLength) {
  PlanOptions o;
  o.weights = parse_weight_format("int4:g128");
  auto b = build_plan_graphs("tiny-moe", "cpu-host", {1, 8, 2}, o);  // expert_ffn 192
  EXPECT_THROW(testing::lower_plan(b, o), Error);
  o.weights = parse_weight_format("int4:g64");
  EXPECT_NO_THROW(testing::lower_plan(build_plan_graphs("tiny-moe", "cpu-host", {1, 8, 2}, o), o));
}

TEST(Passes, EveryPassIsIdempotent) {
  for (const char* model : {"tiny", "tiny-moe"})
    for (Phase ph : {Phase::prefill, Phase::decode}) {
      PlanOptions o;
      o.weights = parse_weight_format("int4:g32");
      o.kv_dtype = DType::int8;
      auto b = build_plan_graphs(model, "cpu-host", {2, 16, 8}, o);
      Graph g = ph == Phase::decode ? b.decode : b.prefill;
      PassContext ctx{o, b.target};
      for (const PassInfo& p : pass_registry()) {
        p.fn(g, ctx);
        std::string once = print_graph(g);
        PassResult again = p.fn(g, ctx);
        EXPECT_FALSE(again.changed) << p.name << " on " << model;
        EXPECT_EQ(print_graph(g), once) << p.name << " on " << model;
      }
    }
}

TEST(Passes, MemoryPlanIsBoundedAndReusesMemory) {
  for (const char* model : {"tiny", "tiny-moe", "llama-3-8b"}) {
    auto b = build_plan_graphs(model, "a100-80g", {4, 128, 8});
    PlanOptions o;
    Lowered l = testing::lower_plan(b, o);
    for (const Graph* g : {&l.prefill, &l.decode}) {
      Bindings bind = graph_bindings(*g);
      double sum = 0, largest = 0;
      std::vector<LiveRange> live = live_ranges(*g, g->topo_order());
      for (size_t v = 0; v < live.size(); ++v)
        if (live[v].first >= 0) {
          double bytes = value_bytes(g->value(ValueId(v)), bind);
          sum += bytes;
          largest = std::max(largest, bytes);
        }
      double arena = double(g->attrs.i("arena_bytes"));
      EXPECT_LE(arena, sum + 256.0 * double(live.size())) << model;  // alignment slack
      EXPECT_GE(arena, largest) << model;
      EXPECT_GE(arena, peak_live_bytes(*g, bind)) << model;
      EXPECT_LT(arena, 0.5 * sum) << model << ": no reuse?";
      EXPECT_TRUE(verify(*g).empty());
    }
  }
}

TEST(Passes, DefaultPipelineRunsOnEveryBuiltinModel) {
  for (const std::string& m : builtin_names("models")) {
    auto b = build_plan_graphs(m, "h100-sxm", {2, 64, 8});
    Lowered l = testing::lower_plan(b, PlanOptions{});  // verifies after every pass
    EXPECT_LT(l.decode.num_nodes(), b.decode.num_nodes()) << m;
    EXPECT_LT(l.prefill.num_nodes(), b.prefill.num_nodes()) << m;
    EXPECT_EQ(l.pipeline.size(), pass_registry().size());
  }
}

TEST(Passes, KvLayoutForcedOrChosenWithReason) {
  PlanOptions o;
  auto b = build_plan_graphs("llama-3-8b", "a100-80g", {1, 512, 64});
  Lowered l = testing::lower_plan(b, o);
  EXPECT_EQ(l.decode.attrs.s("kv_layout"), "LHTD");
  EXPECT_NE(l.decode.attrs.s("kv_layout_reason").find("paged:16"), std::string::npos);
  EXPECT_EQ(l.prefill.attrs.s("kv_layout"), l.decode.attrs.s("kv_layout"));
  o.kv_layout = parse_kv_layout("paged:32");
  Lowered f = testing::lower_plan(b, o);
  EXPECT_EQ(f.decode.attrs.s("kv_layout"), "paged:32");
  EXPECT_EQ(f.decode.attrs.s("kv_layout_reason"), "forced by the plan");
}

TEST(Passes, PipelineSelection) {
  PlanOptions o;
  EXPECT_EQ(pipeline_for(o).size(), pass_registry().size());
  o.pass_enabled["fuse-qkv"] = false;
  EXPECT_EQ(pipeline_for(o).size(), pass_registry().size() - 1);
  o.passes = "none";
  EXPECT_TRUE(pipeline_for(o).empty());
  o.passes = "fuse-qkv,memory-plan";
  EXPECT_EQ(pipeline_for(o), std::vector<std::string>{"memory-plan"});
  o.passes = "fuse-qkv,no-such-pass";
  EXPECT_THROW(pipeline_for(o), Error);
}

TEST(Passes, LoweredGraphAndPlanFileRoundTrip) {
  PlanOptions o;
  o.weights = parse_weight_format("int4:g32");
  o.kv_dtype = DType::int8;
  auto b = build_plan_graphs("tiny-moe", "cpu-host", {2, 16, 8}, o);
  Lowered l = lower(b.prefill, b.decode, o, b.target, b.workload);
  for (const Graph* g : {&l.prefill, &l.decode}) EXPECT_EQ(print_graph(parse_graph(print_graph(*g))), print_graph(*g));
  Plan p;
  p.model = "tiny-moe";
  p.target = b.target;
  p.workload = b.workload;
  p.kv_dtype = "int8";
  p.kv_layout = l.decode.attrs.s("kv_layout");
  p.act_dtype = "f32";
  p.pipeline = l.pipeline;
  p.records = l.records;
  p.prefill = l.prefill;
  p.decode = l.decode;
  Plan back = plan_from_json(plan_to_json(p), "plan.json");
  EXPECT_EQ(print_graph(back.decode), print_graph(l.decode));
  EXPECT_EQ(print_graph(back.prefill), print_graph(l.prefill));
  EXPECT_EQ(back.target.hbm_bandwidth_gbs, b.target.hbm_bandwidth_gbs);
  EXPECT_EQ(back.records.size(), l.records.size());
  // Bad plan files are errors, not crashes.
  std::string text = plan_to_json(p);
  EXPECT_THROW(plan_from_json(text.substr(0, text.size() / 2), "half.json"), Error);
  std::string other = text;
  other.replace(other.find("\"lathe_plan\": 1"), 15, "\"lathe_plan\": 9");
  try {
    plan_from_json(other, "v9.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("version 9"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan_from_json("", "empty.json"), Error);
  EXPECT_THROW(plan_from_json("{\"lathe_plan\": 1}", "short.json"), Error);
  std::string frac = text;  // a fractional version was read as 1
  frac.replace(frac.find("\"lathe_plan\": 1"), 15, "\"lathe_plan\": 1.5");
  EXPECT_THROW(plan_from_json(frac, "v1.5.json"), Error);
  // A field of the wrong type is named (nlohmann said only "type must be string, but
  // is number").
  auto message = [&](const std::string& from, const std::string& to) {
    std::string edited = text;
    const size_t at = edited.find(from);
    if (at == std::string::npos) return "no " + from + " in the plan";
    edited.replace(at, from.size(), to);
    try {
      plan_from_json(edited, "plan.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("\"kv_dtype\": \"int8\"", "\"kv_dtype\": 8"), "plan.json: options.kv_dtype: 8 is not a string");
  EXPECT_EQ(message("\"target\":", "\"not_the_target\":"), "plan.json: target: missing");  // the file named once
  EXPECT_EQ(message("\"tp\": 1", "\"tp\": \"one\""), "plan.json: options.tp: \"one\" is not an integer");
  EXPECT_EQ(message("\"changed\": ", "\"changed\": 3, \"x\": "), "plan.json: passes[0].changed: 3 is not true or false");
  EXPECT_EQ(message("\"hbm_bandwidth_gbs\": ", "\"hbm_bandwidth_gbs\": \"fast\", \"x\": "),
            "plan.json: target field hbm_bandwidth_gbs: \"fast\" is not a number");
}

Plan plan_of(const std::string& model, const std::string& hw, const PlanOptions& o, Workload w = {2, 16, 8}) {
  auto b = build_plan_graphs(model, hw, w, o);
  Lowered l = lower(b.prefill, b.decode, o, b.target, b.workload);
  Plan p;
  p.model = model;
  p.target = b.target;
  p.workload = b.workload;
  p.kv_dtype = l.decode.attrs.s("kv_dtype");
  p.kv_layout = l.decode.attrs.s("kv_layout");
  p.act_dtype = l.decode.attrs.s("act_dtype");
  p.tp = o.tp;
  p.pipeline = l.pipeline;
  p.prefill = l.prefill;
  p.decode = l.decode;
  return p;
}

// Every plan lathe writes passes the loader's attribute checks: each built-in model,
// tensor parallel, no passes, paged KV.
TEST(Passes, CompiledPlansPassTheLoadersChecks) {
  for (const std::string& m : builtin_names("models")) {
    Plan p = plan_of(m, "h100-sxm", PlanOptions{});
    EXPECT_NO_THROW(plan_from_json(plan_to_json(p), m + ".json")) << m;
  }
  PlanOptions tp2;
  tp2.tp = 2;
  EXPECT_NO_THROW(plan_from_json(plan_to_json(plan_of("llama-3-8b", "h100-sxm", tp2)), "tp2.json"));
  PlanOptions none;
  none.passes = "none";
  EXPECT_NO_THROW(plan_from_json(plan_to_json(plan_of("tiny-moe", "cpu-host", none)), "none.json"));
  PlanOptions paged;
  paged.kv_layout = parse_kv_layout("paged:16");
  paged.kv_dtype = DType::int4;
  EXPECT_NO_THROW(plan_from_json(plan_to_json(plan_of("tiny", "cpu-host", paged)), "paged.json"));
  // Every weight format, dense and MoE (the loader checks formats and groups).
  for (const char* m : {"llama-3-8b", "tiny-moe"})
    for (const char* w : {"f32", "f16", "bf16", "fp8", "int8", "int8:g32", "int4:g32", "int4:g64", "int4:g128"}) {
      if (std::string(m) == "tiny-moe" && std::string(w) == "int4:g128") continue;  // K = 192: no such plan
      PlanOptions f;
      f.weights = parse_weight_format(w);
      EXPECT_NO_THROW(plan_from_json(plan_to_json(plan_of(m, "h100-sxm", f)), "f.json")) << m << " " << w;
    }
}

// The loader's error for a plan written and read back, or "" when it accepts it.
std::string load_error(const Plan& p) {
  try {
    plan_from_json(plan_to_json(p), "edited.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Sets `key` on the first node of `g` (in launch order) that has it.
void set_first_node_attr(Graph& g, const std::string& key, AttrValue value) {
  for (NodeId id : g.topo_order())
    if (g.node(id).attrs.has(key)) {
      g.node_mut(id).attrs.set(key, std::move(value));
      return;
    }
  ADD_FAILURE() << "no node has " << key;
}

// Graph attributes the runtime sizes buffers from, edited by hand so that they no
// longer match the graph: each is an error naming the attribute (these crashed
// `lathe run PLAN` before the loader checked them).
TEST(Passes, PlanWithInconsistentAttributesIsAnError) {
  PlanOptions o;
  o.weights = parse_weight_format("int8");
  Plan good = plan_of("tiny-moe", "cpu-host", o);
  struct Edit {
    bool prefill;
    const char* key;
    AttrValue value;
    const char* message;
  };
  const Edit edits[] = {
      {false, "vocab", int64_t(0), "'vocab' must be a positive integer"},
      {false, "head_dim", int64_t(0), "'head_dim' must be a positive integer"},
      {false, "B", int64_t(-1), "'B' must be a positive integer"},
      {true, "final_context", int64_t(-1), "'final_context' must be a positive integer"},
      {false, "layers", std::string("2"), "'layers' must be a positive integer"},
      {false, "kv_heads", int64_t(1), "does not match layers, kv_heads and head_dim"},
      {false, "layers", int64_t(1), "does not match layers, kv_heads and head_dim"},
      {false, "vocab", int64_t(1024), "tok_embeddings"},
      {false, "hidden", int64_t(64), "tok_embeddings"},
      {true, "experts", int64_t(3), "experts = 4, but the graph says 3"},
  };
  for (const Edit& e : edits) {
    Plan p = good;
    (e.prefill ? p.prefill : p.decode).attrs.set(e.key, e.value);
    std::string err = load_error(p);
    EXPECT_NE(err.find(e.message), std::string::npos) << e.key << ": " << (err.empty() ? "accepted" : err);
  }
  // A smaller KV capacity in both graphs: the prefill's T (16 tokens) no longer fits.
  Plan p = good;
  p.prefill.attrs.set("final_context", int64_t(8));
  p.decode.attrs.set("final_context", int64_t(8));
  EXPECT_NE(load_error(p).find("exceeds final_context (8)"), std::string::npos) << load_error(p);
  // An attribute changed in one graph only.
  p = good;
  p.prefill.attrs.set("final_context", good.prefill.attrs.i("final_context") + 8);
  EXPECT_NE(load_error(p), "");
  // A node attribute that disagrees with the graph's.
  p = good;
  set_first_node_attr(p.decode, "layer", int64_t(7));
  EXPECT_NE(load_error(p), "");
  // A node's integer attribute written as a huge number (converting it was undefined
  // behaviour) and a target field outside the range hardware specs allow.
  p = good;
  set_first_node_attr(p.decode, "layer", 1e30);
  EXPECT_NE(load_error(p), "");
  p = good;
  p.target.gemm_tile_m = 0;
  EXPECT_NE(load_error(p).find("gemm_tile_m"), std::string::npos) << load_error(p);
  // A non-finite number in a node (the kernels would be emitted with it).
  p = good;
  set_first_node_attr(p.decode, "eps", std::nan(""));
  EXPECT_NE(load_error(p), "");
}

// Hand edits the kernels and the weight packing rely on are located errors: these
// crashed `lathe run PLAN` (heap corruption, SIGFPE, SIGSEGV) or ran with garbage
// tokens before the loader checked them.
TEST(Passes, PlanWithBadWeightsOrNodeAttributesIsAnError) {
  PlanOptions o;
  o.weights = parse_weight_format("int4:g32");
  Plan good = plan_of("tiny", "cpu-host", o);
  ASSERT_EQ(load_error(good), "");
  auto weight = [](Graph& g, const std::string& name) -> Value& {
    ValueId v = g.find_value(name);
    EXPECT_NE(v, kNone) << name;
    return g.value_mut(v);
  };
  auto expect = [&](const Plan& p, const std::string& want) {
    std::string err = load_error(p);
    EXPECT_NE(err.find(want), std::string::npos) << want << ": " << (err.empty() ? "accepted" : err);
  };
  Plan p = good;
  p.prefill.attrs.erase("arena_bytes");
  expect(p, "no arena_bytes");
  for (int group : {0, 7, 256}) {
    p = good;
    weight(p.prefill, "layers.0.wq").format.group = group;
    weight(p.decode, "layers.0.wq").format.group = group;
    expect(p, "not a weight format lathe stores");
  }
  p = good;
  for (Graph* g : {&p.prefill, &p.decode}) weight(*g, "layers.0.wq").format = Format{DType::int8, 7};
  expect(p, "not a weight format lathe stores");
  p = plan_of("tiny-moe", "cpu-host", o);  // a valid group that does not divide K = 192
  for (Graph* g : {&p.prefill, &p.decode}) weight(*g, "layers.0.experts.w_down").format = Format{DType::int4, 128};
  expect(p, "does not divide K = 192");
  p = good;
  for (Graph* g : {&p.prefill, &p.decode}) {
    Value& n = weight(*g, "norm");
    n.format = Format{DType::int8, 0};
    n.dtype = DType::int8;
  }
  expect(p, "only matrices are stored quantized");
  p = good;
  weight(p.decode, "layers.0.wo").format = Format{DType::int8, 0};
  weight(p.decode, "layers.0.wo").dtype = DType::int8;
  expect(p, "differs from the same weight");
  p = good;
  for (NodeId id : p.decode.topo_order())
    if (p.decode.node(id).attrs.has("theta")) p.decode.node_mut(id).attrs.erase("theta");
  expect(p, "attribute 'theta' is missing");
  p = good;
  set_first_node_attr(p.decode, "scale", 0.0);
  expect(p, "scale must be positive");
  p = good;
  set_first_node_attr(p.prefill, "eps", -1.0);
  expect(p, "eps must be positive");
}

}  // namespace
}  // namespace lathe
