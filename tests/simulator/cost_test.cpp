// FLOPs and bytes of each op kind against hand calculations (tiny model, f32).
#include "simulator/cost.h"

#include <gtest/gtest.h>

#include "support/plans.h"

namespace lathe {
namespace {

using testing::build_plan_graphs;

// tiny: hidden 128, heads 4 (kv 2) x 32, ffn 384, vocab 512, f32 everywhere.
constexpr double H = 128, Dq = 128, Dkv = 64, F = 384, V = 512, Hd = 32;

NodeCost cost_of(const Graph& g, const std::string& node, Bindings b, const Target& t) {
  NodeId id = g.find_node(node);
  EXPECT_NE(id, kNone) << node;
  CostOptions o;
  o.ideal = true;
  return cost_node(g, g.node(id), t, b, o);
}

TEST(Cost, MatmulIs2MKN) {
  auto p = build_plan_graphs("tiny", "cpu-host", {3, 20, 5});
  Bindings b{3, 20, 20};
  NodeCost c = cost_of(p.prefill, "l0.wq", b, p.target);
  double M = 3 * 20;
  EXPECT_DOUBLE_EQ(c.flops, 2 * M * H * Dq);
  // x read once + weight once + y written once, all f32.
  EXPECT_DOUBLE_EQ(c.bytes, 4 * (M * H + Dq * H + M * Dq));
}

TEST(Cost, ElementwiseAndNormBytes) {
  auto p = build_plan_graphs("tiny", "cpu-host", {2, 10, 5});
  Bindings b{2, 10, 10};
  double n = 2 * 10 * H;
  EXPECT_DOUBLE_EQ(cost_of(p.prefill, "l0.attn_add", b, p.target).bytes, 4 * 3 * n);
  EXPECT_DOUBLE_EQ(cost_of(p.prefill, "l0.attn_norm", b, p.target).bytes, 4 * (2 * n + H));
  EXPECT_DOUBLE_EQ(cost_of(p.prefill, "l0.silu", b, p.target).bytes, 4 * 2 * (2 * 10 * F));
}

TEST(Cost, AttentionPartsAndCausalPairs) {
  auto p = build_plan_graphs("tiny", "cpu-host", {1, 16, 4});
  Bindings b{1, 16, 16};
  // qk: 2 x B x heads x S x T x d
  EXPECT_DOUBLE_EQ(cost_of(p.prefill, "l0.qk", b, p.target).flops, 2.0 * 4 * 16 * 16 * Hd);
  // scores [B, heads, S, T] f32 read and written by softmax
  EXPECT_DOUBLE_EQ(cost_of(p.prefill, "l0.softmax", b, p.target).bytes, 2.0 * 4 * 4 * 16 * 16);
  // kv_read reads one layer's K and V for the context, writes them as activations.
  double ctx = 2.0 * 16 * Dkv * 4;
  EXPECT_DOUBLE_EQ(cost_of(p.prefill, "l0.kv_read", b, p.target).bytes, 2 * ctx);
}

TEST(Cost, LmHeadReadsLastTokenOnly) {
  auto p = build_plan_graphs("tiny", "cpu-host", {2, 50, 5});
  Bindings b{2, 50, 50};
  NodeCost c = cost_of(p.prefill, "lm_head", b, p.target);
  EXPECT_DOUBLE_EQ(c.flops, 2 * 2 * H * V);
  EXPECT_DOUBLE_EQ(c.bytes, 4 * (2 * H + V * H + 2 * V));
}

TEST(Cost, QuantizedWeightBytesCountScales) {
  auto p = build_plan_graphs("llama-3-8b", "a100-80g", {1, 1, 1});
  PlanOptions o;
  o.passes = "quantize-weights";
  o.weights = parse_weight_format("int4:g128");
  auto l = testing::lower_plan(p, o);
  Bindings b{1, 1, 10};
  CostOptions co;
  co.ideal = true;
  NodeCost c = cost_node(l.decode, l.decode.node(l.decode.find_node("l0.wq")), p.target, b, co);
  double w = 4096.0 * 4096 * 0.5 + 4096.0 * 32 * 2;  // payload + f16 scale per 128
  EXPECT_DOUBLE_EQ(c.bytes, w + 2 * 4096 * 2);
}

// A CPU with 8-bit dot products runs int4 and int8 GEMMs and GEMVs on them (the
// dot-product peak x efficiency.int_dot, no dequantization); CPUs without an int8 peak
// keep the dequantization model.
// `small` on cpu-host with its weights in fmt (quantize-weights only), batch 1, prompt 64.
struct QuantizedSmall {
  Target target;
  Lowered lowered;
};
QuantizedSmall quantized_small(const char* fmt) {
  PlanOptions o;
  o.passes = "quantize-weights";
  o.weights = parse_weight_format(fmt);
  auto p = build_plan_graphs("small", "cpu-host", {1, 64, 4}, o);
  return {p.target, testing::lower_plan(p, o)};
}

TEST(Cost, CpuIntegerDotProducts) {
  for (const char* fmt : {"int4:g32", "int8"}) {
    const QuantizedSmall q = quantized_small(fmt);
    const Lowered& l = q.lowered;
    Target plain = q.target, dot = q.target;
    ASSERT_EQ(plain.peak_int8, 0) << "cpu-host has no int8 peak";
    dot.peak_int8 = 2.0;  // TOP/s
    dot.eff.int8_dot = 0.25;  // distinct from int_dot, so the test sees which one is used
    CostOptions co;
    auto wq = [&](const Graph& g) { return g.node(g.find_node("l0.wq")); };
    for (int phase = 0; phase < 2; ++phase) {
      const Graph& g = phase ? l.decode : l.prefill;
      Bindings b = phase ? Bindings{1, 1, 65} : Bindings{1, 64, 64};
      NodeCost a = cost_node(g, wq(g), plain, b, co), c = cost_node(g, wq(g), dot, b, co);
      const double fp32_s = a.flops / (plain.peak_fp32 * 1e12 * plain.eff.gemm);
      EXPECT_GT(a.compute_s, 1.01 * fp32_s) << fmt << " phase " << phase << ": dequantization is costed";
      // int4 and int8, GEMV and GEMM (here K = 512, no int_dot_half_k: flat).
      EXPECT_EQ(c.math, DType::int8) << fmt << " phase " << phase;
      const double e = std::string(fmt) == "int8" ? dot.eff.int8_dot : dot.eff.int_dot;
      EXPECT_DOUBLE_EQ(c.compute_s, c.flops / (2.0e12 * e)) << fmt << " phase " << phase;
      EXPECT_DOUBLE_EQ(c.bytes, a.bytes);
    }
  }
}

// The target of quantized_small with 8-bit dot products: a 2 TOP/s int8 peak, int4
// GEMMs at 0.4 of it and int8 at 0.3 (distinct, so the tests see which one is used).
Target with_int_dot(const QuantizedSmall& q) {
  Target t = q.target;
  t.peak_int8 = 2.0;
  t.eff.int_dot = 0.4;
  t.eff.int8_dot = 0.3;
  return t;
}

// CPU integer GEMMs: two fixed costs that add in time, efficiency =
// int_dot / (1 + int_dot_half_k / K + int_dot_half_rows / M); the GEMVs of decode
// (at most kCpuGemvRows rows) keep the flat efficiency.
TEST(Cost, CpuIntegerGemmFixedCostsAddInTime) {
  for (const char* fmt : {"int4:g32", "int8"}) {
    const QuantizedSmall q = quantized_small(fmt);
    const Lowered& l = q.lowered;
    const bool i8 = std::string(fmt) == "int8";
    const Target flat = with_int_dot(q);
    Target fixed = flat;
    (i8 ? fixed.int8_dot_half_k : fixed.int_dot_half_k) = 256;
    (i8 ? fixed.int8_dot_half_rows : fixed.int_dot_half_rows) = 16;
    CostOptions co;
    const double K = 512;  // small's hidden size: the reduction of wq
    for (int64_t M : {32, 64, 256}) {
      const Node& wq = l.prefill.node(l.prefill.find_node("l0.wq"));
      Bindings b{1, M, M};
      NodeCost a = cost_node(l.prefill, wq, flat, b, co), c = cost_node(l.prefill, wq, fixed, b, co);
      EXPECT_DOUBLE_EQ(c.compute_s, a.compute_s * (1.0 + 256.0 / K + 16.0 / double(M))) << fmt << " M " << M;
    }
    const Node& dq = l.decode.node(l.decode.find_node("l0.wq"));
    Bindings one{1, 1, 65};
    EXPECT_DOUBLE_EQ(cost_node(l.decode, dq, fixed, one, co).compute_s, cost_node(l.decode, dq, flat, one, co).compute_s)
        << fmt << ": decode GEMVs are flat";
  }
}

// CPU integer GEMMs run their rows in register tiles of kCpuQTileRows; a partial last
// tile repeats a row, so 9-12 rows cost the same tile work (the per-call half_rows term
// stays a fixed time): time = 2 K N (Mt (1 + half_k / K) + half_rows) / (peak e), Mt the
// rows rounded up to whole tiles. Measured on a 2-vCPU host (small, int8 / int4:g32
// decode, `lathe run --batch 9` and `--batch 12`): 9 rows took 0.93-0.97 / 0.89-0.94 of
// 12 rows' time, where the model without whole tiles predicted 0.84 / 0.82.
TEST(Cost, CpuIntegerGemmCountsWholeTiles) {
  ASSERT_EQ(kCpuQTileRows, 4);
  for (const char* fmt : {"int4:g32", "int8"}) {
    const QuantizedSmall q = quantized_small(fmt);
    const Lowered& l = q.lowered;
    const bool i8 = std::string(fmt) == "int8";
    Target t = with_int_dot(q);
    (i8 ? t.int8_dot_half_k : t.int_dot_half_k) = 256;
    (i8 ? t.int8_dot_half_rows : t.int_dot_half_rows) = 16;
    const double e = i8 ? 0.3 : 0.4, K = 512, N = 512;  // wq of small: 512 x 512
    CostOptions co;
    const Node& wq = l.prefill.node(l.prefill.find_node("l0.wq"));
    for (int64_t M : {9, 10, 11, 12, 13, 16, 33}) {
      const double Mt = double((M + 3) / 4 * 4);
      NodeCost c = cost_node(l.prefill, wq, t, {1, M, M}, co);
      EXPECT_DOUBLE_EQ(c.compute_s, 2 * K * N * (Mt * (1 + 256 / K) + 16) / (2.0e12 * e)) << fmt << " M " << M;
    }
    EXPECT_DOUBLE_EQ(cost_node(l.prefill, wq, t, {1, 9, 9}, co).compute_s,
                     cost_node(l.prefill, wq, t, {1, 12, 12}, co).compute_s)
        << fmt;
    CostOptions ideal;
    ideal.ideal = true;
    NodeCost r = cost_node(l.prefill, wq, t, {1, 9, 9}, ideal);
    EXPECT_DOUBLE_EQ(r.compute_s, r.flops / 2.0e12) << fmt << ": --ideal counts the useful rows only";
  }
}

// CPU integer GEMVs (decode, at most kCpuGemvRows rows) take efficiency.int_dot_gemv /
// int8_dot_gemv when set (0, the default: the GEMMs' factor); GEMMs never do.
TEST(Cost, CpuIntegerGemvEfficiency) {
  for (const char* fmt : {"int4:g32", "int8"}) {
    const QuantizedSmall q = quantized_small(fmt);
    const Lowered& l = q.lowered;
    const bool i8 = std::string(fmt) == "int8";
    const Target shared = with_int_dot(q);
    ASSERT_EQ(shared.eff.int_dot_gemv, 0);
    ASSERT_EQ(shared.eff.int8_dot_gemv, 0);
    Target own = shared;
    (i8 ? own.eff.int8_dot_gemv : own.eff.int_dot_gemv) = 0.05;
    (i8 ? own.eff.int_dot_gemv : own.eff.int8_dot_gemv) = 0.9;  // the other format's: unused
    const Node& dq = l.decode.node(l.decode.find_node("l0.wq"));
    for (int64_t B : {1, 2, 8}) {
      Bindings b{B, 1, 65};
      NodeCost a = cost_node(l.decode, dq, shared, b), c = cost_node(l.decode, dq, own, b);
      EXPECT_DOUBLE_EQ(a.compute_s, a.flops / (2.0e12 * (i8 ? 0.3 : 0.4))) << fmt << " B " << B;
      EXPECT_DOUBLE_EQ(c.compute_s, c.flops / (2.0e12 * 0.05)) << fmt << " B " << B;
    }
    const Node& pq = l.prefill.node(l.prefill.find_node("l0.wq"));
    Bindings p{1, 64, 64};
    EXPECT_DOUBLE_EQ(cost_node(l.prefill, pq, own, p).compute_s, cost_node(l.prefill, pq, shared, p).compute_s)
        << fmt << ": GEMMs keep int_dot / int8_dot";
  }
}

// CPU integer GEMVs pay a fixed cost per output against K: efficiency =
// int_dot_gemv / (1 + int_dot_gemv_half_k / K) (int8_dot_gemv_half_k for int8); the GEMMs
// keep their own terms, and --ideal drops it. The probe measured the int4 GEMV at K 512
// at 0.69-0.71 of its K 2048 rate (half K 330-360).
TEST(Cost, CpuIntegerGemvFixedCostAgainstK) {
  for (const char* fmt : {"int4:g32", "int8"}) {
    const QuantizedSmall q = quantized_small(fmt);
    const Lowered& l = q.lowered;
    const bool i8 = std::string(fmt) == "int8";
    const Target flat = with_int_dot(q);
    Target fixed = flat;
    (i8 ? fixed.int8_dot_gemv_half_k : fixed.int_dot_gemv_half_k) = 256;
    Target other = flat;
    (i8 ? other.int_dot_gemv_half_k : other.int8_dot_gemv_half_k) = 256;  // the other format's: unused
    CostOptions co;
    for (auto [node, K] : {std::pair<const char*, double>{"l0.wq", 512}, {"l0.w_down", 1536}}) {  // small's
      const Node& dn = l.decode.node(l.decode.find_node(node));
      for (int64_t B : {1, 8}) {
        Bindings b{B, 1, 65};
        NodeCost a = cost_node(l.decode, dn, flat, b, co), c = cost_node(l.decode, dn, fixed, b, co);
        EXPECT_DOUBLE_EQ(c.compute_s, a.compute_s * (1.0 + 256.0 / K)) << fmt << " " << node << " B " << B;
        EXPECT_DOUBLE_EQ(cost_node(l.decode, dn, other, b, co).compute_s, a.compute_s) << fmt << " " << node;
      }
    }
    const Node& pq = l.prefill.node(l.prefill.find_node("l0.wq"));
    Bindings p{1, 64, 64};
    EXPECT_DOUBLE_EQ(cost_node(l.prefill, pq, fixed, p, co).compute_s, cost_node(l.prefill, pq, flat, p, co).compute_s)
        << fmt << ": GEMMs keep their own terms";
    CostOptions ideal;
    ideal.ideal = true;
    const Node& dq = l.decode.node(l.decode.find_node("l0.wq"));
    EXPECT_DOUBLE_EQ(cost_node(l.decode, dq, fixed, {1, 1, 65}, ideal).compute_s,
                     cost_node(l.decode, dq, flat, {1, 1, 65}, ideal).compute_s)
        << fmt << ": --ideal has no fixed costs";
  }
}

// CPU BLAS GEMMs: efficiency gemm x M / (M + gemm_half_rows) above the GEMV row count,
// flat for the generated GEMVs (decode) and when gemm_half_rows is 0 (the default).
TEST(Cost, CpuGemmEfficiencyGrowsWithRows) {
  auto p = build_plan_graphs("small", "cpu-host", {1, 64, 4});
  Target flat = p.target, rows = p.target;
  ASSERT_EQ(flat.gemm_half_rows, 0);
  rows.gemm_half_rows = 32;
  CostOptions co;
  const Node& wq = p.prefill.node(p.prefill.find_node("l0.wq"));
  for (int64_t M : {16, 64, 512}) {
    Bindings b{1, M, M};
    NodeCost a = cost_node(p.prefill, wq, flat, b, co), c = cost_node(p.prefill, wq, rows, b, co);
    EXPECT_DOUBLE_EQ(a.compute_s, a.flops / (flat.peak_fp32 * 1e12 * flat.eff.gemm)) << M;
    EXPECT_DOUBLE_EQ(c.compute_s, a.compute_s * (double(M) + 32) / double(M)) << M;
  }
  const Node& dq = p.decode.node(p.decode.find_node("l0.wq"));
  Bindings one{1, 1, 65};
  EXPECT_DOUBLE_EQ(cost_node(p.decode, dq, rows, one, co).compute_s, cost_node(p.decode, dq, flat, one, co).compute_s)
      << "decode GEMVs pack nothing";
}

// CPU floating-point GEMVs (decode, at most kCpuGemvRows rows) take efficiency.gemv when
// set (0, the default: the GEMMs' factor); the BLAS GEMMs above never do, and GPU targets
// ignore it.
TEST(Cost, CpuFloatGemvEfficiency) {
  auto p = build_plan_graphs("small", "cpu-host", {1, 64, 4});
  Target shared = p.target, own = p.target;
  ASSERT_EQ(shared.eff.gemv, 0);
  own.eff.gemv = 0.1;
  CostOptions co;
  const Node& dq = p.decode.node(p.decode.find_node("l0.wq"));
  for (int64_t B : {int64_t(1), int64_t(4), int64_t(kCpuGemvRows)}) {
    Bindings b{B, 1, 65};
    NodeCost a = cost_node(p.decode, dq, shared, b, co), c = cost_node(p.decode, dq, own, b, co);
    EXPECT_DOUBLE_EQ(a.compute_s, a.flops / (shared.peak_fp32 * 1e12 * shared.eff.gemm)) << B;
    EXPECT_DOUBLE_EQ(c.compute_s, a.flops / (own.peak_fp32 * 1e12 * 0.1)) << B;
  }
  Bindings nine{kCpuGemvRows + 1, 1, 65};
  EXPECT_DOUBLE_EQ(cost_node(p.decode, dq, own, nine, co).compute_s, cost_node(p.decode, dq, shared, nine, co).compute_s)
      << "a GEMM of more rows than a GEMV takes is BLAS";
  // Expert GEMMs of at most 16 token-expert pairs run the same GEMV loop.
  {
    auto m = build_plan_graphs("tiny-moe", "cpu-host", {1, 64, 4});
    Target moe_shared = m.target, moe_own = m.target;
    moe_own.eff.gemv = 0.1;
    int experts = 0;
    for (NodeId id : m.decode.topo_order()) {
      const Node& n = m.decode.node(id);
      if (n.kind != OpKind::expert_matmul) continue;
      ++experts;
      NodeCost a = cost_node(m.decode, n, moe_shared, {4, 1, 65}, co), c = cost_node(m.decode, n, moe_own, {4, 1, 65}, co);
      EXPECT_DOUBLE_EQ(c.compute_s, a.compute_s * moe_shared.eff.gemm / 0.1) << n.name;
    }
    EXPECT_GT(experts, 0);
  }
  // Unfused attention's qk and pv have loops of their own: not the GEMV path.
  for (const char* name : {"l0.qk", "l0.pv"}) {
    const Node& n = p.decode.node(p.decode.find_node(name));
    EXPECT_DOUBLE_EQ(cost_node(p.decode, n, own, {1, 1, 65}, co).compute_s,
                     cost_node(p.decode, n, shared, {1, 1, 65}, co).compute_s)
        << name;
  }
  auto g = build_plan_graphs("small", "a100-80g", {1, 64, 4});
  Target gpu = g.target, gpu_gemv = g.target;
  gpu_gemv.eff.gemv = 0.1;
  const Node& gq = g.decode.node(g.decode.find_node("l0.wq"));
  EXPECT_DOUBLE_EQ(cost_node(g.decode, gq, gpu_gemv, {1, 1, 65}, co).compute_s,
                   cost_node(g.decode, gq, gpu, {1, 1, 65}, co).compute_s)
      << "GPU targets ignore efficiency.gemv";
}

// CPU flash attention: fixed costs per head_dim and per KV-head group that add in time,
// efficiency = attention / (1 + attention_half_dim / D + attention_half_group / G); GPU
// targets and --ideal ignore them.
TEST(Cost, CpuFlashAttentionFixedCostsAddInTime) {
  for (const char* hw : {"cpu-host", "a100-80g"}) {
    auto p = build_plan_graphs("small", hw, {1, 64, 4});
    Lowered l = testing::lower_plan(p, PlanOptions{});
    Target flat = p.target, fixed = p.target;
    ASSERT_EQ(flat.attention_half_dim, 0);
    ASSERT_EQ(flat.attention_half_group, 0);
    fixed.attention_half_dim = 16;
    fixed.attention_half_group = 0.5;
    const NodeId id = l.prefill.find_node("l0.flash_attention");
    ASSERT_NE(id, kNone) << hw;
    const Node& fa = l.prefill.node(id);
    for (int64_t S : {16, 64, 256}) {
      Bindings b{1, S, S};
      NodeCost a = cost_node(l.prefill, fa, flat, b), c = cost_node(l.prefill, fa, fixed, b);
      // small: head_dim 64, 8 query heads on 4 KV heads (group 2).
      const double factor = std::string(hw) == "cpu-host" ? 1.0 + 16.0 / 64.0 + 0.5 / 2.0 : 1.0;
      EXPECT_DOUBLE_EQ(c.compute_s, a.compute_s * factor) << hw << " S " << S;
      EXPECT_DOUBLE_EQ(c.flops, a.flops);
      // The causal pairs plus 32 pairs' worth per row (GPUs: half a 64-key tile past
      // the diagonal; CPUs: the kernel's per-row costs, measured in pairs).
      const double waste = 32.0;
      EXPECT_DOUBLE_EQ(a.flops, 4.0 * 8 * 64 * (double(S) * double(S + 1) / 2 + double(S) * waste)) << hw;
      CostOptions ideal;
      ideal.ideal = true;
      EXPECT_DOUBLE_EQ(cost_node(l.prefill, fa, fixed, b, ideal).compute_s, cost_node(l.prefill, fa, flat, b, ideal).compute_s)
          << hw;
    }
  }
}

// Decode attention converts each cached element it reads to f32: scalar work of 1
// operation per element of a 16-bit cache, 2 of int8, 3 of int4, none of f32, none
// with --ideal; the bytes and FLOPs do not move with it.
TEST(Cost, DecodeAttentionConvertsItsCache) {
  for (const char* hw : {"cpu-host", "a100-80g"}) {
    const Bindings b{2, 1, 301};  // 2 sequences, 300 cached tokens + the new one
    NodeCost base;
    for (const char* kv : {"f32", "f16", "bf16", "int8", "int4"}) {
      PlanOptions o;
      o.kv_dtype = parse_kv_dtype(kv);
      auto p = build_plan_graphs("small", hw, {2, 300, 2}, o);
      const Target& t = p.target;
      Lowered l = testing::lower_plan(p, o);
      const NodeId id = l.decode.find_node("l0.decode_attention");
      ASSERT_NE(id, kNone) << hw << " " << kv;
      const Node& n = l.decode.node(id);
      const NodeCost c = cost_node(l.decode, n, t, b);
      // small: 4 KV heads of 64; K and V of 2 sequences x 301 positions.
      const double elems = 2.0 * 2 * 301 * 4 * 64;
      const double ops = std::string(kv) == "f32" ? 0 : std::string(kv) == "int8" ? 2 : std::string(kv) == "int4" ? 3 : 1;
      if (std::string(kv) == "f32") {
        base = c;
        // f32: the attention's own FLOPs only.
        EXPECT_DOUBLE_EQ(c.compute_s, c.flops / (t.peak_fp32 * 1e12 * t.eff.scalar)) << hw;
      }
      EXPECT_DOUBLE_EQ(c.flops, base.flops) << hw << " " << kv;
      EXPECT_NEAR(c.compute_s - base.compute_s, elems * ops / (t.peak_fp32 * 1e12 * t.eff.scalar * t.eff.dequant),
                  1e-9 * base.compute_s)
          << hw << " " << kv;
      CostOptions ideal;
      ideal.ideal = true;
      EXPECT_DOUBLE_EQ(cost_node(l.decode, n, t, b, ideal).compute_s, base.flops / (t.peak_fp32 * 1e12)) << hw << " " << kv;
    }
  }
}

TEST(Cost, CollectivesUseTheInterconnect) {
  PlanOptions o;
  o.tp = 2;
  auto p = build_plan_graphs("llama-3-8b", "a100-80g", {1, 128, 1}, o);
  Bindings b{1, 128, 128};
  CostOptions co;
  co.ideal = true;
  const Node& n = p.prefill.node(p.prefill.find_node("l0.attn_out_sum"));
  NodeCost c = cost_node(p.prefill, n, p.target, b, co);
  double bytes = 128.0 * 4096 * 2;  // bf16 activations
  EXPECT_EQ(c.bound, Bound::network);
  // A100 NVLink: 600 GB/s bidirectional, 300 GB/s each way, through NVSwitch. Over 2
  // GPUs the one-shot all-reduce (read the other buffer, one 5 us step) beats the ring
  // and the two-shot (2 x (1/2) of the buffer, two steps).
  EXPECT_NEAR(c.network_s, bytes / 300e9 + 5e-6, 1e-12);
  // Without the switch (NVLink bridges, PCIe): the ring.
  Target ring = p.target;
  ring.nvlink_switch = 0;
  EXPECT_NEAR(cost_node(p.prefill, n, ring, b, co).network_s, 2.0 * 0.5 * bytes / 300e9 + 2 * 5e-6, 1e-12);
}

// GEMM efficiency by hand: a100-80g (108 SMs, 128 x 128 tiles, efficiency.gemm 0.8),
// wo at 129 rows (N = K = 4096). Of the four tile shapes, 64 x 128 (0.9 of the big
// tile's rate) pads 129 rows to 192 and fills 96 of 108 SMs: 0.9 x 129/192 x 96/108;
// 128 x 128 pads to 256 rows and runs 64 tiles on 108 SMs (0.30 of the rate).
TEST(Cost, GemmTilePaddingAndWaves) {
  auto p = build_plan_graphs("llama-3-8b", "a100-80g", {1, 129, 1});
  Bindings b{1, 129, 129};
  CostOptions co;
  const Node& n = p.prefill.node(p.prefill.find_node("l0.wo"));
  NodeCost c = cost_node(p.prefill, n, p.target, b, co);
  const double flops = 2.0 * 129 * 4096 * 4096;
  EXPECT_DOUBLE_EQ(c.flops, flops);
  const double eff = 0.8 * 0.9 * (129.0 / 192) * (96.0 / 108);
  EXPECT_NEAR(c.compute_s, flops / (p.target.matrix_peak_flops(DType::bf16) * eff), 1e-12);
}

// The three algorithms by hand, on h100-sxm (NVLink 900 GB/s: W = 450 GB/s each way,
// 5 us a step), and the choice between them: latency-bound messages take the one-shot,
// large ones the two-shot; without a switch only the ring remains.
TEST(Cost, CollectiveAlgorithms) {
  const Target h100 = load_target("h100-sxm");
  ASSERT_EQ(h100.nvlink_switch, 1.0);
  const double W = 450e9, a = 5e-6;
  // Decode at batch 1, llama-3-70b: 8192 bf16 values.
  double small = 8192 * 2;
  EXPECT_NEAR(collective_seconds(true, small, 8, h100), 7 * small / W + a, 1e-15);
  // A 2048-token prefill: 32 MiB; the two-shot moves 2 x 7/8 of it where the one-shot
  // reads 7 buffers.
  double large = 2048.0 * 8192 * 2;
  EXPECT_NEAR(collective_seconds(true, large, 8, h100), 2 * 7.0 / 8 * large / W + 2 * a, 1e-12);
  EXPECT_NEAR(collective_seconds(false, large, 8, h100), 7.0 / 8 * large / W + a, 1e-12);
  Target ring = h100;
  ring.nvlink_switch = 0;
  EXPECT_NEAR(collective_seconds(true, small, 8, ring), 2 * 7.0 / 8 * small / W + 14 * a, 1e-15);
  EXPECT_NEAR(collective_seconds(false, large, 8, ring), 7.0 / 8 * large / W + 7 * a, 1e-12);
  // PCIe only (l4: 64 GB/s, 32 GB/s each way): the ring, whatever nvlink_switch says.
  Target l4 = load_target("l4");
  l4.nvlink_switch = 1;
  EXPECT_NEAR(collective_seconds(true, small, 4, l4), 2 * 3.0 / 4 * small / 32e9 + 6 * a, 1e-15);
  EXPECT_EQ(collective_seconds(true, large, 1, h100), 0.0);
  // The direct algorithms never lose to the ring they replace.
  for (double bytes : {1e3, 1e5, 1e7, 1e9})
    for (double n : {2.0, 4.0, 8.0}) {
      EXPECT_LE(collective_seconds(true, bytes, n, h100), collective_seconds(true, bytes, n, ring)) << bytes << " " << n;
      EXPECT_LE(collective_seconds(false, bytes, n, h100), collective_seconds(false, bytes, n, ring)) << bytes << " " << n;
    }
}

TEST(Cost, ContiguityPrefersLongRuns) {
  Target gpu = load_target("a100-80g");
  EXPECT_GT(contiguity_efficiency(1 << 20, gpu), 0.999);
  EXPECT_LT(contiguity_efficiency(64, gpu), 0.7);
  KvLayout lhtd{KvLayoutKind::LHTD, 16}, lthd{KvLayoutKind::LTHD, 16}, paged{KvLayoutKind::paged, 16};
  EXPECT_DOUBLE_EQ(kv_read_run_bytes(lhtd, 1000, 8, 128, 16), 1000.0 * 256);
  EXPECT_DOUBLE_EQ(kv_read_run_bytes(lthd, 1000, 8, 128, 16), 256.0);
  EXPECT_DOUBLE_EQ(kv_read_run_bytes(paged, 1000, 8, 128, 16), 16.0 * 256);
}

// Dequantizing int4 expert weights on a GPU is paid once per 128-row tile of each
// expert's own rows (pairs / experts touched), not of all token-expert pairs: a 512-token
// Mixtral prefill gives each of the 8 experts 128 rows, one tile, where it was costed
// as 8 (the int4 prefill came out slower than bf16).
TEST(Cost, ExpertDequantizationIsPerExpertTile) {
  PlanOptions q;
  q.weights = parse_weight_format("int4:g128");
  auto p16 = build_plan_graphs("mixtral-8x7b", "h100-sxm", {1, 512, 2});
  auto p4 = build_plan_graphs("mixtral-8x7b", "h100-sxm", {1, 512, 2}, q);
  Lowered l16 = testing::lower_plan(p16, {}), l4 = testing::lower_plan(p4, q);
  const Target& t = p4.target;
  Bindings b{1, 512, 512};
  auto compute = [&](const Graph& g) {
    NodeId id = g.find_node("l0.experts.w_down");
    EXPECT_NE(id, kNone);
    return cost_node(g, g.node(id), t, b).compute_s;
  };
  // w_down: 8 experts x ffn 14336 x hidden 4096 int4 weights, all touched at 1024 pairs;
  // 3 scalar operations each, once (one 128-row tile per expert).
  double elems = 8.0 * 14336 * 4096;
  double dequant = elems * 3 / (t.peak_fp32 * 1e12 * t.eff.scalar * t.eff.dequant);
  EXPECT_NEAR(compute(l4.prefill) - compute(l16.prefill), dequant, 1e-3 * dequant);
}

TEST(Cost, ExpertsTouched) {
  EXPECT_DOUBLE_EQ(expected_experts_touched(8, 2, 1), 2.0);
  EXPECT_NEAR(expected_experts_touched(8, 2, 64), 8.0, 1e-6);
  EXPECT_GT(expected_experts_touched(8, 2, 4), 4.0);
}

}  // namespace
}  // namespace lathe
