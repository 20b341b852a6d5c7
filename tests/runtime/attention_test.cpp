// The CPU flash-attention kernel (attention_kernel in codegen/cpu/kernel_lib.h: keys in
// blocks of 16, scores of a row's GQ heads together, one vector exp per block),
// JIT-compiled like a kernel, against float64 causal softmax attention over the same
// cache. Shapes cover one query head per KV head up to eight, head sizes 32-128, rows
// that end inside a key block, a prefill with past tokens and a decode row, and the
// decode kernel split over the context (attention_split_kernel), with empty parts. Every
// KV format: the harness stores the random cache with kv_store (I8 / I4 quantized with
// their scales) and reads it back with kv_load for the reference, so the check is the
// attention over the values the cache holds (decode reads the formats in place, with
// I8 / I4 scales applied to the scores and probabilities; prefill converts blocks).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/cpu/emit_cpu.h"
#include "codegen/cpu/kernel_prelude.h"
#include "support/cpu_run.h"

namespace lathe {
namespace {

const char* kHarness = R"(
static void serial_for(void*, long n, long, LatheBody body, void* closure) { body(closure, 0, n, 0); }
// kvf: the cache's values, LHTD [2][KVH][tcap][D] f32; stored in format KF, then read
// back into kvf (what the kernel sees), then attention over it.
template <int KF, int KVH, int H, int D, int QT>
static void run(float* kvf, int tcap, const float* q, int past, int len, float* o) {
  static float scratch[1 << 12];
  static unsigned char cache[2 * 8 * 160 * 128 * 4];
  static unsigned short scales[2 * 8 * 160];
  float* sp[1] = {scratch};
  LatheCtx c = {};
  c.parallel_for = serial_for;
  c.threads = 1;
  c.scratch = sp;
  c.scratch_floats = 1 << 12;
  c.shared = scratch;
  c.shared_floats = 1 << 12;
  c.kv = cache;
  c.kv_scales = scales;
  for (long v = 0; v < 2L * KVH * tcap; ++v) {
    lk::kv_store<KF, D>(&c, v, kvf + v * D);
    lk::kv_load<KF, D>(&c, v, kvf + v * D);
  }
  LatheSeq s = {0, past, len, 0};
  static int rows[256], pos[256];
  for (int i = 0; i < len; ++i) rows[i] = 0, pos[i] = past + i;
  LatheStep st = {1, len, &s, rows, pos, nullptr, 0};
  const float scale = 1.0f / __builtin_sqrtf(float(D));
  if (QT < 0)  // decode split over the context in -QT parts (flash-decoding)
    lk::attention_split_kernel<KF, lk::LHTD, 1, KVH, 160, 16, 1, H, D, (QT < 0 ? -QT : 1)>(&c, &st, 0, q, o, scale);
  else
    lk::attention_kernel<KF, lk::LHTD, 1, KVH, 160, 16, 1, H, D, (QT > 0 ? QT : 1)>(&c, &st, 0, q, o, scale);
}
#define ATTN1(name, KF, KVH, H, D, QT) \
  extern "C" void name(float* kv, int tcap, const float* q, int past, int len, float* o) { run<KF, KVH, H, D, QT>(kv, tcap, q, past, len, o); }
#define ATTN(name, KVH, H, D, QT) \
  ATTN1(name##_f32, lk::F32, KVH, H, D, QT) ATTN1(name##_f16, lk::F16, KVH, H, D, QT) \
  ATTN1(name##_bf16, lk::BF16, KVH, H, D, QT) ATTN1(name##_int8, lk::I8, KVH, H, D, QT) \
  ATTN1(name##_int4, lk::I4, KVH, H, D, QT)
ATTN(attn_4_4_64_16, 4, 4, 64, 16)
ATTN(attn_4_8_64_16, 4, 8, 64, 16)
ATTN(attn_2_8_128_16, 2, 8, 128, 16)
ATTN(attn_1_8_128_8, 1, 8, 128, 8)
ATTN(attn_2_8_64_1, 2, 8, 64, 1)
ATTN(attn_4_8_32_16, 4, 8, 32, 16)
ATTN(attn_2_8_64_s3, 2, 8, 64, -3)
ATTN(attn_4_4_128_s5, 4, 4, 128, -5)
ATTN(attn_1_8_32_1, 1, 8, 32, 1)
ATTN(attn_1_8_128_1, 1, 8, 128, 1)
ATTN(attn_4_4_64_1, 4, 4, 64, 1)
)";

using Fn = void (*)(float*, int, const float*, int, int, float*);

struct Shape {
  int kvh, h, d, qt, past, len;
};

class CpuAttention : public ::testing::TestWithParam<std::tuple<Shape, const char*>> {};

TEST_P(CpuAttention, MatchesFloat64) {
  const Shape sh = std::get<0>(GetParam());
  const std::string fmt = std::get<1>(GetParam());
  constexpr int kTcap = 160;
  const std::string sym = "attn_" + std::to_string(sh.kvh) + "_" + std::to_string(sh.h) + "_" +
                          std::to_string(sh.d) + "_" + (sh.qt < 0 ? "s" + std::to_string(-sh.qt) : std::to_string(sh.qt)) +
                          "_" + fmt;
  auto fn = reinterpret_cast<Fn>(
      testing::test_jit().get(std::string(cpu_prelude_text()) + kHarness, sym, "attention_test"));
  std::mt19937 rng(uint32_t(sh.kvh * 1000 + sh.h * 100 + sh.d + sh.past));
  std::normal_distribution<float> normal(0.0f, 1.5f);
  // LHTD cache of one layer: [2 (K, V)][kvh][kTcap][d].
  std::vector<float> kv(size_t(2) * sh.kvh * kTcap * sh.d), q(size_t(sh.len) * sh.h * sh.d);
  for (float& v : kv) v = normal(rng);
  for (float& v : q) v = normal(rng);
  std::vector<float> o(q.size(), NAN);
  fn(kv.data(), kTcap, q.data(), sh.past, sh.len, o.data());
  auto cache = [&](int which, int head, int t, int i) {
    return double(kv[((size_t(which) * sh.kvh + head) * kTcap + t) * sh.d + i]);
  };
  const double scale = 1.0 / std::sqrt(double(sh.d));
  double worst = 0;
  for (int r = 0; r < sh.len; ++r)
    for (int hh = 0; hh < sh.h; ++hh) {
      const int kh = hh / (sh.h / sh.kvh), n = sh.past + r + 1;
      std::vector<double> p(static_cast<size_t>(n), 0.0);
      double mx = -1e300, sum = 0;
      for (int t = 0; t < n; ++t) {
        double dot = 0;
        for (int i = 0; i < sh.d; ++i) dot += double(q[(size_t(r) * sh.h + hh) * sh.d + i]) * cache(0, kh, t, i);
        p[size_t(t)] = dot * scale;
        mx = std::max(mx, p[size_t(t)]);
      }
      for (double& x : p) sum += (x = std::exp(x - mx));
      for (int i = 0; i < sh.d; ++i) {
        double ref = 0;
        for (int t = 0; t < n; ++t) ref += p[size_t(t)] * cache(1, kh, t, i);
        ref /= sum;
        const double got = o[(size_t(r) * sh.h + hh) * sh.d + i];
        ASSERT_TRUE(std::isfinite(got)) << "row " << r << " head " << hh << " not written";
        worst = std::max(worst, std::abs(got - ref));
      }
    }
  // Outputs are averages of values of magnitude ~1.5: float32 accumulation over up to
  // 160 keys and the exp polynomial (relative error < 2e-7) stay far below 1e-5. (The
  // reference uses the values the cache holds, so quantization error is not in it.)
  EXPECT_LT(worst, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuAttention,
                         ::testing::Combine(::testing::Values(Shape{4, 4, 64, 16, 0, 37},    // MHA, a partial key block
                                           Shape{4, 8, 64, 16, 5, 40},    // GQA 2, past tokens
                                           Shape{2, 8, 128, 16, 0, 33},   // GQA 4, head 128
                                           Shape{1, 8, 128, 8, 17, 20},   // GQA 8
                                           Shape{2, 8, 64, 1, 100, 1},    // decode row
                                           Shape{4, 8, 32, 16, 0, 70},    // head 32
                                           Shape{2, 8, 64, -3, 100, 1},   // decode split in 3 parts
                                           Shape{4, 4, 128, -5, 2, 1},    // 5 parts, some empty
                                           Shape{1, 8, 32, 1, 45, 1},     // decode, GQA 8, head 32
                                           Shape{1, 8, 128, 1, 130, 1},   // decode, GQA 8, head 128
                                           Shape{4, 4, 64, 1, 15, 1}),    // decode, MHA, one key block
                                            ::testing::Values("f32", "f16", "bf16", "int8", "int4")),
                         [](const ::testing::TestParamInfo<CpuAttention::ParamType>& info) {
                           const Shape& s = std::get<0>(info.param);
                           return "kvh" + std::to_string(s.kvh) + "_h" + std::to_string(s.h) + "_d" +
                                  std::to_string(s.d) + (s.qt < 0 ? "_split" + std::to_string(-s.qt)
                                                                  : "_qt" + std::to_string(s.qt)) +
                                  "_past" + std::to_string(s.past) + "_len" + std::to_string(s.len) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
}  // namespace lathe
