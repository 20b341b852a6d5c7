// The CPU backend against the reference interpreter, in the style of ggml's
// test-backend-ops: every combination of model (dense, MoE) x fusion on/off x KV
// layout x weight format x KV dtype x batch shape runs prefill and three decode
// steps with poisoned activations, and its logits are compared with the float64
// reference by normalized error ||a - b|| / ||b||.
//
// Tolerances: f32 paths 1e-4. Quantized paths: the relative RMS error of one
// quantized element is e = step / sqrt(12) / std; for uniform values in [-a, a]
// (std a / sqrt(3)) int8 (step a / 127) gives e8 = 1 / 254 = 0.0039 and int4 (Q4_0
// rule, step a / 8) gives e4 = 1 / 16 = 0.0625. K and V vectors are peakier than
// uniform (amax ~ 2.5 std for Gaussian-like values), raising e to 0.0057 / 0.09.
// GEMVs and GEMMs with integer weights also quantize their activations to int8 per
// 32-element block for integer dot products (int8 weights only where the host has VNNI)
// (codegen/cpu/kernel_prelude.h), which adds e_x = 1 / 254 = 0.0039. Errors add along the network; we allow
// 3 x (e_weights + e_x + e_kv).
// MoE adds a discrete effect: quantization noise can flip a near-tied top-2 expert
// choice for one token, which shows as an isolated spike in one sequence at one step
// (measured 0.1-0.2 on tiny-moe with int4); quantized MoE paths get 0.15 more.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "ir/assert.h"
#include "support/cpu_run.h"

namespace lathe {
namespace {

struct Config {
  std::string model;
  bool fusion;
  std::string layout, weights, kv;
  int batch;  // 1: one prompt of 7 tokens; 3: prompts of 5, 11 and 8 tokens
};

std::string config_name(const Config& c) {
  std::string s = c.model + "_" + (c.fusion ? "fused" : "unfused") + "_" + c.layout + "_w" + c.weights + "_kv" + c.kv +
                  "_b" + std::to_string(c.batch);
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

double element_error(const std::string& fmt, bool kv) {
  if (fmt == "int8") return kv ? 0.0057 : 0.0039;
  if (fmt == "int4" || fmt == "int4:g32") return kv ? 0.09 : 0.0625;
  return 0;
}

double tolerance(const Config& c) {
  double e = element_error(c.weights, false) + element_error(c.kv, true);
  if (e == 0) return 1e-4;
  if (c.weights != "f32") e += 0.0039;  // int8 activations of integer dot products
  return 3 * e + (c.model == "tiny-moe" ? 0.15 : 0.0);
}

std::vector<std::vector<int32_t>> prompts_for(int batch, int64_t vocab) {
  std::vector<int> lens = batch == 1 ? std::vector<int>{7} : std::vector<int>{5, 11, 8};
  std::vector<std::vector<int32_t>> p;
  for (size_t s = 0; s < lens.size(); ++s) {
    std::vector<int32_t> t;
    for (int i = 0; i < lens[s]; ++i) t.push_back(int32_t((s * 97 + size_t(i) * 31 + 3) % size_t(vocab)));
    p.push_back(t);
  }
  return p;
}

// The reference's logits for prefill and 3 greedy decode steps (its own tokens),
// computed once per (model, batch).
struct RefRun {
  std::vector<std::vector<std::vector<double>>> logits;  // [step][sequence][vocab]
  std::vector<std::vector<int32_t>> tokens;               // [step][sequence] fed at step+1
};

const RefRun& reference_run(const std::string& model, int batch) {
  static std::map<std::pair<std::string, int>, RefRun> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(model, batch);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  auto g = testing::build_plan_graphs(model, "cpu-host", {batch, 11, 4}, PlanOptions{});
  Reference ref(g.prefill, g.decode, synthetic_source(42));
  RefRun r;
  auto prompts = prompts_for(batch, g.decode.attrs.i("vocab"));
  r.logits.push_back(ref.prefill(prompts));
  for (int step = 0; step < 3; ++step) {
    std::vector<int32_t> next;
    for (const auto& l : r.logits.back())
      next.push_back(int32_t(std::max_element(l.begin(), l.end()) - l.begin()));
    r.tokens.push_back(next);
    r.logits.push_back(ref.decode(next));
  }
  return cache[key] = r;
}

const WeightStore& weights_for(const std::string& model, const std::string& fmt, const Plan& p) {
  static std::map<std::pair<std::string, std::string>, WeightStore> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(model, fmt);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  return cache[key] = WeightStore::build({&p.prefill, &p.decode}, synthetic_source(42), 2);
}

void PrintTo(const Config& c, std::ostream* os) { *os << config_name(c); }

class CpuBackend : public ::testing::TestWithParam<Config> {};

TEST_P(CpuBackend, MatchesTheReference) {
  const Config& c = GetParam();
  PlanOptions o;
  o.weights = parse_weight_format(c.weights);
  o.kv_dtype = parse_kv_dtype(c.kv);
  o.kv_layout = parse_kv_layout(c.layout);
  if (!c.fusion)
    for (auto p : known_pass_names())
      if (p.starts_with("fuse-") || p == "flash-attention") o.pass_enabled[std::string(p)] = false;
  Plan plan = testing::make_plan(c.model, {c.batch, 11, 4}, o);
  const WeightStore& w = weights_for(c.model, c.weights, plan);
  SessionOptions so;
  so.poison = true;
  so.threads = 2;
  CpuSession s(plan, w, testing::test_jit(), so);
  const RefRun& ref = reference_run(c.model, c.batch);
  const double tol = tolerance(c);
  auto prompts = prompts_for(c.batch, plan.decode.attrs.i("vocab"));
  StepResult r = s.prefill(prompts);
  for (size_t step = 0; step < ref.logits.size(); ++step) {
    for (size_t q = 0; q < ref.logits[step].size(); ++q) {
      double e = normalized_error(r.logits[q], ref.logits[step][q]);
      EXPECT_LT(e, tol) << "step " << step << " sequence " << q;
      if (tol == 1e-4) {
        int32_t mine = int32_t(std::max_element(r.logits[q].begin(), r.logits[q].end()) - r.logits[q].begin());
        int32_t want = int32_t(std::max_element(ref.logits[step][q].begin(), ref.logits[step][q].end()) -
                               ref.logits[step][q].begin());
        EXPECT_EQ(mine, want) << "greedy token differs at step " << step;
        EXPECT_EQ(r.argmax[q], want) << "the plan's sample kernel disagrees";
      }
    }
    if (step + 1 < ref.logits.size()) r = s.decode(ref.tokens[step]);
  }
}

std::vector<Config> all_configs() {
  std::vector<Config> v;
  for (const char* model : {"tiny", "tiny-moe"})
    for (bool fusion : {true, false})
      for (const char* layout : {"LHTD", "LTHD", "TLHD", "paged:4"})
        for (const char* weights : {"f32", "int8", "int4:g32"})
          for (const char* kv : {"f32", "int8", "int4"})
            for (int batch : {1, 3}) v.push_back({model, fusion, layout, weights, kv, batch});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Matrix, CpuBackend, ::testing::ValuesIn(all_configs()),
                         [](const ::testing::TestParamInfo<Config>& i) { return config_name(i.param); });

// Quantized GEMVs pair 32-element blocks; a model whose reduction lengths hold an odd
// number of blocks runs the unpaired last block too (tests/fixtures/odd-blocks.toml).
const std::string kOddBlocks = std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/odd-blocks.toml";
INSTANTIATE_TEST_SUITE_P(OddBlocks, CpuBackend,
                         ::testing::Values(Config{kOddBlocks, true, "LHTD", "int4:g32", "f32", 1},
                                           Config{kOddBlocks, true, "LHTD", "int4:g32", "f32", 3},
                                           Config{kOddBlocks, true, "LHTD", "int8", "f32", 3}),
                         [](const ::testing::TestParamInfo<Config>& i) {
                           return std::string("odd_blocks_") + (i.param.weights == "int8" ? "int8" : "int4") +
                                  "_b" + std::to_string(i.param.batch);
                         });

// RoPE scaling (llama3): the rope / rope_kvwrite kernels' divisor tables, fused and
// unfused, against the reference interpreter (tests/fixtures/rope-llama3.toml).
const std::string kRopeLlama3 = std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/rope-llama3.toml";
INSTANTIATE_TEST_SUITE_P(RopeScaling, CpuBackend,
                         ::testing::Values(Config{kRopeLlama3, true, "LHTD", "f32", "f32", 3},
                                           Config{kRopeLlama3, false, "paged:4", "f32", "f32", 3}),
                         [](const ::testing::TestParamInfo<Config>& i) {
                           return std::string("rope_llama3_") + (i.param.fusion ? "fused" : "unfused");
                         });

// KV-cache consistency: prefill of N tokens then decode gives the same logits as
// feeding the same tokens one by one.
TEST(CpuBackendKv, PrefillThenDecodeEqualsTokenByToken) {
  for (const char* layout : {"LHTD", "LTHD", "TLHD", "paged:4"})
    for (const char* kv : {"f32", "int8"}) {
      PlanOptions o;
      o.kv_dtype = parse_kv_dtype(kv);
      o.kv_layout = parse_kv_layout(layout);
      Plan plan = testing::make_plan("tiny", {1, 9, 10}, o);
      const WeightStore& w = weights_for("tiny", "model", plan);
      std::vector<int32_t> toks = {3, 14, 15, 92, 65, 35, 89, 79, 32};
      CpuSession a(plan, w, testing::test_jit(), {2, true, false});
      StepResult ra = a.prefill({std::vector<int32_t>(toks.begin(), toks.end() - 1)});
      ra = a.decode({toks.back()});
      CpuSession b(plan, w, testing::test_jit(), {2, true, false});
      StepResult rb = b.prefill({{toks[0]}});
      for (size_t i = 1; i < toks.size(); ++i) rb = b.decode({toks[i]});
      std::vector<double> ref(rb.logits[0].begin(), rb.logits[0].end());
      EXPECT_LT(normalized_error(ra.logits[0], ref), 1e-5) << layout << " " << kv;
    }
}

TEST(CpuBackendErrors, BatchBeyondThePlanIsAnError) {
  Plan plan = testing::make_plan("tiny", {1, 4, 2}, PlanOptions{});
  const WeightStore& w = weights_for("tiny", "model", plan);
  CpuSession s(plan, w, testing::test_jit(), {2, false, false});
  EXPECT_THROW(s.prefill({{1, 2}, {3, 4}}), Error);
  EXPECT_THROW(s.prefill({{1, 2, 3, 4, 5}}), Error);   // prompt longer than planned
  EXPECT_THROW(s.prefill({{1, 9999}}), Error);         // outside the vocabulary
  s.prefill({{1, 2, 3, 4}});
  s.decode({5});
  s.decode({6});
  EXPECT_THROW(s.decode({7}), Error);  // the cache holds prompt + gen = 6 positions
}

}  // namespace
}  // namespace lathe
