#include "codegen/tuning.h"

#include <gtest/gtest.h>

#include <set>

#include "codegen/cpu/emit_cpu.h"
#include "codegen/cuda/emit_cuda.h"
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
  // CUDA: the prefill's 32 rows take cuBLAS and flash attention (no knobs); only
  // lm_head, over the 2 sequences' last rows, runs the warp-per-row GEMV entry (int8
  // weights take the tensor-core GEMV from 5 rows).
  for (NodeId id : l.prefill.topo_order())
    EXPECT_EQ(tuning_key(l.prefill, id, "cuda").has_value(), l.prefill.node(id).kind == OpKind::lm_head)
        << l.prefill.node(id).name;
}

TEST(Tuning, CudaKeysAreTheDecodeGemvsAndDecodeAttention) {
  PlanOptions o;
  o.act_dtype = DType::bf16;
  o.weights = parse_weight_format("bf16");
  auto b = build_plan_graphs("tiny", "h100-sxm", {1, 16, 4}, o);
  Lowered l = lower_plan(b, o);
  std::set<std::string> kinds;
  int gemvs = 0, gemm_nodes = 0;
  for (NodeId id : l.decode.topo_order()) {
    const Node& n = l.decode.node(id);
    gemm_nodes += n.kind == OpKind::matmul || n.kind == OpKind::lm_head;
    if (auto k = tuning_key(l.decode, id, "cuda")) {
      kinds.insert(k->kind);
      gemvs += k->kind == "gemv";
      if (k->kind == "decode_attention") {
        EXPECT_NE(k->shape.find(" cap=20"), std::string::npos) << k->shape;
      }
    }
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"gemv", "decode_attention"}));
  EXPECT_EQ(gemvs, gemm_nodes);  // every decode GEMM-family node runs its GEMV entry
  // The CPU keys are untouched by the CUDA ones.
  for (NodeId id : l.decode.topo_order())
    if (auto k = tuning_key(l.decode, id, "cpu")) {
      EXPECT_EQ(k->kind, "decode_attention");
    }
  // 2-8 sequences: the decode matmuls go to cuBLAS and lm_head to its tensor-core GEMV
  // (no knobs); 9: the tiled entry. Either way only decode attention is left to tune.
  for (int batch : {2, 8, 9}) {
    auto bb = build_plan_graphs("tiny", "h100-sxm", {batch, 16, 4}, o);
    Lowered lb = lower_plan(bb, o);
    for (NodeId id : lb.decode.topo_order()) {
      if (auto k = tuning_key(lb.decode, id, "cuda")) {
        EXPECT_EQ(k->kind, "decode_attention") << batch;
      }
      const Node& n = lb.decode.node(id);
      if (n.kind == OpKind::matmul || n.kind == OpKind::lm_head) {
        EXPECT_EQ(cuda_batched_min_rows(lb.decode, n), 2) << n.name;
      }
    }
  }
  // Decoded weights (int4) leave the warp-per-row GEMV from 5 rows: at batch 4 it runs
  // and is tuned, at batch 5 not.
  PlanOptions oq = o;
  oq.weights = parse_weight_format("int4:g32");
  for (int batch : {4, 5}) {
    auto bq = build_plan_graphs("tiny", "h100-sxm", {batch, 16, 4}, oq);
    Lowered lq = lower_plan(bq, oq);
    int q_gemvs = 0;
    for (NodeId id : lq.decode.topo_order()) {
      if (auto k = tuning_key(lq.decode, id, "cuda")) q_gemvs += k->kind == "gemv";
      const Node& n = lq.decode.node(id);
      if (n.kind == OpKind::matmul || n.kind == OpKind::lm_head) {
        EXPECT_EQ(cuda_batched_min_rows(lq.decode, n), 5);
      }
    }
    EXPECT_EQ(q_gemvs > 0, batch == 4) << batch;
  }
  // f32 weights have neither a cuBLAS route nor the tensor-core GEMV: their GEMV entry
  // runs (and is tuned) at batch 2.
  PlanOptions of = o;
  of.weights = parse_weight_format("f32");
  auto bf = build_plan_graphs("tiny", "h100-sxm", {2, 16, 4}, of);
  Lowered lf = lower_plan(bf, of);
  int f32_gemvs = 0;
  for (NodeId id : lf.decode.topo_order())
    if (auto k = tuning_key(lf.decode, id, "cuda")) f32_gemvs += k->kind == "gemv";
  EXPECT_GT(f32_gemvs, 0);
  // MoE experts: the GEMV entry takes up to 16 token-expert pairs.
  auto bm = build_plan_graphs("tiny-moe", "h100-sxm", {1, 16, 4}, o);
  Lowered lm = lower_plan(bm, o);
  bool expert = false;
  for (NodeId id : lm.decode.topo_order())
    if (auto k = tuning_key(lm.decode, id, "cuda"))
      expert |= k->shape.find(" experts=") != std::string::npos;
  EXPECT_TRUE(expert);
}

TEST(Tuning, EveryCudaCandidateIsAValidParameterSet) {
  for (const std::string shape : {"K=4096 N=4096 w=bf16 pro=none epi=residual", "K=4096 N=4096 w=int4:g128 pro=none epi=none"})
    for (const auto& params : tuning_candidates("gemv", "cuda", shape))
      for (const auto& [k, v] : params)
        EXPECT_NO_THROW(check_tuning_param("cuda", "gemv", k, v, "test")) << k << "=" << v;
  // Loads in flight: 16-bit rows of K = 4096 keep 4 by default, so 2 and 8 are tried;
  // int8 rows keep 1, so 2 and 4.
  auto loads = [](const std::string& shape) {
    std::vector<int64_t> v;
    for (const auto& p : tuning_candidates("gemv", "cuda", shape))
      if (p.count("tune_cuda_loads")) v.push_back(p.at("tune_cuda_loads"));
    return v;
  };
  auto wide = tuning_candidates("gemv", "cuda", "K=4096 N=4096 w=bf16 pro=none epi=none");
  EXPECT_TRUE(wide.front().empty());
  EXPECT_EQ(loads("K=4096 N=4096 w=bf16 pro=none epi=none"), (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(loads("K=4096 N=4096 w=int8 pro=none epi=none"), (std::vector<int64_t>{2, 4}));
  // Candidates that behave like the default or like each other are left out: a bf16
  // row of K = 512 is 64 loads, 2 per lane (2 and 8 alike; the default 1 differs); an
  // int4 row of K = 1024 is 32 loads, one per lane (every count alike).
  EXPECT_EQ(loads("K=512 N=512 w=bf16 pro=none epi=none"), (std::vector<int64_t>{2}));
  EXPECT_TRUE(loads("K=1024 N=512 w=int4:g32 pro=none epi=none").empty());
  // f32 rows of K = 512 already keep 4 (the prelude's rule): 2 and 8 differ from it.
  EXPECT_EQ(cuda_gemv_default_loads(DType::f32, 512), 4);
  EXPECT_EQ(cuda_gemv_default_loads(DType::bf16, 512), 1);
  EXPECT_EQ(loads("K=512 N=512 w=f32 pro=none epi=none"), (std::vector<int64_t>{2}));  // 4 per lane: 8 acts as 4
  // Decode attention: the default split count (capacity / 64) is not a candidate.
  std::vector<int64_t> splits;
  for (const auto& params : tuning_candidates("decode_attention", "cuda", "H=32 KVH=8 D=128 kv=bf16 layout=LHTD cap=2048"))
    for (const auto& [k, v] : params) {
      EXPECT_NO_THROW(check_tuning_param("cuda", "decode_attention", k, v, "test"));
      splits.push_back(v);
    }
  EXPECT_EQ(splits, (std::vector<int64_t>{8, 16, 64}));
  EXPECT_THROW(check_tuning_param("cuda", "gemv", "tune_cuda_warps", 5, "f"), Error);
  EXPECT_THROW(check_tuning_param("cuda", "gemv", "tune_cuda_loads", 3, "f"), Error);
  EXPECT_THROW(check_tuning_param("cuda", "decode_attention", "tune_cuda_split", 0, "f"), Error);
  EXPECT_THROW(check_tuning_param("cuda", "decode_attention", "tune_split", 2, "f"), Error);  // a CPU parameter
  EXPECT_THROW(check_tuning_param("cpu", "decode_attention", "tune_cuda_split", 2, "f"), Error);
  EXPECT_THROW(check_tuning_param("cuda", "gemv", "tune_cuda_split", 2, "f"), Error);  // another kind's
  EXPECT_NO_THROW(check_tuning_param("cuda", "", "tune_cuda_split", 2, "f"));            // kind not checked
}

// More loads in flight than the default keep as many bytes in flight with fewer warps:
// the launch bounds ask for proportionally fewer resident blocks, so the load
// registers fit (the int4 Mixtral experts spilled under the default bound). Loads at
// or below the default, or beyond what a row holds, keep the default bound.
TEST(Tuning, MoreCudaLoadsInFlightRelaxTheLaunchBounds) {
  // The bound each GEMV of a plan gets at 8 warps and the given loads count.
  auto bounds = [](const char* model, const char* weights, int64_t loads) {
    PlanOptions o;
    o.act_dtype = DType::bf16;
    if (*weights) o.weights = parse_weight_format(weights);
    Lowered l = lower_plan(build_plan_graphs(model, "h100-sxm", {1, 16, 4}, o), o);
    std::set<std::string> out;
    Graph g = l.decode;
    for (NodeId id : g.topo_order())
      if (auto k = tuning_key(g, id, "cuda"); k && k->kind == "gemv") {
        g.node_mut(id).attrs.set("tune_cuda_warps", int64_t(8));
        g.node_mut(id).attrs.set("tune_cuda_loads", loads);
        std::string body = emit_cuda_kernel(g, id).body;
        size_t at = body.find("__launch_bounds__(");
        out.insert(at == std::string::npos ? "none" : body.substr(at, body.find(')', at) - at + 1));
      }
    return out;
  };
  using Set = std::set<std::string>;
  const std::string def = "__launch_bounds__(256, 2)", relaxed = "__launch_bounds__(256, 1)";
  // int4 rows of 4096 hold 128 loads (4 a lane); the default is 1.
  EXPECT_EQ(bounds("llama-3-8b", "int4:g128", 1), Set{def});
  EXPECT_EQ(bounds("llama-3-8b", "int4:g128", 2), Set{relaxed});
  EXPECT_EQ(bounds("llama-3-8b", "int4:g128", 4), Set{relaxed});
  EXPECT_EQ(bounds("mixtral-8x7b", "int4:g128", 4), Set{relaxed});  // the expert GEMVs too
  // 16-bit rows default to 4 loads: 2 keeps the bound, 8 halves it.
  EXPECT_EQ(bounds("llama-3-8b", "", 2), Set{def});
  EXPECT_EQ(bounds("llama-3-8b", "", 8), Set{relaxed});
  // tiny's int4 rows (K 128) hold 4 loads, one a lane: any count behaves as 1.
  EXPECT_EQ(bounds("tiny", "int4:g32", 4), Set{def});
}

TEST(Tuning, CudaParametersReachTheEmittedKernelsOnly) {
  PlanOptions o;
  o.act_dtype = DType::bf16;
  auto b = build_plan_graphs("tiny", "h100-sxm", {1, 16, 4}, o);
  Lowered l = lower_plan(b, o);
  // A file that tunes every CUDA key of a graph.
  auto cuda_file = [](const Graph& g) {
    TuningFile t;
    t.backend = "cuda";
    t.machine = "test GPU";
    for (NodeId id : g.topo_order())
      if (auto k = tuning_key(g, id, "cuda")) {
        bool dup = false;
        for (const TuningEntry& x : t.entries) dup |= x.kind == k->kind && x.shape == k->shape;
        if (dup) continue;
        TuningEntry e;
        e.kind = k->kind;
        e.shape = k->shape;
        if (k->kind == "gemv") e.params = {{"tune_cuda_warps", 16}, {"tune_cuda_loads", 2}};
        else e.params = {{"tune_cuda_split", 3}};
        t.entries.push_back(e);
      }
    return t;
  };
  TuningFile t = cuda_file(l.decode);
  TuningFile back = tuning_from_json(tuning_to_json(t), "t.json");
  EXPECT_EQ(back.backend, "cuda");
  EXPECT_EQ(tuning_to_json(back), tuning_to_json(t));
  EXPECT_EQ(apply_tuning(l.decode, back, "cpu"), 0);  // a CUDA file does not touch CPU kernels
  int changed = apply_tuning(l.decode, back, "cuda");
  EXPECT_GT(changed, 3);
  int gemv = 0, split = 0;
  for (const CudaKernel& k : emit_cuda_kernels(l.decode)) {
    if (k.body.find("lk::gemv_kernel<") != std::string::npos) {
      ++gemv;
      // 16 warps, then the loads after the norm flag; 512 threads with one block's bounds.
      const bool args = k.body.find(", 16, true, 2>(st") != std::string::npos ||
                        k.body.find(", 16, false, 2>(st") != std::string::npos;
      EXPECT_TRUE(args) << k.body;
      EXPECT_NE(k.body.find("__launch_bounds__(512, 1)"), std::string::npos);
      EXPECT_EQ(k.entries.at(0).block, 512);
    }
    if (k.body.find("lk::decode_attention_kernel<") != std::string::npos) {
      ++split;
      EXPECT_NE(k.body.find(", 3>(st, int(layer)"), std::string::npos) << k.body;
      EXPECT_EQ(k.entries.at(0).p1, 3);
    }
  }
  EXPECT_GT(gemv, 0);
  EXPECT_GT(split, 0);
  // CUDA tuning of an f32 plan (which the CPU backend runs) leaves its CPU kernels
  // as they were.
  Lowered lf = lower_plan(build_plan_graphs("tiny", "h100-sxm", {1, 16, 4}), {});
  std::vector<std::string> cpu_before, cpu_after;
  for (const CpuKernel& k : emit_cpu_kernels(lf.decode)) cpu_before.push_back(k.function);
  EXPECT_GT(apply_tuning(lf.decode, cuda_file(lf.decode), "cuda"), 3);
  for (const CpuKernel& k : emit_cpu_kernels(lf.decode)) cpu_after.push_back(k.function);
  EXPECT_EQ(cpu_before, cpu_after);
  // A value outside what the kernels take, or not an integer (a hand-edited plan), is
  // an emitter error on either backend.
  for (NodeId id : l.decode.topo_order())
    if (tuning_key(l.decode, id, "cuda") && l.decode.node(id).kind == OpKind::decode_attention) {
      l.decode.node_mut(id).attrs.set("tune_cuda_split", int64_t(0));
      EXPECT_THROW(emit_cuda_kernel(l.decode, id), Error);
      l.decode.node_mut(id).attrs.set("tune_cuda_split", 8.5);
      EXPECT_THROW(emit_cuda_kernel(l.decode, id), Error);
    }
  for (NodeId id : lf.decode.topo_order())
    if (lf.decode.node(id).kind == OpKind::decode_attention) {
      lf.decode.node_mut(id).attrs.set("tune_split", 4.5);
      EXPECT_THROW(emit_cpu_kernel(lf.decode, id), Error);
      lf.decode.node_mut(id).attrs.set("tune_split", int64_t(65));
      EXPECT_THROW(emit_cpu_kernel(lf.decode, id), Error);
    }
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
  EXPECT_THROW(tuning_from_json(R"({"format": "lathe-tuning", "version": 1, "backend": "tpu", "entries": []})", "a.json"),
               Error);
  // A fractional version and entries that are not an array were accepted.
  for (const char* bad : {R"({"format": "lathe-tuning", "version": 1.5, "backend": "cpu", "entries": []})",
                          R"({"format": "lathe-tuning", "version": 1, "backend": "cpu", "entries": {}})",
                          R"({"format": "lathe-tuning", "version": 1, "backend": "cpu", "entries": null})"})
    EXPECT_THROW(tuning_from_json(bad, "a.json"), Error) << bad;
  // CUDA files with these entries.
  auto cuda = [](const std::string& entries) {
    return tuning_from_json(R"({"format": "lathe-tuning", "version": 1, "backend": "cuda", "entries": [)" + entries + "]}",
                            "a.json");
  };
  EXPECT_NO_THROW(cuda(R"({"kind": "gemv", "shape": "x", "params": {"tune_cuda_warps": 4, "tune_cuda_loads": 8}})"));
  for (const char* bad : {
           // parameters: out of range, another backend's, not an integer
           R"({"kind": "gemv", "shape": "x", "params": {"tune_cuda_warps": 7}})",
           R"({"kind": "gemv", "shape": "x", "params": {"tune_cols": 64}})",
           R"({"kind": "gemv", "shape": "x", "params": {"tune_cuda_warps": 8.5}})",
           R"({"kind": "gemv", "shape": "x", "params": {"tune_cuda_warps": 18446744073709551615}})",
           // kinds: unknown, another backend's, a parameter of another kind, not an
           // object of parameters, a second entry
           R"({"kind": "gemmv", "shape": "x", "params": {"tune_cuda_warps": 4}})",
           R"({"kind": "gemm", "shape": "x", "params": {}})",
           R"({"kind": "gemv", "shape": "x", "params": {"tune_cuda_split": 4}})",
           R"({"kind": "gemv", "shape": "x", "params": []})",
           R"({"kind": "gemv", "shape": "x", "params": {"tune_cuda_warps": 4}}, {"kind": "gemv", "shape": "x", "params": {"tune_cuda_warps": 16}})",
       })
    EXPECT_THROW(cuda(bad), Error) << bad;
  // Fields of the wrong type name the field (nlohmann said only "type must be string,
  // but is number"); a fractional workload count was read as its integer part.
  auto message = [](const std::string& text) {
    try {
      tuning_from_json(text, "a.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head = R"({"format": "lathe-tuning", "version": 1, "backend": "cuda", )";
  EXPECT_EQ(message(head + R"("entries": [{"kind": "gemv", "shape": 7, "params": {}}]})"),
            "a.json: entries[0].shape: 7 is not a string");
  EXPECT_EQ(message(head + R"("workload": {"batch": 1.5}, "entries": []})"),
            "a.json: workload.batch: 1.5 is not an integer");
  EXPECT_EQ(message(head + R"("model": 3, "entries": []})"), "a.json: model: 3 is not a string");
  EXPECT_EQ(message(head + R"("workload": 5, "entries": []})"), "a.json: workload: 5 is not an object");
  EXPECT_EQ(message(head + R"("entries": [7]})"), "a.json: entries[0]: 7 is not an object");
  EXPECT_NE(message(head + R"("entries": [{"kind": "gemv", "shape": "x", "params": {"tune_cuda_warps": 4}, "best_us": "fast"}]})")
                .find("best_us: \"fast\" is not a number"),
            std::string::npos);
  // Values a tuning file cannot hold (each was accepted): an entry that sets nothing (it
  // counted as a tuned kernel), negative counts and times, a format that is not a string
  // (nlohmann's "type must be string"), a key given twice; a syntax error names its line.
  EXPECT_EQ(message(head + R"("entries": [{"kind": "gemv", "shape": "x", "params": {}}]})"),
            "a.json: entry gemv 'x': params is empty (an entry sets at least one parameter)");
  EXPECT_EQ(message(head + R"("workload": {"batch": -1}, "entries": []})"), "a.json: workload.batch: -1 is below 1");
  EXPECT_EQ(message(head + R"("entries": [{"kind": "gemv", "shape": "x", "params": {"tune_cuda_warps": 4}, "default_us": -3}]})"),
            "a.json: entry gemv 'x': default_us: -3 is not a time in microseconds (>= 0)");
  EXPECT_EQ(message(R"({"format": 3, "version": 1})"),
            "a.json: not a lathe tuning file (expected \"format\": \"lathe-tuning\")");
  EXPECT_EQ(message(head + R"("backend": "cpu", "entries": []})"), "a.json: key \"backend\" appears twice in one object");
  EXPECT_EQ(message("{\"format\": \"lathe-tuning\",\n  \"version\": 1,,\n}"),
            "a.json:2:16: not valid JSON (a tuning file is the JSON `lathe tune -o FILE` writes)");
}

// Which entry the runtime launches for a step (cuda_step_entry), against the tuning
// keys: a GEMM-family node has a `gemv` key exactly when the plan's steps run its
// warp-per-row GEMV. Batches 1-9 with 16-bit and int4 weights: matmuls leave the GEMV
// for cuBLAS from 2 rows (16-bit) or 5 (int4), lm_head for its tensor-core GEMV; past 8
// rows the tiled GEMM (or cuBLAS); without cuBLAS a matmul keeps its GEMV up to 8 rows.
TEST(Tuning, CudaStepEntryAgreesWithTheTuningKeys) {
  for (const char* wf : {"bf16", "int4:g32"})
    for (int batch = 1; batch <= 9; ++batch) {
      PlanOptions o;
      o.act_dtype = DType::bf16;
      o.weights = parse_weight_format(wf);
      auto b = build_plan_graphs("tiny", "h100-sxm", {batch, 16, 4}, o);
      Lowered l = lower_plan(b, o);
      const int from = std::string(wf) == "bf16" ? 2 : 5;
      int gemm_nodes = 0;
      for (NodeId id : l.decode.topo_order()) {
        const Node& n = l.decode.node(id);
        if (n.kind != OpKind::matmul && n.kind != OpKind::lm_head) continue;
        ++gemm_nodes;
        const CudaKernel k = emit_cuda_kernel(l.decode, id);
        const int e = cuda_step_entry(k, batch, batch, true);
        const std::string at = std::string(wf) + " batch " + std::to_string(batch) + " " + n.name;
        auto key = tuning_key(l.decode, id, "cuda");
        EXPECT_EQ(key.has_value() && key->kind == "gemv", e == 0) << at;
        if (batch < from) {
          EXPECT_EQ(e, 0) << at;
        } else if (n.kind == OpKind::lm_head) {
          ASSERT_GE(e, 0) << at;
          if (batch > 8) EXPECT_EQ(e, 1) << at;  // the tiled GEMM over 9 last rows
          else EXPECT_EQ(k.entries[size_t(e)].symbol.substr(k.entries[size_t(e)].symbol.size() - 9), "_gemv_mma") << at;
        } else {
          EXPECT_EQ(e, kCudaBlasRoute) << at;
          EXPECT_EQ(cuda_step_entry(k, batch, batch, false), batch > 8 ? 1 : 0) << at;  // no cuBLAS
        }
        // lm_head over one sequence's last row runs the GEMV however many rows it has.
        if (n.kind == OpKind::lm_head) {
          EXPECT_EQ(cuda_step_entry(k, 100, 1, true), 0) << at;
        }
      }
      EXPECT_GT(gemm_nodes, 0);
    }
  // MoE experts: the GEMV up to 16 token-expert pairs, then the tiled entry.
  PlanOptions o;
  o.act_dtype = DType::bf16;
  o.weights = parse_weight_format("bf16");
  auto bm = build_plan_graphs("tiny-moe", "h100-sxm", {8, 16, 4}, o);
  Lowered lm = lower_plan(bm, o);
  int experts = 0;
  for (NodeId id : lm.decode.topo_order())
    if (lm.decode.node(id).kind == OpKind::expert_matmul) {
      const CudaKernel k = emit_cuda_kernel(lm.decode, id);
      EXPECT_EQ(cuda_step_entry(k, k.entries[0].max_rows, 1, true), 0);
      EXPECT_EQ(cuda_step_entry(k, k.entries[0].max_rows + 1, 1, true), 1);
      ++experts;
    } else if (lm.decode.node(id).kind == OpKind::decode_attention) {
      EXPECT_EQ(cuda_step_entry(emit_cuda_kernel(lm.decode, id), 8, 8, true), 0);
    }
  EXPECT_GT(experts, 0);
}

}  // namespace
}  // namespace lathe
