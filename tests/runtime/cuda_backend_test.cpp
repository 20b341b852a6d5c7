// The CUDA backend against the float64 reference interpreter, the GPU twin of
// cpu_backend_test.cpp: the tiny dense and MoE models x fusion on/off x KV layout x
// weight format x KV dtype x activation dtype x batch shape run prefill and three
// decode steps on the device, and their logits are compared by normalized error.
//
// Tolerances: bf16 activations round every stored activation to 8 significant bits
// (relative RMS error 2^-9 / sqrt(3) = 0.0011 per element), f16 to 11 bits (0.00014);
// they compound over the 2 layers' ~10 stored tensors and the logits: we allow 0.03
// (bf16) and 0.006 (f16), plus 3 x the quantization terms of cpu_backend_test.cpp
// (int8 0.0039 / int4 0.0625 per weight, 0.0057 / 0.09 per KV element, fp8 e4m3 with
// 3 mantissa bits: 0.036 per element); tiny-moe adds 0.15 for a router flip (see
// tolerance()). With 16-bit weights and KV, greedy tokens must equal the reference's
// except at near ties (near_tie(): the logits' own errors can swap the two tokens).
//
// Label `gpu`: every case skips with the reason when no CUDA device is present. The
// one case that runs everywhere checks that the backend then fails with a clear
// "no CUDA device" error rather than crashing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "codegen/cpu/emit_cpu.h"  // kernel_bindings
#include "codegen/cuda/emit_cuda.h"
#include "ir/assert.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cpu/session.h"
#include "runtime/cuda/cuda_session.h"
#include "runtime/tune.h"
#include "support/cpu_run.h"

namespace lathe {
namespace {

bool have_device(std::string* why) {
  static std::string reason;
  static bool ok = CudaApi::device_available(&reason);
  if (why) *why = reason;
  return ok;
}

#define REQUIRE_GPU()                                                   \
  do {                                                                  \
    std::string why_;                                                   \
    if (!have_device(&why_)) GTEST_SKIP() << why_; \
  } while (0)

CudaSessionOptions test_options() {
  CudaSessionOptions o;
  o.nvrtc.cache_dir = LATHE_TEST_CACHE_DIR "/cuda";
  return o;
}

TEST(CudaBackendNoDevice, FailsWithAClearError) {
  if (have_device(nullptr)) GTEST_SKIP() << "a CUDA device is present";
  PlanOptions o;
  o.act_dtype = DType::bf16;
  Plan plan = testing::make_plan("tiny", {1, 8, 4}, o, "h100-sxm");
  WeightStore w = WeightStore::build({&plan.prefill, &plan.decode}, synthetic_source(1), 1);
  try {
    CudaSession s(plan, w, test_options());
    FAIL() << "a CUDA session opened without a device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

struct Config {
  std::string model;
  bool fusion;
  std::string layout, act, weights, kv;
  int batch;
  int prompt = 0;  // 0: the short prompts of prompts_for(); else one prompt this long
};

std::string config_name(const Config& c) {
  std::string s = c.model + "_" + (c.fusion ? "fused" : "unfused") + "_" + c.layout + "_a" + c.act + "_w" + c.weights +
                  "_kv" + c.kv + "_b" + std::to_string(c.batch) + (c.prompt ? "_p" + std::to_string(c.prompt) : "");
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}
void PrintTo(const Config& c, std::ostream* os) { *os << config_name(c); }

double element_error(const std::string& fmt, bool kv) {
  if (fmt == "int8") return kv ? 0.0057 : 0.0039;
  if (fmt == "int4" || fmt == "int4:g32") return kv ? 0.09 : 0.0625;
  if (fmt == "fp8") return 0.036;
  return 0;
}

// The MoE router's top-k is discontinuous: a perturbation of the router logits of
// about 2^-9 relative (int8 weights, or bf16's 8-bit mantissa on the activations)
// can move a token to another expert, which changes that token's output by O(1).
// f16 activations (11-bit mantissa) stay below that on tiny-moe and get no allowance.
double tolerance(const Config& c) {
  double base = c.act == "bf16" ? 0.03 : 0.006;
  double e = element_error(c.weights, false) + element_error(c.kv, true);
  const double routing = c.model == "tiny-moe" ? 0.15 : 0.0;
  if (e == 0) return base + (c.act == "bf16" ? routing : 0.0);
  return base + 3 * e + routing;
}

// A greedy token that differs from the reference's is a near tie when the CUDA
// logits' own errors at the two tokens are large enough to swap them:
// ref[want] - ref[got] <= |out[want] - ref[want]| + |out[got] - ref[got]|.
bool near_tie(const std::vector<float>& out, const std::vector<double>& ref, int32_t got, int32_t want) {
  const double gap = ref[size_t(want)] - ref[size_t(got)];
  return gap <= std::abs(out[size_t(want)] - ref[size_t(want)]) + std::abs(out[size_t(got)] - ref[size_t(got)]);
}

// The plan's prompt capacity for a config: 11 for the short prompts.
int prompt_capacity(int prompt) { return prompt ? prompt : 11; }

std::vector<std::vector<int32_t>> prompts_for(int batch, int64_t vocab, int prompt = 0) {
  std::vector<int> lens = prompt ? std::vector<int>{prompt} : batch == 1 ? std::vector<int>{7} : std::vector<int>{5, 11, 8};
  std::vector<std::vector<int32_t>> p;
  for (size_t s = 0; s < lens.size(); ++s) {
    std::vector<int32_t> t;
    for (int i = 0; i < lens[s]; ++i) t.push_back(int32_t((s * 97 + size_t(i) * 31 + 3) % size_t(vocab)));
    p.push_back(t);
  }
  return p;
}

struct RefRun {
  std::vector<std::vector<std::vector<double>>> logits;  // [step][sequence][vocab]
  std::vector<std::vector<int32_t>> tokens;
};

const RefRun& reference_run(const std::string& model, int batch, int prompt = 0) {
  static std::map<std::tuple<std::string, int, int>, RefRun> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(model, batch, prompt);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  auto g = testing::build_plan_graphs(model, "cpu-host", {batch, prompt_capacity(prompt), 4}, PlanOptions{});
  Reference ref(g.prefill, g.decode, synthetic_source(42));
  RefRun r;
  r.logits.push_back(ref.prefill(prompts_for(batch, g.decode.attrs.i("vocab"), prompt)));
  for (int step = 0; step < 3; ++step) {
    std::vector<int32_t> next;
    for (const auto& l : r.logits.back())
      next.push_back(int32_t(std::max_element(l.begin(), l.end()) - l.begin()));
    r.tokens.push_back(next);
    r.logits.push_back(ref.decode(next));
  }
  return cache[key] = r;
}

class CudaBackend : public ::testing::TestWithParam<Config> {};

TEST_P(CudaBackend, MatchesTheReference) {
  REQUIRE_GPU();
  const Config& c = GetParam();
  CudaApi probe;
  if ((c.weights == "fp8" || c.kv == "fp8") && probe.device().compute_capability < 89)
    GTEST_SKIP() << "fp8 needs sm_89 or newer";
  PlanOptions o;
  o.act_dtype = parse_kv_dtype(c.act);
  o.weights = parse_weight_format(c.weights);
  o.kv_dtype = parse_kv_dtype(c.kv);
  o.kv_layout = parse_kv_layout(c.layout);
  if (!c.fusion)
    for (auto p : known_pass_names())
      if (p.starts_with("fuse-") || p == "flash-attention") o.pass_enabled[std::string(p)] = false;
  Plan plan = testing::make_plan(c.model, {c.batch, prompt_capacity(c.prompt), 4}, o, "h100-sxm");
  WeightStore w = WeightStore::build({&plan.prefill, &plan.decode}, synthetic_source(42), 2);
  CudaSession s(plan, w, test_options());
  const RefRun& ref = reference_run(c.model, c.batch, c.prompt);
  const double tol = tolerance(c);
  const bool exact_tokens = element_error(c.weights, false) + element_error(c.kv, true) == 0;
  StepResult r = s.prefill(prompts_for(c.batch, plan.decode.attrs.i("vocab"), c.prompt));
  double worst = 0;
  int token_mismatches = 0, unexplained = 0;
  for (size_t step = 0; step < ref.logits.size(); ++step) {
    for (size_t q = 0; q < ref.logits[step].size(); ++q) {
      double e = normalized_error(r.logits[q], ref.logits[step][q]);
      worst = std::max(worst, e);
      EXPECT_LT(e, tol) << "step " << step << " sequence " << q;
      const auto& want_l = ref.logits[step][q];
      int32_t want = int32_t(std::max_element(want_l.begin(), want_l.end()) - want_l.begin());
      if (r.argmax[q] != want) {
        ++token_mismatches;
        const bool tie = near_tie(r.logits[q], want_l, r.argmax[q], want);
        if (!tie) ++unexplained;
        // 16-bit weights and KV: greedy tokens equal the reference's except at near ties.
        if (exact_tokens) {
          EXPECT_TRUE(tie) << "greedy token " << r.argmax[q] << " differs from the reference's " << want
                           << " at step " << step << " sequence " << q << " and is not a near tie";
        }
      }
    }
    if (step + 1 < ref.logits.size()) r = s.decode(ref.tokens[step]);
  }
  // scripts/gpu-check.sh collects the per-config errors for its table.
  if (const char* path = std::getenv("LATHE_GPU_REPORT")) {
    std::FILE* f = std::fopen(path, "a");
    if (f) {
      std::fprintf(f, "%s,%s,%d,%s,%s,%s,%s,%d,%.6g,%.6g,%d,%d\n", c.model.c_str(), c.fusion ? "fused" : "unfused",
                   c.batch, c.layout.c_str(), c.act.c_str(), c.weights.c_str(), c.kv.c_str(), exact_tokens ? 1 : 0,
                   worst, tol, token_mismatches, unexplained);
      std::fclose(f);
    }
  }
}

std::vector<Config> all_configs() {
  std::vector<Config> v;
  for (const char* model : {"tiny", "tiny-moe"})
    for (const char* act : {"bf16", "f16"})
      for (bool fusion : {true, false})
        for (const char* layout : {"LHTD", "LTHD", "TLHD", "paged:4"}) {
          for (const char* weights : {"16", "int8", "int4:g32", "fp8"})
            for (const char* kv : {"16", "int8", "int4", "fp8"}) {
              // Every weight format with 16-bit KV, every KV dtype with 16-bit weights,
              // and the int8/int4 cross for batch 3.
              std::string wf = std::string(weights) == "16" ? act : weights;
              std::string kf = std::string(kv) == "16" ? act : kv;
              bool plain_w = wf == act, plain_kv = kf == act;
              if (plain_w || plain_kv) v.push_back({model, fusion, layout, act, wf, kf, 1});
              if ((plain_w && plain_kv) || (wf == "int4:g32" && kf == "int8"))
                v.push_back({model, fusion, layout, act, wf, kf, 3});
            }
        }
  // A 150-token prompt: several query tiles in flash attention and several context
  // splits in decode attention (the short prompts exercise one of each).
  for (const char* model : {"tiny", "tiny-moe"})
    for (const char* layout : {"LHTD", "paged:4"})
      for (const char* kv : {"bf16", "int8"}) v.push_back({model, true, layout, "bf16", "bf16", kv, 1, 150});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Matrix, CudaBackend, ::testing::ValuesIn(all_configs()),
                         [](const ::testing::TestParamInfo<Config>& i) { return config_name(i.param); });

// Prefill of N tokens then decode equals feeding the tokens one by one (KV cache
// written by prefill is read correctly by decode), and CUDA graph replay equals
// eager launches.
TEST(CudaBackendKv, PrefillThenDecodeEqualsTokenByToken) {
  REQUIRE_GPU();
  for (const char* layout : {"LHTD", "LTHD", "TLHD", "paged:4"})
    for (const char* kv : {"f16", "int8"}) {
      PlanOptions o;
      o.act_dtype = DType::f16;
      o.kv_dtype = parse_kv_dtype(kv);
      o.kv_layout = parse_kv_layout(layout);
      Plan plan = testing::make_plan("tiny", {1, 9, 10}, o, "h100-sxm");
      WeightStore w = WeightStore::build({&plan.prefill, &plan.decode}, synthetic_source(42), 1);
      std::vector<int32_t> toks = {3, 14, 15, 92, 65, 35, 89, 79, 32};
      CudaSession a(plan, w, test_options());
      a.prefill({std::vector<int32_t>(toks.begin(), toks.end() - 1)});
      StepResult ra = a.decode({toks.back()});
      CudaSessionOptions eager = test_options();
      eager.graphs = false;
      CudaSession b(plan, w, eager);
      StepResult rb = b.prefill({{toks[0]}});
      for (size_t i = 1; i < toks.size(); ++i) rb = b.decode({toks[i]});
      std::vector<double> ref(rb.logits[0].begin(), rb.logits[0].end());
      EXPECT_LT(normalized_error(ra.logits[0], ref), 5e-3) << layout << " " << kv;
    }
}

// Every candidate `lathe tune --backend cuda` times computes what the default kernels
// compute: round r of the tuner (every key at its r-th candidate) gives the default
// plan's logits over a prefill and three decode steps (fed the default run's tokens).
// Loads in flight and warps per block keep each row's summation order; a different
// split count of decode attention merges its partial softmaxes in another order and
// rounds the merged output to bf16 from different partials, hence the tolerance (the
// bound of the KV-layout comparison above): on an H200, tiny-moe with int4:g32 weights
// differed by 2.9e-3 at the third decode step under splits 8 and 16. wide-rows (reductions of 1024 and 4096) is where the
// loads candidates change the kernels; tiny-moe has the expert GEMVs; batch 6 runs the
// splits of several sequences (its dense matmuls go to cuBLAS and lm_head to the
// tensor-core GEMV, neither tuned: cuda_batched_min_rows; the expert GEMVs keep theirs).
TEST(CudaTune, EveryCandidateGivesTheDefaultsLogits) {
  REQUIRE_GPU();
  const std::string wide = std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/wide-rows.toml";
  for (const std::string& model : {wide, std::string("tiny-moe")})
    for (const char* wf : {"bf16", "int4:g32"})
      for (int batch : {1, 6}) {
        PlanOptions o;
        o.act_dtype = DType::bf16;
        o.weights = parse_weight_format(wf);
        Plan base = testing::make_plan(model, {batch, 40, 4}, o, "h100-sxm");
        WeightStore w = WeightStore::build({&base.prefill, &base.decode}, synthetic_source(42), 2);
        std::vector<std::vector<int32_t>> prompts;
        for (int s = 0; s < batch; ++s) {
          std::vector<int32_t> t;
          for (int i = 0; i < 40 - 5 * s; ++i) t.push_back(int32_t((s * 97 + i * 31 + 3) % 512));
          prompts.push_back(t);
        }
        std::vector<std::vector<int32_t>> tokens;  // the default run's, fed to every run
        auto run = [&](const Plan& plan) {
          CudaSession s(plan, w, test_options());
          std::vector<std::vector<std::vector<float>>> out;
          StepResult r = s.prefill(prompts);
          out.push_back(r.logits);
          for (int step = 0; step < 3; ++step) {
            if (tokens.size() <= size_t(step)) tokens.push_back(r.argmax);
            r = s.decode(tokens[size_t(step)]);
            out.push_back(r.logits);
          }
          return out;
        };
        const auto want = run(base);
        std::map<std::pair<std::string, std::string>, std::vector<std::map<std::string, int64_t>>> keys;
        size_t rounds = 0;
        for (const Graph* g : {&base.prefill, &base.decode})
          for (NodeId id : g->topo_order())
            if (auto k = tuning_key(*g, id, "cuda")) {
              auto it = keys.try_emplace({k->kind, k->shape}, tuning_candidates(k->kind, "cuda", k->shape)).first;
              rounds = std::max(rounds, it->second.size());
            }
        ASSERT_GT(rounds, 2u) << model;
        for (size_t r = 1; r < rounds; ++r) {
          Plan plan = base;
          std::string what;
          for (const auto& [k, cands] : keys)
            if (r < cands.size()) {
              for (Graph* g : {&plan.prefill, &plan.decode}) apply_params(*g, k.first, k.second, cands[r], "cuda");
              for (const auto& [p, v] : cands[r]) what += " " + p + "=" + std::to_string(v);
            }
          const auto got = run(plan);
          for (size_t step = 0; step < want.size(); ++step)
            for (size_t q = 0; q < want[step].size(); ++q) {
              std::vector<double> ref(want[step][q].begin(), want[step][q].end());
              EXPECT_LT(normalized_error(got[step][q], ref), 5e-3)
                  << model << " " << wf << " batch " << batch << " round " << r << what << " step " << step
                  << " sequence " << q;
            }
        }
      }
}

// The tuner end to end on tiny: every key's candidates are timed, the file names
// only valid parameters and round-trips, and the tuned plan runs.
TEST(CudaTune, TunesTinyAndTheFileApplies) {
  REQUIRE_GPU();
  PlanOptions o;
  o.act_dtype = DType::bf16;
  Plan plan = testing::make_plan("tiny", {1, 64, 8}, o, "h100-sxm");
  WeightStore w = WeightStore::build({&plan.prefill, &plan.decode}, synthetic_source(1), 2);
  TuneOptions t;
  t.reps = 2;
  t.decode_steps = 4;
  TuneResult r = tune_cuda(plan, w, LATHE_TEST_CACHE_DIR "/cuda", t);
  EXPECT_EQ(r.file.backend, "cuda");
  EXPECT_NE(r.file.machine.find("sm_"), std::string::npos) << r.file.machine;
  std::set<std::string> kinds;
  for (const TuningEntry& e : r.all) {
    kinds.insert(e.kind);
    EXPECT_EQ(e.candidates.size(), tuning_candidates(e.kind, "cuda", e.shape).size()) << e.shape;
    for (const auto& [params, us] : e.candidates) EXPECT_GT(us, 0) << e.kind << " " << e.shape;
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"gemv", "decode_attention"}));
  TuningFile back = tuning_from_json(tuning_to_json(r.file), "t.json");
  Plan tuned = plan;
  EXPECT_EQ(apply_tuning(tuned, back) > 0, !back.entries.empty());
  CudaSession s(tuned, w, test_options());
  StepResult step = s.prefill({std::vector<int32_t>(64, 3)});
  EXPECT_EQ(step.argmax.size(), 1u);
}

TEST(CudaBackendErrors, BatchBeyondThePlanIsAnError) {
  REQUIRE_GPU();
  PlanOptions o;
  o.act_dtype = DType::bf16;
  Plan plan = testing::make_plan("tiny", {1, 4, 2}, o, "h100-sxm");
  WeightStore w = WeightStore::build({&plan.prefill, &plan.decode}, synthetic_source(1), 1);
  CudaSession s(plan, w, test_options());
  EXPECT_THROW(s.prefill({{1, 2}, {3, 4}}), Error);
  EXPECT_THROW(s.prefill({{1, 2, 3, 4, 5}}), Error);
  EXPECT_THROW(s.prefill({{1, 9999}}), Error);
  s.prefill({{1, 2, 3, 4}});
  s.decode({5});
  s.decode({6});
  EXPECT_THROW(s.decode({7}), Error);
}

// Host-side, no device: CudaSession binds every kernel buffer by cuda_binding(). Each
// one it sends to the activation arena has an arena offset (the first GPU run failed
// here: attention's KV-cache view has none and must be bound to the cache), and every
// attention node reads the cache.
TEST(CudaBackendPlan, EveryBindingHasItsDeviceBuffer) {
  for (const char* model : {"tiny", "tiny-moe"}) {
    Plan plan = testing::make_plan(model, {1, 11, 4}, PlanOptions{}, "h100-sxm");
    for (const Graph* g : {&plan.prefill, &plan.decode})
      for (NodeId id : g->topo_order()) {
        const Node& n = g->node(id);
        bool cache = false;
        for (const KernelBinding& kb : kernel_bindings(*g, id)) {
          const Value& v = g->value(kb.value);
          const CudaBinding where = cuda_binding(*g, kb);
          cache |= where == CudaBinding::kv_cache;
          if (where == CudaBinding::arena) {
            EXPECT_GE(v.offset, 0) << model << " " << g->name << " node " << n.name << " value " << v.name;
          }
        }
        if (n.kind == OpKind::flash_attention || n.kind == OpKind::decode_attention) {
          EXPECT_TRUE(cache) << model << " " << g->name << " node " << n.name << " is not bound to the KV cache";
        }
      }
  }
}

// The device-memory check counts the kernel scratch, which holds the dequantized weight
// copies of the cuBLAS route: with int4 weights at least the gate/up pair's bf16 copy.
TEST(CudaBackendPlan, SessionBytesCountTheKernelScratch) {
  PlanOptions o;
  o.act_dtype = DType::bf16;
  o.weights = parse_weight_format("int4:g32");
  Plan plan = testing::make_plan("tiny", {2, 40, 4}, o, "h100-sxm");
  int64_t copies = 0;
  for (NodeId id : plan.prefill.topo_order()) {
    const CudaKernel k = emit_cuda_kernel(plan.prefill, id);
    if (k.blas.dequant_entry < 0) continue;
    int64_t bytes = 0;
    for (int i = 0; i < k.blas.nw; ++i) bytes += k.blas.n[i] * k.blas.K * 2;
    copies = std::max(copies, bytes);
  }
  ASSERT_GT(copies, 0) << "int4 prefill GEMMs take the cuBLAS route through a dequantized copy";
  EXPECT_GE(cuda_session_bytes(plan), cpu_session_bytes(plan) + double(copies));
}

// Gains stored as f32 (or anything else) reach the device in the activation dtype.
TEST(CudaBackendPlan, GainsAreUploadedInTheActivationDtype) {
  WeightTensor t;
  t.name = "norm";
  t.shape = {4};
  t.format.dtype = DType::f32;
  const float v[4] = {1.0f, 1.5f, -2.0f, 0.1f};
  t.payload = AlignedBuffer(16);
  std::memcpy(t.payload.data(), v, 16);
  std::vector<unsigned char> bf = cuda_gain_payload(t, DType::bf16), hf = cuda_gain_payload(t, DType::f16);
  ASSERT_EQ(bf.size(), 8u);
  ASSERT_EQ(hf.size(), 8u);
  uint16_t b[4], h[4];
  std::memcpy(b, bf.data(), 8);
  std::memcpy(h, hf.data(), 8);
  EXPECT_EQ(b[0], 0x3f80);  // bf16 1.0
  EXPECT_EQ(b[1], 0x3fc0);  // 1.5
  EXPECT_EQ(b[2], 0xc000);  // -2.0
  EXPECT_EQ(h[0], 0x3c00);  // f16 1.0
  EXPECT_EQ(h[1], 0x3e00);  // 1.5
  EXPECT_EQ(h[2], 0xc000);  // -2.0
  // 0.1 rounds to the nearest of each format.
  EXPECT_EQ(b[3], 0x3dcd);
  EXPECT_EQ(h[3], 0x2e66);
}
}  // namespace
}  // namespace lathe
