// The int4 x int8 register-tiled GEMM of prefill (qgemm_tile on rows prepared by
// qgemv_xrow and qgemm_wrow, codegen/cpu/kernel_prelude.h), JIT-compiled like a
// kernel, against
//  - the decode GEMV on the same quantized activations (qgemv_row through gemv_rows,
//    one activation row at a time): the same integer products summed in another
//    order, so within float rounding (largest difference below 1e-5 of the outputs'
//    RMS);
//  - the GEMV over all M activation rows at once (qgemv_row with M = 1-8): the same
//    bound against the one-row GEMV;
//  - a float64 product of the dequantized weights with the unquantized activations:
//    within the error of quantizing activations to int8 per 32-element block
//    (relative RMS 1/254 = 0.0039 per element; the test allows 0.01).
// Shapes cover K that is no multiple of 256 (the last group of 8 blocks is partial:
// K = 96, 320, 352), group sizes 32, 64 and 128, and tiles cut by the edges of M and N.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "codegen/cpu/emit_cpu.h"
#include "codegen/cpu/kernel_prelude.h"
#include "support/cpu_run.h"

namespace lathe {
namespace {

// The prefill GEMM's register tiles over M quantized activation rows (qgemv_xrow) and
// the N weight rows w of format FMT (prepared by qgemm_wrow), as qgemm_kernel runs them:
// tails of M and N repeat a row (N at most 16). out: [M, N].
const char* kTileHarness = R"(
#ifdef LATHE_INT_DOT
template <int FMT, int K, int G>
static void tiles(const lk::u8* xq, int M, const void* w, const lk::u16* s, int N, float* out) {
  constexpr long XB = lk::qgemv_row_bytes(K), WB = lk::qgemm_wrow_bytes(K);
  static lk::u8 wt[16 * WB];
  for (int n = 0; n < N; ++n) lk::qgemm_wrow<FMT, K, G>(w, s, n, wt + n * WB);
  for (int i0 = 0; i0 < M; i0 += lk::kQRows)
    for (int j0 = 0; j0 < N; j0 += lk::kQCols) {
      const lk::u8 *xr[lk::kQRows], *wr[lk::kQCols];
      for (int i = 0; i < lk::kQRows; ++i) xr[i] = xq + (i0 + i < M ? i0 + i : M - 1) * XB;
      for (int j = 0; j < lk::kQCols; ++j) wr[j] = wt + (j0 + j < N ? j0 + j : N - 1) * WB;
      float t[lk::kQRows * lk::kQCols];
      lk::qgemm_tile<K, lk::kQRows, lk::kQCols>(xr, wr, t, lk::kQCols);
      for (int i = 0; i < lk::kQRows && i0 + i < M; ++i)
        for (int j = 0; j < lk::kQCols && j0 + j < N; ++j) out[(i0 + i) * N + j0 + j] = t[i * lk::kQCols + j];
    }
}
#endif
)";

// Runs both integer paths for M activation rows and N int4 weight rows of one (K, G).
// Returns 0 when the host has no integer dot products (the kernels then dequantize).
const char* kHarness = R"(
template <int K, int G>
static int run(const float* x, int M, const lk::u8* w, const lk::u16* s, int N, float* tile_out, float* gemv_out,
               float* multi_out) {
#ifdef LATHE_INT_DOT
  static float gs[lk::gemv_x_floats(K, 8)];
  lk::GemvX<lk::I4, K> gx;
  gx.prepare(nullptr, x, K, M, gs);  // rows quantized by qgemv_xrow, for the GEMV and the tiles
  tiles<lk::I4, K, G>(gx.xq, M, w, s, N, tile_out);
  for (int n = 0; n < N; ++n)
    for (int m = 0; m < M; ++m) lk::gemv_rows<lk::I4, K, G>(w, s, n, gx, m, 1, gemv_out + m * N + n);
  for (int n = 0; n < N; ++n) {
    float o[8];
    lk::gemv_rows<lk::I4, K, G>(w, s, n, gx, 0, M, o);
    for (int m = 0; m < M; ++m) multi_out[m * N + n] = o[m];
  }
  return 1;
#else
  return 0;
#endif
}
#define QGEMM(K, G)                                                                                     \
  extern "C" int qgemm_##K##_##G(const float* x, int M, const lk::u8* w, const lk::u16* s, int N, float* a, \
                                 float* b, float* c) {                                                     \
    return run<K, G>(x, M, w, s, N, a, b, c);                                                              \
  }
QGEMM(96, 32)
QGEMM(256, 64)
QGEMM(768, 128)
QGEMM(352, 32)
QGEMM(320, 64)
QGEMM(64, 64)
QGEMM(768, 32)
)";

using Fn = int (*)(const float*, int, const lk::u8*, const lk::u16*, int, float*, float*, float*);

struct Shape {
  int K, G, M, N;
};

class QGemm : public ::testing::TestWithParam<Shape> {};

TEST_P(QGemm, MatchesGemvAndFloat64) {
  const Shape sh = GetParam();
  const std::string source = std::string(cpu_prelude_text()) + kTileHarness + kHarness;
  const std::string sym = "qgemm_" + std::to_string(sh.K) + "_" + std::to_string(sh.G);
  auto fn = reinterpret_cast<Fn>(testing::test_jit().get(source, sym, "qgemm_test"));
  std::mt19937 rng(uint32_t(sh.K * 131 + sh.G * 7 + sh.M * 3 + sh.N));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(size_t(sh.M) * sh.K), wf(size_t(sh.N) * sh.K);
  for (float& v : x) v = normal(rng);
  for (float& v : wf) v = normal(rng);
  // int4 weights, one f16 scale per G elements (the runtime's storage format).
  std::vector<lk::u8> w(size_t(sh.N) * sh.K / 2);
  std::vector<lk::u16> s(size_t(sh.N) * (sh.K / sh.G));
  for (int n = 0; n < sh.N; ++n)
    for (int g = 0; g < sh.K / sh.G; ++g)
      lk::quant_i4(&wf[size_t(n) * sh.K + g * sh.G], sh.G, &w[size_t(n) * sh.K / 2 + g * sh.G / 2],
                   &s[size_t(n) * (sh.K / sh.G) + g]);
  std::vector<float> tile(size_t(sh.M) * sh.N, NAN), gemv(tile), multi(tile);
  if (!fn(x.data(), sh.M, w.data(), s.data(), sh.N, tile.data(), gemv.data(), multi.data()))
    GTEST_SKIP() << "this host has no integer dot products (AVX2); int4 GEMMs dequantize to f32";
  double err2 = 0, ref2 = 0, max_gap = 0, multi_gap = 0, gemv2 = 0;
  for (int m = 0; m < sh.M; ++m)
    for (int n = 0; n < sh.N; ++n) {
      double ref = 0;
      for (int k = 0; k < sh.K; ++k) {
        int b = k / 32, j = k % 32;
        lk::u8 byte = w[size_t(n) * sh.K / 2 + b * 16 + j % 16];
        int q = j < 16 ? byte & 15 : byte >> 4;
        ref += double(q - 8) * lk::h2f(s[size_t(n) * (sh.K / sh.G) + k / sh.G]) * x[size_t(m) * sh.K + k];
      }
      double t = tile[size_t(m) * sh.N + n], g = gemv[size_t(m) * sh.N + n];
      ASSERT_TRUE(std::isfinite(t)) << "m " << m << " n " << n << " not written";
      max_gap = std::max(max_gap, std::abs(t - g));
      double mu = multi[size_t(m) * sh.N + n];
      ASSERT_TRUE(std::isfinite(mu)) << "m " << m << " n " << n << " not written";
      multi_gap = std::max(multi_gap, std::abs(mu - g));
      gemv2 += g * g;
      err2 += (t - ref) * (t - ref);
      ref2 += ref * ref;
    }
  const double gemv_rms = std::sqrt(gemv2 / (sh.M * sh.N));
  EXPECT_LT(max_gap / gemv_rms, 1e-5) << "tile vs GEMV on the same int8 activations";
  EXPECT_LT(multi_gap / gemv_rms, 1e-5) << "GEMV over several activation rows vs one";
  EXPECT_LT(std::sqrt(err2 / ref2), 0.01) << "tile vs float64 with unquantized activations";
}

INSTANTIATE_TEST_SUITE_P(Shapes, QGemm,
                         ::testing::Values(Shape{96, 32, 5, 4}, Shape{256, 64, 8, 6}, Shape{768, 128, 7, 5},
                                           Shape{768, 32, 4, 3}, Shape{768, 32, 1, 1}, Shape{256, 64, 3, 7},
                                           Shape{352, 32, 8, 5}, Shape{320, 64, 6, 4}, Shape{64, 64, 3, 4}),
                         [](const ::testing::TestParamInfo<Shape>& i) {
                           return "K" + std::to_string(i.param.K) + "_G" + std::to_string(i.param.G) + "_M" +
                                  std::to_string(i.param.M) + "_N" + std::to_string(i.param.N);
                         });

// The int8 decode GEMV on int8 activations (qgemv_row, through gemv_rows with M rows
// at once) and the prefill GEMM's register tiles (qgemm_tile with int8 weights) against
// a float64 product of the dequantized weights with the activations
// quantized as the kernel does (int8 per 32-block, scale amax / 127): the same
// integers, so within float rounding (1e-5 of the outputs' RMS). Per-row scales
// (G 0) and per-32 scales (Q8_0), K with and without a partial last group of eight
// blocks (288, 352).
const char* kInt8Harness = R"(
template <int K, int G>
static int run8(const float* x, int M, const lk::i8* w, const lk::u16* s, int N, float* out, float* tile_out) {
#ifdef LATHE_VNNI
  static float scratch[lk::gemv_x_floats(K, 8)];
  lk::GemvX<lk::I8, K> gx;
  gx.prepare(nullptr, x, K, M, scratch);
  for (int n = 0; n < N; ++n) {
    float o[8];
    lk::gemv_rows<lk::I8, K, G>(w, s, n, gx, 0, M, o);
    for (int m = 0; m < M; ++m) out[m * N + n] = o[m];
  }
  tiles<lk::I8, K, G>(gx.xq, M, w, s, N, tile_out);  // the prefill GEMM's tiles, same rows
  return 1;
#else
  return 0;
#endif
}
#define GEMV8(K, G)                                                                                     \
  extern "C" int gemv8_##K##_##G(const float* x, int M, const lk::i8* w, const lk::u16* s, int N, float* o, \
                                 float* t) {                                                               \
    return run8<K, G>(x, M, w, s, N, o, t);                                                                \
  }
GEMV8(256, 0)
GEMV8(352, 0)
GEMV8(384, 128)
GEMV8(192, 64)
GEMV8(288, 32)
GEMV8(768, 32)
)";

using Fn8 = int (*)(const float*, int, const lk::i8*, const lk::u16*, int, float*, float*);

class Int8Gemv : public ::testing::TestWithParam<Shape> {};

TEST_P(Int8Gemv, MatchesFloat64) {
  const Shape sh = GetParam();
  const std::string source = std::string(cpu_prelude_text()) + kTileHarness + kInt8Harness;
  const std::string sym = "gemv8_" + std::to_string(sh.K) + "_" + std::to_string(sh.G);
  auto fn = reinterpret_cast<Fn8>(testing::test_jit().get(source, sym, "qgemm_test"));
  std::mt19937 rng(uint32_t(sh.K * 17 + sh.G + sh.M * 5 + sh.N));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(size_t(sh.M) * sh.K), wf(size_t(sh.N) * sh.K);
  for (float& v : x) v = normal(rng);
  for (float& v : wf) v = normal(rng);
  const int per = sh.G > 0 ? sh.G : sh.K;  // elements per scale
  std::vector<lk::i8> w(size_t(sh.N) * sh.K);
  std::vector<lk::u16> s(size_t(sh.N) * (sh.K / per));
  for (int n = 0; n < sh.N; ++n)
    for (int g = 0; g < sh.K / per; ++g)
      lk::quant_i8(&wf[size_t(n) * sh.K + g * per], per, &w[size_t(n) * sh.K + g * per], &s[size_t(n) * (sh.K / per) + g]);
  std::vector<float> out(size_t(sh.M) * sh.N, NAN), tile(out);
  if (!fn(x.data(), sh.M, w.data(), s.data(), sh.N, out.data(), tile.data()))
    GTEST_SKIP() << "this host has no VNNI; int8 GEMVs dequantize to f32";
  std::vector<double> xq(x.size());  // the activations as the kernel quantizes them
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[b + j]));
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    for (size_t j = 0; j < 32; ++j) xq[b + j] = double(std::round(x[b + j] * id)) * double(amax / 127.0f);
  }
  double max_gap = 0, tile_gap = 0, ref2 = 0;
  for (int m = 0; m < sh.M; ++m)
    for (int n = 0; n < sh.N; ++n) {
      double ref = 0;
      for (int k = 0; k < sh.K; ++k)
        ref += double(w[size_t(n) * sh.K + k]) * lk::h2f(s[size_t(n) * (sh.K / per) + k / per]) *
               xq[size_t(m) * sh.K + k];
      double o = out[size_t(m) * sh.N + n], t = tile[size_t(m) * sh.N + n];
      ASSERT_TRUE(std::isfinite(o) && std::isfinite(t)) << "m " << m << " n " << n << " not written";
      max_gap = std::max(max_gap, std::abs(o - ref));
      tile_gap = std::max(tile_gap, std::abs(t - ref));
      ref2 += ref * ref;
    }
  EXPECT_LT(max_gap / std::sqrt(ref2 / (sh.M * sh.N)), 1e-5) << "decode GEMV";
  EXPECT_LT(tile_gap / std::sqrt(ref2 / (sh.M * sh.N)), 1e-5) << "prefill GEMM tiles";
}

INSTANTIATE_TEST_SUITE_P(Shapes, Int8Gemv,
                         ::testing::Values(Shape{256, 0, 1, 9}, Shape{256, 0, 4, 3}, Shape{288, 32, 3, 5},
                                           Shape{768, 32, 1, 4}, Shape{768, 32, 2, 4}, Shape{288, 32, 7, 8},
                                           Shape{256, 0, 8, 7}, Shape{352, 0, 5, 6}, Shape{352, 0, 8, 3},
                                           Shape{384, 128, 6, 5}, Shape{192, 64, 2, 4}),
                         [](const ::testing::TestParamInfo<Shape>& i) {
                           return "K" + std::to_string(i.param.K) + "_G" + std::to_string(i.param.G) + "_M" +
                                  std::to_string(i.param.M) + "_N" + std::to_string(i.param.N);
                         });

// The decode GEMV path of gemm_kernel (at most kGemvRows rows) with float weights
// (f32, f16, bf16), which takes two weight rows a pass (gemv_rows2): every row count
// 1-8, outputs split over weights of odd widths (a pass then spans two weights), the
// residual and SwiGLU epilogues, and a parallel loop handing out chunks of 5 columns
// (so passes start at odd columns), against a float64 product of the stored weights.
// gemv_row_m2 on int8 weights with one scale per row is called directly too (the
// dispatch sends int8 to the integer dot products on VNNI hosts). Float products in
// another order: within 1e-5 of the outputs' RMS.
const char* kFloatHarness = R"(
static void chunks_of_5(void*, long n, long, LatheBody body, void* closure) {
  for (long b = 0; b < n; b += 5) body(closure, b, b + 5 < n ? b + 5 : n, 0);
}
template <int FMT, int K>
static void runf(const float* x, int M, int epi, int nw, const long* n, const void* const* W, const float* res,
                 float* const* out) {
  static float shared[lk::kGemvRows * K + lk::gemv_x_floats(K, lk::kGemvRows)];
  LatheCtx c = {};
  c.parallel_for = chunks_of_5;
  c.threads = 1;
  c.shared = shared;
  c.shared_floats = sizeof shared / sizeof(float);
  LatheSeq seq = {0, 0, M, 0};
  int row_seq[8] = {0}, row_pos[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  LatheStep st = {1, M, &seq, row_seq, row_pos, nullptr, 0};
  lk::GemmDesc d = {nw, {n[0], n[1], n[2], n[3]}, lk::PRO_NONE, epi, 0.0f, 0};
  const lk::u16* S[4] = {nullptr, nullptr, nullptr, nullptr};
  lk::gemm_kernel<FMT, K, 0>(&c, &st, d, x, nullptr, W, S, out, res);
}
extern "C" void fgemv_f32_96(const float* x, int M, int epi, int nw, const long* n, const void* const* W,
                             const float* res, float* const* out) {
  runf<lk::F32, 96>(x, M, epi, nw, n, W, res, out);
}
extern "C" void fgemv_f16_256(const float* x, int M, int epi, int nw, const long* n, const void* const* W,
                              const float* res, float* const* out) {
  runf<lk::F16, 256>(x, M, epi, nw, n, W, res, out);
}
extern "C" void fgemv_bf16_96(const float* x, int M, int epi, int nw, const long* n, const void* const* W,
                              const float* res, float* const* out) {
  runf<lk::BF16, 96>(x, M, epi, nw, n, W, res, out);
}
// int8 rows with one scale each, two rows a pass: row n0 of (w0, s0) and row n1 of
// (w1, s1) for M = 3.
extern "C" void i8rows2_96(const float* x, const lk::i8* w0, const lk::u16* s0, long n0, const lk::i8* w1,
                           const lk::u16* s1, long n1, float* o0, float* o1) {
  lk::gemv_row_m2<lk::I8, 96, 0, 3>(w0, s0, n0, w1, s1, n1, x, 96, o0, o1);
}
)";

using FloatGemvFn = void (*)(const float*, int, int, int, const long*, const void* const*, const float*,
                             float* const*);

struct FloatGemvCase {
  std::string fmt;  // f32, f16, bf16
  int K;
  int epilogue;  // lk::EPI_*
  std::vector<long> n;
};

void PrintTo(const FloatGemvCase& c, std::ostream* os) {
  *os << c.fmt << " K " << c.K << " epilogue " << c.epilogue << " widths";
  for (long n : c.n) *os << " " << n;
}

class FloatGemv : public ::testing::TestWithParam<FloatGemvCase> {};

TEST_P(FloatGemv, MatchesFloat64AtEveryRowCount) {
  const FloatGemvCase& fc = GetParam();
  const std::string source = std::string(cpu_prelude_text()) + kFloatHarness;
  const std::string sym = "fgemv_" + fc.fmt + "_" + std::to_string(fc.K);
  auto fn = reinterpret_cast<FloatGemvFn>(testing::test_jit().get(source, sym, "qgemm_test"));
  const int K = fc.K, nw = int(fc.n.size());
  const bool silu = fc.epilogue == lk::EPI_SILU_MUL;
  std::mt19937 rng(uint32_t(K * 7 + nw * 3 + fc.epilogue));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Weights as stored and as the kernel reads them back (float64 reference from those).
  std::vector<std::vector<float>> wf(static_cast<size_t>(nw));
  std::vector<std::vector<lk::u16>> w16(static_cast<size_t>(nw));
  std::vector<const void*> W(4, nullptr);
  for (int i = 0; i < nw; ++i) {
    wf[size_t(i)].resize(size_t(fc.n[size_t(i)]) * K);
    for (float& v : wf[size_t(i)]) {
      v = normal(rng);
      if (fc.fmt == "f16") v = lk::h2f(lk::f2h(v));
      if (fc.fmt == "bf16") v = lk::bf2f(lk::f2bf(v));
    }
    if (fc.fmt == "f32") {
      W[size_t(i)] = wf[size_t(i)].data();
    } else {
      for (float v : wf[size_t(i)]) w16[size_t(i)].push_back(fc.fmt == "f16" ? lk::f2h(v) : lk::f2bf(v));
      W[size_t(i)] = w16[size_t(i)].data();
    }
  }
  for (int M = 1; M <= 8; ++M) {  // kGemvRows (kernel_lib.h): the most rows a GEMV takes
    SCOPED_TRACE("M = " + std::to_string(M));
    std::vector<float> x(size_t(M) * K);
    for (float& v : x) v = normal(rng);
    const int outs = silu ? 1 : nw;
    std::vector<std::vector<float>> out(static_cast<size_t>(outs)), res(static_cast<size_t>(outs));
    std::vector<float*> O(4, nullptr);
    for (int i = 0; i < outs; ++i) {
      out[size_t(i)].assign(size_t(M) * fc.n[size_t(i)], NAN);
      res[size_t(i)].resize(out[size_t(i)].size());
      for (float& v : res[size_t(i)]) v = normal(rng);
      O[size_t(i)] = out[size_t(i)].data();
    }
    // The residual epilogue adds res with the width of each output; the kernel takes one
    // residual pointer, so only single-weight residual cases are built.
    ASSERT_TRUE(fc.epilogue != lk::EPI_RESIDUAL || nw == 1);
    std::vector<long> widths = fc.n;  // the harness reads four widths
    widths.resize(4, 0);
    fn(x.data(), M, fc.epilogue, nw, widths.data(), W.data(), res[0].data(), O.data());
    auto dot = [&](int i, long col, int m) {
      double r = 0;
      for (int k = 0; k < K; ++k) r += double(wf[size_t(i)][size_t(col) * K + k]) * x[size_t(m) * K + k];
      return r;
    };
    double gap = 0, ref2 = 0;
    size_t count = 0;
    for (int i = 0; i < outs; ++i)
      for (int m = 0; m < M; ++m)
        for (long col = 0; col < fc.n[size_t(i)]; ++col) {
          double ref = dot(i, col, m);
          if (silu) ref = ref / (1.0 + std::exp(-ref)) * dot(1, col, m);
          if (fc.epilogue == lk::EPI_RESIDUAL) ref += res[size_t(i)][size_t(m) * fc.n[size_t(i)] + col];
          double got = out[size_t(i)][size_t(m) * fc.n[size_t(i)] + col];
          ASSERT_TRUE(std::isfinite(got)) << "output " << i << " row " << m << " column " << col << " not written";
          gap = std::max(gap, std::abs(got - ref));
          ref2 += ref * ref;
          ++count;
        }
    EXPECT_LT(gap / std::sqrt(ref2 / double(count)), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FloatGemv,
    ::testing::Values(FloatGemvCase{"f32", 96, lk::EPI_NONE, {5, 7, 3}}, FloatGemvCase{"f32", 96, lk::EPI_RESIDUAL, {9}},
                      FloatGemvCase{"f32", 96, lk::EPI_SILU_MUL, {7, 7}},
                      FloatGemvCase{"f16", 256, lk::EPI_NONE, {3, 4, 6}},
                      FloatGemvCase{"f16", 256, lk::EPI_SILU_MUL, {11, 11}},
                      FloatGemvCase{"bf16", 96, lk::EPI_NONE, {1, 1, 1, 2}},
                      FloatGemvCase{"bf16", 96, lk::EPI_RESIDUAL, {6}}),
    [](const ::testing::TestParamInfo<FloatGemvCase>& i) {
      std::string s = i.param.fmt + "_K" + std::to_string(i.param.K) + "_epi" + std::to_string(i.param.epilogue);
      for (long n : i.param.n) s += "_" + std::to_string(n);
      return s;
    });

TEST(FloatGemv, Int8RowsTwoAPass) {
  // Two weights of different scales (as a fused QKV pairs rows across weights): a pass
  // taking row 1 of the first and row 2 of the second.
  const std::string source = std::string(cpu_prelude_text()) + kFloatHarness;
  using Fn = void (*)(const float*, const lk::i8*, const lk::u16*, long, const lk::i8*, const lk::u16*, long, float*,
                      float*);
  auto fn = reinterpret_cast<Fn>(testing::test_jit().get(source, "i8rows2_96", "qgemm_test"));
  constexpr int K = 96, M = 3, N = 4;
  std::mt19937 rng(96);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(size_t(M) * K);
  for (float& v : x) v = normal(rng);
  std::vector<lk::i8> w[2];
  std::vector<lk::u16> s[2];
  for (int i = 0; i < 2; ++i) {
    std::vector<float> wf(size_t(N) * K);
    for (float& v : wf) v = normal(rng) * (i ? 10.0f : 0.1f);
    w[i].resize(wf.size());
    s[i].resize(N);
    for (int n = 0; n < N; ++n) lk::quant_i8(&wf[size_t(n) * K], K, &w[i][size_t(n) * K], &s[i][size_t(n)]);
  }
  const long rows[2] = {1, 2};
  float o[2][M];
  fn(x.data(), w[0].data(), s[0].data(), rows[0], w[1].data(), s[1].data(), rows[1], o[0], o[1]);
  for (int i = 0; i < 2; ++i)
    for (int m = 0; m < M; ++m) {
      double ref = 0;
      for (int k = 0; k < K; ++k) ref += double(w[i][size_t(rows[i]) * K + k]) * x[size_t(m) * K + k];
      ref *= lk::h2f(s[i][size_t(rows[i])]);
      EXPECT_NEAR(o[i][m], ref, 1e-5 * (1 + std::abs(ref))) << "weight " << i << " m " << m;
    }
}

// The activation quantizer of the integer paths (quant_xblock, vectorized) against the
// scalar rule it replaced: scale max|x| / 127, codes roundf(x x 127 / max|x|) (half away
// from zero), the returned sum of the codes. Values that land exactly on a half (x =
// max|x| x (k + 0.5) / 127 for powers of two) and just below one (0.49999997 must round
// to 0), zeros, blocks of one sign, and NaNs (counted as 0).
const char* kQuantHarness = R"(
extern "C" int quant_block(const float* x, lk::i8* q, float* d) {
#ifdef LATHE_INT_DOT
  return lk::quant_xblock(x, q, d);
#else
  return -1000000;
#endif
}
)";

TEST(QuantXBlock, MatchesScalarRule) {
  const std::string source = std::string(cpu_prelude_text()) + kQuantHarness;
  using Fn = int (*)(const float*, lk::i8*, float*);
  auto fn = reinterpret_cast<Fn>(testing::test_jit().get(source, "quant_block", "qgemm_test"));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> blocks;
  for (int i = 0; i < 2000; ++i) {
    std::vector<float> b(32);
    for (float& v : b) {
      v = normal(rng) * (i % 7 == 0 ? 1e-3f : 1.0f);
      if (i % 5 == 0) v = std::abs(v);  // one sign
    }
    blocks.push_back(b);
  }
  std::vector<float> ties(32), below(32, 0.0f), zeros(32, 0.0f);
  ties[31] = 127.0f / 4;  // amax: then x x 127 / amax = 4 x x, k + 0.5 for x = (2k + 1) / 8
  for (int j = 0; j < 31; ++j) ties[j] = (j % 2 ? -1.0f : 1.0f) * (2.0f * float(j) + 1.0f) / 8.0f;
  below[0] = 127.0f;
  below[1] = 0.49999997f;
  below[2] = -0.49999997f;
  below[3] = 0.5f;
  below[4] = -0.5f;
  below[5] = 126.5f;
  std::vector<float> with_nan = blocks[3];
  with_nan[3] = NAN, with_nan[31] = NAN;  // a NaN counts as 0, wherever it is
  blocks.push_back(ties);
  blocks.push_back(below);
  blocks.push_back(zeros);
  blocks.push_back(with_nan);
  for (size_t bi = 0; bi < blocks.size(); ++bi) {
    const std::vector<float>& x = blocks[bi];
    lk::i8 q[32] = {};
    float d = -1;
    const int sum = fn(x.data(), q, &d);
    if (sum == -1000000) GTEST_SKIP() << "no integer dot products on this host";
    float amax = 0;
    for (float v : x) amax = std::fmax(amax, std::fabs(v));
    const float db = amax / 127.0f, id = db > 0 ? 127.0f / amax : 0.0f;
    ASSERT_EQ(d, db) << "block " << bi;
    int ref_sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int v = std::isnan(x[j]) ? 0 : int(std::round(x[j] * id));
      ref_sum += v;
      ASSERT_EQ(int(q[j]), v) << "block " << bi << " element " << j << " x " << x[j];
    }
    ASSERT_EQ(sum, ref_sum) << "block " << bi;
  }
}

}  // namespace
}  // namespace lathe
