#include "simulator/simulate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "support/plans.h"

namespace lathe {
namespace {

using testing::Built;
using testing::build_plan_graphs;
using testing::lower_plan;

struct Case {
  std::string model, hw;
};

// No prediction may beat the physical floors, on every built-in model x hardware pair:
//   decode step >= (weight bytes one token touches + KV bytes read) / bandwidth
//   prefill     >= FLOPs / matrix peak
// The floors are computed here from the model spec, not from the simulator.
TEST(Simulate, NeverBeatsThePhysicalFloors) {
  int checked = 0;
  for (const std::string& m : builtin_names("models")) {
    for (const std::string& h : builtin_names("hardware")) {
      for (const char* weights : {"", "int4:g32"}) {
        ModelSpec model = load_model(m);
        Target t = load_target(h);
        Workload w{1, 256, 33};
        PlanOptions o;
        if (*weights) o.weights = parse_weight_format(weights);
        auto b = build_plan_graphs(m, h, w, o);
        Lowered l = lower_plan(b, o);
        // --ideal (efficiencies 1, no launch overhead, the pure roofline max) too: the
        // floors hold without any factor that slows kernels down.
        SimOptions ideal;
        ideal.ideal = true;
        for (const SimResult& r :
             {simulate(l.prefill, l.decode, t, w), simulate(l.prefill, l.decode, t, w, ideal)}) {
          // Weight bytes per decode token: active matmul weights at their stored width
          // (int4 payload only, scales excluded: a looser floor is still a floor).
          // Weights stay in the model dtype unless int4 was asked for; the KV cache is
          // at least int4 wide at the first decode context (P + 1 tokens).
          double bits = *weights ? 4.0 : dtype_bits(model.dtype);
          double wbytes = double(model.matmul_params_per_token()) * bits / 8.0;
          double kv_min = model.kv_bytes_per_token(4) * double(w.prompt + 1);
          double decode_floor = (wbytes + kv_min) / t.bandwidth_bytes_per_s();
          EXPECT_GE(r.tpot_s, decode_floor) << m << " on " << h << " " << weights;
          DType act = activation_dtype(model, t, o);
          double peak = std::max({t.matrix_peak_flops(act), t.matrix_peak_flops(DType::fp8_e4m3),
                                  t.matrix_peak_flops(DType::int8)});
          double prefill_flops = 2.0 * double(model.matmul_params_per_token() - model.vocab * model.hidden) *
                                 double(w.batch * w.prompt);
          EXPECT_GE(r.prefill.time_s, prefill_flops / peak) << m << " on " << h;
          ++checked;
        }
      }
    }
  }
  EXPECT_GE(checked, 9 * 8 * 2 * 2);
}

TEST(Simulate, UnfusedTotalsEqualTheSumOfRows) {
  auto b = build_plan_graphs("tiny-moe", "a100-80g", {2, 64, 17});
  Lowered l = lower_plan(b, testing::no_passes());
  SimResult r = simulate(l.prefill, l.decode, b.target, b.workload);
  double pt = 0, dt = 0, pf = 0, db = 0;
  int pn = 0, dn = 0;
  for (const OpRow& o : r.ops) {
    if (o.phase == Phase::prefill) pt += o.time_s, pf += o.flops, ++pn;
    else dt += o.time_s, db += o.bytes, ++dn;
  }
  EXPECT_NEAR(pt, r.prefill.time_s, 1e-12 * r.prefill.time_s + 1e-15);
  EXPECT_NEAR(dt, r.decode.time_s, 1e-9 * r.decode.time_s);
  EXPECT_NEAR(pf, r.prefill.flops, 1e-6 * r.prefill.flops);
  EXPECT_NEAR(db, r.decode.bytes, 1e-6 * r.decode.bytes);
  EXPECT_EQ(pn, r.prefill.kernels);
  EXPECT_EQ(dn, r.decode.kernels);
  EXPECT_EQ(size_t(pn), l.prefill.num_nodes());
}

// Decode sums every step honestly: compare with simulating each step by hand.
TEST(Simulate, DecodeSumsEveryStep) {
  for (bool ideal : {true, false}) {
    auto b = build_plan_graphs("llama-3-8b", "h100-sxm", {8, 1000, 300});
    PlanOptions o;
    Lowered l = lower_plan(b, o);
    SimOptions so;
    so.ideal = ideal;
    SimResult r = simulate(l.prefill, l.decode, b.target, b.workload, so);
    CostOptions co;
    co.ideal = ideal;
    double brute = 0;
    for (int64_t step = 1; step < b.workload.gen; ++step) {
      Bindings bind{8, 1, 1000 + step};
      for (NodeId id : l.decode.topo_order()) brute += cost_node(l.decode, l.decode.node(id), b.target, bind, co).time_s;
    }
    EXPECT_EQ(r.decode.steps, 299);
    EXPECT_NEAR(r.decode.time_s, brute, (ideal ? 1e-9 : 2e-3) * brute) << "ideal=" << ideal;
  }
}

TEST(Simulate, DecodeIsNotStepsTimesTheFirstStep) {
  // Long generation at a large batch: KV reads grow with the context.
  auto b = build_plan_graphs("llama-3-8b", "h100-sxm", {32, 2000, 2000});
  Lowered l = lower_plan(b, PlanOptions{});
  SimResult r = simulate(l.prefill, l.decode, b.target, b.workload);
  double first = 0;
  for (NodeId id : l.decode.topo_order()) first += cost_node(l.decode, l.decode.node(id), b.target, {32, 1, 2001}).time_s;
  EXPECT_GT(r.decode.time_s, 1999 * first * 1.1);
}

TEST(Simulate, SumMaxAffineIsExact) {
  double brute = 0;
  for (int64_t t = 10; t <= 500; ++t) brute += std::max({1.0 + 0.5 * t, 100.0 - 0.1 * t, 30.0 + 0.0 * t});
  EXPECT_NEAR(sum_max_affine(1.0, 0.5, 100.0, -0.1, 30.0, 0.0, 10, 500), brute, 1e-9 * brute);
  // Three lines through one integer point, a crossing exactly on an integer, parallel
  // lines, a one-step range and an empty one.
  auto brute_sum = [](double a0, double a1, double b0, double b1, double c0, double c1, int64_t t0, int64_t t1) {
    double s = 0;
    for (int64_t t = t0; t <= t1; ++t)
      s += std::max({a0 + a1 * double(t), b0 + b1 * double(t), c0 + c1 * double(t)});
    return s;
  };
  struct Lines {
    double k[6];
    int64_t t0, t1;
  };
  for (const Lines& c : {Lines{{0, 1, 100, -1, 50, 0}, 0, 100},      // all three meet at t = 50
                         Lines{{0, 2, 30, 0, -10, 1}, 0, 40},        // 2t = 30 at t = 15
                         Lines{{5, 0.5, 7, 0.5, 1, 0.5}, 3, 90},     // parallel
                         Lines{{1, 1, 3, -1, 0, 0}, 1, 1},           // one step, a crossing at it
                         Lines{{1, 1, 3, -1, 0, 0}, 5, 4}}) {        // empty
    const double* k = c.k;
    EXPECT_NEAR(sum_max_affine(k[0], k[1], k[2], k[3], k[4], k[5], c.t0, c.t1),
                brute_sum(k[0], k[1], k[2], k[3], k[4], k[5], c.t0, c.t1), 1e-9)
        << c.t0 << ".." << c.t1;
  }
  // Seeded random lines (rising, falling, flat, crossing anywhere, several crossings
  // in one step, constants) against the sum step by step.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> icpt(-50.0, 150.0), slope(-0.5, 0.5);
  for (int trial = 0; trial < 2000; ++trial) {
    double k[6];
    for (int i = 0; i < 3; ++i) {
      k[2 * i] = icpt(rng);
      int kind = int(rng() % 4);
      k[2 * i + 1] = kind == 0 ? 0.0 : (kind == 1 ? 0.25 : slope(rng));
    }
    int64_t t0 = int64_t(rng() % 300), t1 = t0 + int64_t(rng() % 400) - 5;
    double want = 0;
    for (int64_t t = t0; t <= t1; ++t)
      want += std::max({k[0] + k[1] * double(t), k[2] + k[3] * double(t), k[4] + k[5] * double(t)});
    double got = sum_max_affine(k[0], k[1], k[2], k[3], k[4], k[5], t0, t1);
    ASSERT_NEAR(got, want, 1e-9 * (1.0 + std::fabs(want))) << "trial " << trial;
  }
}

TEST(Simulate, KvBytesScaleWithDtypeAndContext) {
  auto kv_of = [](const char* kv, int64_t prompt) {
    PlanOptions o;
    if (*kv) o.kv_dtype = parse_kv_dtype(kv);
    auto b = build_plan_graphs("llama-3-8b", "h100-sxm", {4, prompt, 64}, o);
    Lowered l = lower_plan(b, o);
    return simulate(l.prefill, l.decode, b.target, b.workload).mem.kv;
  };
  double bf16 = kv_of("bf16", 1000);
  // 4 sequences x 1064 tokens x 32 layers x 2 x 8 heads x 128 x 2 bytes
  EXPECT_DOUBLE_EQ(bf16, 4.0 * 1064 * 32 * 2 * 8 * 128 * 2);
  EXPECT_DOUBLE_EQ(kv_of("int8", 1000), bf16 / 2 * (8.0 + 16.0 / 128) / 8.0);
  EXPECT_DOUBLE_EQ(kv_of("int4", 1000), bf16 / 4 * (4.0 + 16.0 / 128) / 4.0);
  EXPECT_NEAR(kv_of("bf16", 2000) / bf16, 2064.0 / 1064.0, 1e-12);
}

TEST(Simulate, TensorParallelHalvesPerDeviceWeights) {
  auto weights = [](int64_t tp) {
    PlanOptions o;
    o.tp = tp;
    auto b = build_plan_graphs("llama-3-70b", "h100-sxm", {1, 128, 8}, o);
    Lowered l = lower_plan(b, o);
    SimResult r = simulate(l.prefill, l.decode, b.target, b.workload);
    return std::pair{r.mem.weights, r};
  };
  auto [w1, r1] = weights(1);
  auto [w2, r2] = weights(2);
  ModelSpec m = load_model("llama-3-70b");
  double emb = double(m.vocab * m.hidden) * 2, norms = double((2 * m.layers + 1) * m.hidden) * 2;
  // Everything but the replicated embedding table and norms halves.
  EXPECT_NEAR(w2 - emb - norms, (w1 - emb - norms) / 2, 1.0);
  EXPECT_LT(r2.tpot_s, r1.tpot_s);
  // Up to 8 devices on an NVSwitch board each further split still pays: a decode
  // step's all-reduces (160 of 16 KB) are latency-bound and take the one-shot
  // algorithm, one synchronization each, where a ring over 8 devices needs 14 (which
  // made tp 8 slower than tp 4: 19.42 against 19.15 ms a token).
  auto [w4, r4] = weights(4);
  auto [w8, r8] = weights(8);
  EXPECT_LT(r4.tpot_s, r2.tpot_s);
  EXPECT_LT(r8.tpot_s, r4.tpot_s);
}

// A tied embedding table is the LM head: over tp devices it is split by vocabulary with
// the head, not replicated beside a head slice of its own (which counted vocab/tp x
// hidden twice a device, and quantized a head that at tp 1 stays in the table's format).
TEST(Simulate, TiedEmbeddingsSplitWithTheHead) {
  auto run = [](bool tied, int64_t tp, const char* weights) {
    Built b;
    b.model = load_model("llama-3-8b");
    b.model.tie_embeddings = tied;
    b.target = load_target("h100-sxm");
    b.workload = {1, 8, 2};
    PlanOptions o;
    o.tp = tp;
    if (*weights) o.weights = parse_weight_format(weights);
    b.prefill = build_graph(b.model, build_options(b.model, b.target, o, b.workload, Phase::prefill));
    b.decode = build_graph(b.model, build_options(b.model, b.target, o, b.workload, Phase::decode));
    Lowered l = lower_plan(b, o);
    double head = 0;
    SimResult r = simulate(l.prefill, l.decode, b.target, b.workload);
    for (const OpRow& row : r.ops)
      if (row.phase == Phase::decode && row.kernel.find("lm_head") != std::string::npos) head += row.bytes;
    return std::pair{r.mem.weights, head / r.decode.steps};
  };
  ModelSpec m = load_model("llama-3-8b");
  const double table = double(m.vocab * m.hidden) * 2;  // bf16
  for (int64_t tp : {1, 2, 4}) {
    // Untied: a replicated table and a head slice (table + table / tp); tied: the table's
    // own slice (table / tp; the whole table at tp 1).
    EXPECT_NEAR(run(false, tp, "").first - run(true, tp, "").first, table, 1.0) << "tp " << tp;
  }
  // The tied head keeps the table's 16-bit format at every tp, so its bytes a step split
  // by tp (they fell 7.7x from tp 1 to tp 2 when the slice was quantized).
  auto [w1, h1] = run(true, 1, "int4:g128");
  auto [w2, h2] = run(true, 2, "int4:g128");
  EXPECT_NEAR(h2, h1 / 2, 0.02 * h1);
  EXPECT_GT(h1, table * 0.99);
}

// Chunked prefill does the same arithmetic as one pass (GEMMs are linear in the tokens;
// causal attention covers the same (query, key) pairs; the LM head and sampling run once,
// with the last chunk), reads the weights once per chunk, holds a chunk's activations,
// and its per-op rows add up to the phase.
TEST(Simulate, ChunkedPrefillDoesTheSameWorkInChunks) {
  auto b = build_plan_graphs("llama-3-8b", "h100-sxm", {2, 8192, 4});
  Lowered l = lower_plan(b, PlanOptions{});
  SimOptions whole, chunked;
  chunked.prefill_chunk = 1000;  // 9 chunks, the last of 192 tokens
  SimResult a = simulate(l.prefill, l.decode, b.target, b.workload, whole);
  SimResult c = simulate(l.prefill, l.decode, b.target, b.workload, chunked);
  EXPECT_NEAR(c.prefill.flops, a.prefill.flops, 1e-9 * a.prefill.flops);
  double weights = c.mem.weights;
  EXPECT_GT(c.prefill.bytes, a.prefill.bytes + 7 * weights);  // eight more reads of the weights
  EXPECT_LT(c.mem.activations, a.mem.activations / 4);
  EXPECT_EQ(c.mem.kv, a.mem.kv);
  EXPECT_EQ(c.decode.time_s, a.decode.time_s);
  EXPECT_GT(c.ttft_s, a.ttft_s);  // the same FLOPs in smaller GEMMs, the weights read 9 times
  double rows = 0;
  for (const OpRow& o : c.ops)
    if (o.phase == Phase::prefill) rows += o.time_s;
  EXPECT_NEAR(rows, c.prefill.time_s, 1e-9 * c.prefill.time_s);
  // The LM head runs once: its FLOPs equal one pass's.
  auto head = [](const SimResult& r) {
    for (const OpRow& o : r.ops)
      if (o.phase == Phase::prefill && o.name == "lm_head") return o.flops;
    return -1.0;
  };
  EXPECT_GT(head(a), 0);
  EXPECT_EQ(head(c), head(a));
  // Chunks of one size (8 x 1024): the GEMMs still run in every chunk (a test of a
  // kernel's cost at two chunks of one size took them for once-per-sequence kernels).
  chunked.prefill_chunk = 1024;
  SimResult even = simulate(l.prefill, l.decode, b.target, b.workload, chunked);
  EXPECT_NEAR(even.prefill.flops, a.prefill.flops, 1e-9 * a.prefill.flops);
  EXPECT_EQ(head(even), head(a));
  // A chunk of the whole prompt (or more) is one pass.
  chunked.prefill_chunk = 8192;
  EXPECT_EQ(simulate(l.prefill, l.decode, b.target, b.workload, chunked).ttft_s, a.ttft_s);
}

TEST(Simulate, MoeReadsTopKExpertsAtBatchOne) {
  auto expert_bytes = [](int64_t batch) {
    auto b = build_plan_graphs("mixtral-8x7b", "h100-sxm", {batch, 64, 2});
    Lowered l = lower_plan(b, PlanOptions{});
    SimResult r = simulate(l.prefill, l.decode, b.target, b.workload);
    double bytes = 0;
    for (const OpRow& o : r.ops)
      if (o.phase == Phase::decode && o.kernel.find("expert_matmul") != std::string::npos) bytes += o.bytes;
    return bytes / r.decode.steps;
  };
  ModelSpec m = load_model("mixtral-8x7b");
  double all_experts = double(m.layers * m.moe->experts * 3 * m.hidden * m.moe->expert_ffn) * 2;
  double b1 = expert_bytes(1);
  EXPECT_NEAR(b1 / all_experts, 2.0 / 8.0, 0.001);
  EXPECT_GT(expert_bytes(64) / all_experts, 0.99);
}

// Findings of the 2026-12-01 invariants audit, one test each.
// At 128 tokens mixtral's 8 experts are all touched in expectation (a hair under 8 in
// floating point): 32 rows each must stay on the 32-row tile, not jump to the 64-row one.
TEST(Simulate, ExpertRowsOnATileBoundaryStayOnIt) {
  auto tpot = [](int64_t batch) {
    auto b = build_plan_graphs("mixtral-8x7b", "h200", {batch, 512, 8});
    Lowered l = lower_plan(b, PlanOptions{});
    return simulate(l.prefill, l.decode, b.target, b.workload).tpot_s;
  };
  double t127 = tpot(127), t128 = tpot(128), t129 = tpot(129);
  EXPECT_LT(t128 / t127, 1.02) << t127 << " " << t128;
  EXPECT_GE(t128, t127);
  EXPECT_GE(t129, t128);
}

// The KV layout's contiguity scales the cache reads only: with a layout whose runs grow
// with the context (LHTD), a longer context must not make decode attention cheaper.
TEST(Simulate, DecodeAttentionNeverGetsCheaperWithContext) {
  PlanOptions o;
  o.kv_dtype = DType::int4;
  o.kv_layout = parse_kv_layout("LHTD");
  double last = 0;
  for (int64_t gen : {2, 3, 5, 9, 17}) {
    auto b = build_plan_graphs("tinyllama-1.1b", "rtx-4090", {200, 1, gen});
    Lowered l = lower_plan(b, o);
    SimResult r = simulate(l.prefill, l.decode, b.target, b.workload);
    EXPECT_GE(r.tpot_s, last) << "gen " << gen;
    last = r.tpot_s;
  }
}

// A paged cache holds whole blocks: 1064 positions in paged:1000 take two blocks.
TEST(Simulate, PagedKvHoldsWholeBlocks) {
  auto kv = [](const char* layout, int64_t prompt) {
    PlanOptions o;
    o.kv_layout = parse_kv_layout(layout);
    auto b = build_plan_graphs("llama-3-8b", "h100-sxm", {2, prompt, 64});
    Lowered l = lower_plan(b, o);
    return simulate(l.prefill, l.decode, b.target, b.workload).mem.kv;
  };
  EXPECT_DOUBLE_EQ(kv("paged:1000", 1000), kv("LHTD", 2000 - 64));
  EXPECT_DOUBLE_EQ(kv("paged:16", 1000), kv("LHTD", 1072 - 64));  // 1064 -> 67 blocks of 16
}

TEST(Simulate, DoesNotFitReportsMaxBatch) {
  auto b = build_plan_graphs("llama-3-70b", "a100-40g", {1, 128, 8});
  Lowered l = lower_plan(b, PlanOptions{});
  SimResult r = simulate(l.prefill, l.decode, b.target, b.workload);
  EXPECT_FALSE(r.mem.fits);
  EXPECT_EQ(r.mem.max_batch, 0);
  auto c = build_plan_graphs("llama-3-8b", "a100-80g", {1, 4096, 4096});
  Lowered lc = lower_plan(c, PlanOptions{});
  SimResult rc = simulate(lc.prefill, lc.decode, c.target, c.workload);
  EXPECT_TRUE(rc.mem.fits);
  // The reported max batch fits and one more does not.
  double per_seq = (rc.mem.kv + rc.mem.activations);
  EXPECT_LE(rc.mem.weights + per_seq * double(rc.mem.max_batch), rc.mem.capacity);
  EXPECT_GT(rc.mem.weights + per_seq * double(rc.mem.max_batch + 1), rc.mem.capacity);
}

TEST(Simulate, IdealIsFasterThanRealistic) {
  auto b = build_plan_graphs("mistral-7b", "l4", {1, 512, 64});
  Lowered l = lower_plan(b, PlanOptions{});
  SimOptions ideal;
  ideal.ideal = true;
  SimResult a = simulate(l.prefill, l.decode, b.target, b.workload, ideal);
  SimResult r = simulate(l.prefill, l.decode, b.target, b.workload);
  EXPECT_LT(a.e2e_s, r.e2e_s);
}

}  // namespace
}  // namespace lathe
