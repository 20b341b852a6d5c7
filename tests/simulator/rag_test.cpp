#include "simulator/rag.h"

#include <gtest/gtest.h>

#include "ir/assert.h"
#include "simulator/step_cost.h"
#include "support/plans.h"

namespace lathe {
namespace {

Lowered lowered(const std::string& model, const std::string& hw, Workload w,
                testing::Built* out = nullptr) {
  testing::Built b = testing::build_plan_graphs(model, hw, w);
  Lowered l = testing::lower_plan(b, {});
  if (out) *out = b;
  return l;
}

// Overlapping retrieval with the base prompt's prefill never ends later than doing
// the stages one after another, request by request, whatever retrieval takes: from
// far shorter than the base prefill (where abandoning the base prefill is the right
// call) to far longer.
TEST(Rag, OverlappedIsNeverSlowerThanSequential) {
  struct Case {
    const char* model;
    const char* hw;
    const char* retrieval;
    int64_t base, context;
  };
  const Case cases[] = {
      {"llama-3-8b", "h100-sxm", "uniform:50,200", 256, 1024},
      {"llama-3-8b", "l4", "lognormal:20,1.5", 2048, 512},
      {"llama-3-8b", "a100-80g", "fixed:0.01", 4096,
       256},  // retrieval far faster than the base prefill
      {"llama-3-8b", "h100-sxm", "uniform:1,30", 3000, 3000},
      {"small", "cpu-host", "uniform:5,500", 512, 512},
  };
  for (const Case& c : cases) {
    testing::Built b;
    Lowered l = lowered(c.model, c.hw, {1, c.base + c.context, 64}, &b);
    RagOptions o;
    o.modes = {RagMode::sequential, RagMode::overlapped};
    o.retrieval_ms = *parse_distribution(c.retrieval);
    o.base_tokens = c.base;
    o.context_tokens = c.context;
    o.output_tokens = 64;
    o.samples = 500;
    RagResult r = simulate_rag(l.prefill, l.decode, b.target, o);
    ASSERT_EQ(r.modes.size(), 2u);
    const auto& seq = r.modes[0].e2e_s;
    const auto& ovl = r.modes[1].e2e_s;
    for (size_t i = 0; i < seq.size(); ++i)
      ASSERT_LE(ovl[i], seq[i] * (1 + 1e-12)) << c.hw << " draw " << i;
    EXPECT_LT(r.modes[1].e2e.mean, r.modes[0].e2e.mean) << c.hw << " " << c.retrieval;
    // The appended chunk costs less than the whole prompt at once.
    EXPECT_LT(r.appended_prefill_s, r.full_prefill_s) << c.hw;
  }
}

TEST(Rag, TimeoutFallsBackToTheBasePrompt) {
  testing::Built b;
  Lowered l = lowered("llama-3-8b", "h100-sxm", {1, 1280, 128}, &b);
  RagOptions o;
  o.modes = {RagMode::sequential, RagMode::timeout};
  o.retrieval_ms = *parse_distribution("fixed:300");
  o.timeout_ms = 150;
  o.samples = 10;
  RagResult r = simulate_rag(l.prefill, l.decode, b.target, o);
  const RagModeResult& t = r.modes[1];
  EXPECT_EQ(t.fallback_share, 1.0);
  double expected = 0.150 + o.assembly_ms * 1e-3 + r.base_prefill_s + r.decode_base_only_s;
  EXPECT_NEAR(t.e2e.p50, expected, 1e-9);
  EXPECT_LT(t.e2e.p50, r.modes[0].e2e.p50);
  o.retrieval_ms = *parse_distribution("fixed:100");  // under the deadline: sequential
  RagResult s = simulate_rag(l.prefill, l.decode, b.target, o);
  EXPECT_EQ(s.modes[1].fallback_share, 0.0);
  EXPECT_NEAR(s.modes[1].e2e.p50, s.modes[0].e2e.p50, 1e-12);
}

// Overlapped mode's base prefill emits no token (the first one comes after the
// appended context), so it pays no LM head: keeping it costs the base prompt's
// kernels without the head and sampling, plus the appended chunk.
TEST(Rag, OverlappedBasePrefillSkipsTheLmHead) {
  testing::Built b;
  Lowered l = lowered("llama-3-8b", "l4", {1, 512, 16}, &b);
  StepCoster c(l.prefill, l.decode, b.target);
  StepShape silent;
  silent.chunks.push_back({256, 256, 1});
  silent.emitting = 0;
  const double base_silent = c.step_s(silent);
  RagOptions o;
  o.modes = {RagMode::overlapped};
  o.preprocess_ms = o.assembly_ms = 0;
  o.base_tokens = 256;
  o.context_tokens = 256;
  o.output_tokens = 16;
  o.samples = 4;
  o.cpu_cores = 8;
  o.runtime_threads = 4;  // retrieval keeps the 4 threads its latency was measured with
  // Retrieval ends just before the base prefill does: keeping it wins.
  o.retrieval_ms = *parse_distribution("fixed:" + std::to_string(0.9 * base_silent * 1e3));
  RagResult r = simulate_rag(l.prefill, l.decode, b.target, o);
  ASSERT_EQ(r.retrieval_scale, 1.0);
  EXPECT_LT(base_silent, r.base_prefill_s - 1e-4);  // the head is 2 ms on an L4
  const double keep = base_silent + r.appended_prefill_s, restart = 0.9 * base_silent + r.full_prefill_s;
  ASSERT_LT(keep, restart);
  EXPECT_NEAR(r.modes[0].ttft.p50, keep, 1e-9);
  // With no context to append, the base prefill emits the first token (LM head paid).
  o.context_tokens = 0;
  o.retrieval_ms = *parse_distribution("fixed:1");
  RagResult z = simulate_rag(l.prefill, l.decode, b.target, o);
  EXPECT_NEAR(z.modes[0].ttft.p50, z.base_prefill_s, 1e-9);
}

// On a CPU target the runtime's share of the cores scales every compute peak: int8
// weights run at the 8-bit dot-product peak, which did not move with the threads.
TEST(Rag, RuntimeThreadsScaleEveryCpuPeak) {
  for (const char* w : {"f32", "int8"}) {
    PlanOptions po;
    po.weights = *parse_weight_format(w);
    testing::Built b = testing::build_plan_graphs("tinyllama-1.1b", "cpu-host", {1, 384, 16}, po);
    b.target.peak_int8 = 3.0 * b.target.peak_fp32;
    Lowered l = testing::lower_plan(b, po);
    RagOptions o;
    o.base_tokens = 128;
    o.context_tokens = 256;
    o.output_tokens = 16;
    o.samples = 4;
    o.runtime_threads = 2;
    double two = simulate_rag(l.prefill, l.decode, b.target, o).full_prefill_s;
    o.runtime_threads = 7;
    double seven = simulate_rag(l.prefill, l.decode, b.target, o).full_prefill_s;
    // Compute-bound prefill: close to 7 / 2 (memory-bound kernels move less).
    EXPECT_GT(two / seven, 2.5) << w;
  }
}

TEST(Rag, RetrievalThreadsFollowAmdahlAndTheAdvice) {
  testing::Built b;
  Lowered l = lowered("llama-3-8b", "h100-sxm", {1, 1280, 128}, &b);
  RagOptions o;
  o.cpu_cores = 20;
  o.samples = 200;
  RagResult r = simulate_rag(l.prefill, l.decode, b.target, o);
  EXPECT_EQ(r.runtime_threads, 12);  // 60% of 20
  EXPECT_EQ(r.retrieval_threads, 8);
  EXPECT_NEAR(r.retrieval_scale, amdahl_time(0.9, 8) / amdahl_time(0.9, 4), 1e-12);
  ASSERT_GE(r.threads.size(), 4u);
  for (size_t i = 1; i < r.threads.size(); ++i) {
    EXPECT_GT(r.threads[i].runtime_threads, r.threads[i - 1].runtime_threads);
    EXPECT_GT(r.threads[i].retrieval_p50_s,
              r.threads[i - 1].retrieval_p50_s);  // fewer threads left
  }
  for (const RagThreadRow& t : r.threads) {
    double share = double(t.runtime_threads) / 20.0;
    EXPECT_EQ(t.advised, share >= 0.5 && share <= 0.7) << t.runtime_threads;
  }
  o.runtime_threads = 20;
  EXPECT_THROW(simulate_rag(l.prefill, l.decode, b.target, o), Error);
}

}  // namespace
}  // namespace lathe
