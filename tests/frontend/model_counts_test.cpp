// Parameter counts against the published figures in ../shared/REFERENCE.md, and
// FLOPs per token against a hand calculation.
#include <gtest/gtest.h>

#include <cmath>

#include "frontend/specs.h"

namespace lathe {
namespace {

void expect_within(double got, double want, double rel, const std::string& what) {
  EXPECT_LE(std::fabs(got - want) / want, rel) << what << ": got " << got << ", published " << want;
}

TEST(ModelCounts, MatchPublishedWithinHalfPercent) {
  expect_within(double(load_model("llama-2-7b").param_count()), 6.74e9, 0.005, "llama-2-7b");
  expect_within(double(load_model("llama-3-8b").param_count()), 8.03e9, 0.005, "llama-3-8b");
  expect_within(double(load_model("llama-3-70b").param_count()), 70.6e9, 0.005, "llama-3-70b");
  expect_within(double(load_model("mistral-7b").param_count()), 7.24e9, 0.005, "mistral-7b");
  ModelSpec mx = load_model("mixtral-8x7b");
  expect_within(double(mx.param_count()), 46.7e9, 0.005, "mixtral total");
  expect_within(double(mx.active_param_count()), 12.9e9, 0.005, "mixtral active");
  expect_within(double(load_model("tinyllama-1.1b").param_count()), 1.1e9, 0.005, "tinyllama");
  // Figures the model cards publish (not in REFERENCE.md): Llama 3.1 8B / 70B / 405B,
  // Mixtral 8x22B 141 B in total and 39 B active.
  expect_within(double(load_model("llama-3.1-8b").param_count()), 8.03e9, 0.005, "llama-3.1-8b");
  expect_within(double(load_model("llama-3.1-70b").param_count()), 70.6e9, 0.005, "llama-3.1-70b");
  expect_within(double(load_model("llama-3.1-405b").param_count()), 405e9, 0.005, "llama-3.1-405b");
  ModelSpec mx22 = load_model("mixtral-8x22b");
  expect_within(double(mx22.param_count()), 141e9, 0.005, "mixtral-8x22b total");
  expect_within(double(mx22.active_param_count()), 39e9, 0.005, "mixtral-8x22b active");
}

// Llama 3.1 is Llama 3 with a 128k context through llama3 RoPE scaling: the same shapes
// and parameters, a longer max_context, and the scaling of Meta's config.json.
TEST(ModelCounts, Llama31IsLlama3WithScaledRope) {
  for (const auto& [l3, l31] : {std::pair{"llama-3-8b", "llama-3.1-8b"}, std::pair{"llama-3-70b", "llama-3.1-70b"}}) {
    const ModelSpec a = load_model(l3), b = load_model(l31);
    EXPECT_EQ(a.param_count(), b.param_count()) << l31;
    EXPECT_EQ(a.max_context, 8192) << l3;
    EXPECT_EQ(b.max_context, 131072) << l31;
    ASSERT_TRUE(b.rope_scaling.has_value()) << l31;
    EXPECT_EQ(b.rope_scaling->type, "llama3");
    EXPECT_EQ(b.rope_scaling->factor, 8.0);
    EXPECT_EQ(b.rope_scaling->original_max_context, 8192);
    EXPECT_FALSE(a.rope_scaling.has_value()) << l3;
  }
}

TEST(ModelCounts, ExactLlama3_8bBreakdown) {
  // Hand calculation: embeddings and LM head 2 x 128256 x 4096; per layer q,o 2 x 4096^2,
  // k,v 2 x 4096 x 1024, FFN 3 x 4096 x 14336, two norms 2 x 4096; final norm 4096.
  int64_t layer = 2LL * 4096 * 4096 + 2LL * 4096 * 1024 + 3LL * 4096 * 14336 + 2 * 4096;
  int64_t want = 2LL * 128256 * 4096 + 32 * layer + 4096;
  EXPECT_EQ(load_model("llama-3-8b").param_count(), want);
  EXPECT_EQ(want, 8030261248LL);
}

TEST(ModelCounts, SmallModelsAreInTheirSizeBands) {
  int64_t tiny = load_model("tiny").param_count();
  EXPECT_GT(tiny, 100'000);
  EXPECT_LT(tiny, 1'000'000);
  int64_t small = load_model("small").param_count();
  EXPECT_GT(small, 15'000'000);
  EXPECT_LT(small, 110'000'000);
}

TEST(ModelCounts, FlopsPerDecodeTokenByHand) {
  ModelSpec m = load_model("llama-3-8b");
  // 2 FLOPs per matmul weight (all but the embedding lookup) + QK^T and PV.
  double matmul = 2.0 * double(m.param_count() - m.vocab * m.hidden - (2 * 32 + 1) * 4096);
  double attn = 2.0 * 2.0 * 1000 * 128 * 32 * 32;
  EXPECT_DOUBLE_EQ(m.flops_per_token(1000), matmul + attn);
  // About 2 x active params (within the attention term and norms).
  EXPECT_NEAR(m.flops_per_token(1) / (2.0 * double(m.active_param_count())), 1.0, 0.07);
  // MoE: only top_k experts count.
  ModelSpec mx = load_model("mixtral-8x7b");
  double active_matmul = double(mx.active_param_count()) - double(mx.vocab * mx.hidden) - (2 * 32 + 1) * 4096.0;
  EXPECT_NEAR(mx.flops_per_token(0), 2.0 * active_matmul, 1.0);
}

TEST(ModelCounts, KvBytesPerToken) {
  ModelSpec m = load_model("llama-3-8b");
  EXPECT_DOUBLE_EQ(m.kv_bytes_per_token(16), 2.0 * 32 * 8 * 128 * 2);  // 128 KiB
  EXPECT_DOUBLE_EQ(load_model("llama-2-7b").kv_bytes_per_token(16), 2.0 * 32 * 32 * 128 * 2);
}

}  // namespace
}  // namespace lathe
