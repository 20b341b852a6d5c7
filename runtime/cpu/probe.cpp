#include "runtime/cpu/probe.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "codegen/cpu/abi.h"
#include "codegen/cpu/emit_cpu.h"
#include "codegen/kernels_id.h"
#include "runtime/cpu/blas.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/weights.h"
#include "simulator/cost.h"

namespace lathe {

namespace {

using Clock = std::chrono::steady_clock;

// Compiled by the JIT with -march=native, like the kernels it stands for.
const char* kProbeSource = R"(
typedef float v16 __attribute__((vector_size(64)));
// Twelve independent FMA chains per lane. Coefficients come from memory and differ
// per lane, and every lane is stored, so the compiler cannot fold the chains (with
// -fassociative-math it otherwise sums the lanes first and runs one scalar chain).
extern "C" void lathe_probe_fma(long iters, const float* coef, float* out) {
  v16 b, c, a[12];
  for (int i = 0; i < 16; ++i) {
    b[i] = coef[i];
    c[i] = coef[16 + i];
  }
  for (int k = 0; k < 12; ++k)
    for (int i = 0; i < 16; ++i) a[k][i] = coef[32 + i] + float(k);
  for (long it = 0; it < iters; ++it) {
    a[0] = a[0] * b + c; a[1] = a[1] * b + c; a[2] = a[2] * b + c; a[3] = a[3] * b + c;
    a[4] = a[4] * b + c; a[5] = a[5] * b + c; a[6] = a[6] * b + c; a[7] = a[7] * b + c;
    a[8] = a[8] * b + c; a[9] = a[9] * b + c; a[10] = a[10] * b + c; a[11] = a[11] * b + c;
  }
  for (int k = 0; k < 12; ++k)
    for (int i = 0; i < 16; ++i) out[k * 16 + i] = a[k][i];
}
// 8-bit dot products, the instruction of the integer GEMV/GEMM kernels (vpdpbusd on
// 256-bit vectors, as codegen/cpu/kernel_prelude.h uses it): twelve independent
// accumulators. Returns 0 when the host has no VNNI (the kernels then dequantize int8
// weights, and this measurement is left out of the spec).
typedef int v8i __attribute__((vector_size(32)));
extern "C" int lathe_probe_dot(long iters, const int* coef, int* out) {
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
  v8i b, c, a[12];
  for (int i = 0; i < 8; ++i) {
    b[i] = coef[i];
    c[i] = coef[8 + i];
  }
  for (int k = 0; k < 12; ++k)
    for (int i = 0; i < 8; ++i) a[k][i] = coef[16 + i] + k;
  for (long it = 0; it < iters; ++it)
    for (int k = 0; k < 12; ++k) a[k] = __builtin_ia32_vpdpbusd256(a[k], b, c);
  for (int k = 0; k < 12; ++k)
    for (int i = 0; i < 8; ++i) out[k * 8 + i] = a[k][i];
  return 1;
#else
  return 0;
#endif
}
// Streaming read with eight independent 16-lane accumulators (many loads in flight,
// as the GEMV kernels have).
extern "C" float lathe_probe_read(const float* p, long n) {
  v16 s[8] = {};
  for (long i = 0; i + 127 < n; i += 128)
    for (int k = 0; k < 8; ++k) {
      v16 v;
      __builtin_memcpy(&v, p + i + 16 * k, 64);
      s[k] += v;
    }
  v16 t = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
  float r = 0;
  for (int i = 0; i < 16; ++i) r += t[i];
  return r;
}
)";
// The integer GEMM of int4 prefill (qgemm_kernel, as the plans' kernels run it: gemm_kernel
// with int4:g32 weights and K = 2048), compiled from the kernels' own prelude. Returns 0
// when the host has no integer dot products (int4 GEMMs then dequantize).
const char* kProbeQgemmSource = R"(
template <int FMT, int K, int G>
static int probe_qgemm(const LatheCtx* c, const LatheStep* st, const float* x, const void* w, const unsigned short* s,
                       long N, float* out) {
#ifdef LATHE_INT_DOT
  if constexpr (lk::GemvX<FMT, K>::quantized) {
    lk::GemmDesc d = {1, {N, 0, 0, 0}, lk::PRO_NONE, lk::EPI_NONE, 0.0f, 0};
    const void* W[1] = {w};
    const unsigned short* S[1] = {s};
    float* O[1] = {out};
    lk::gemm_kernel<FMT, K, G>(c, st, d, x, nullptr, W, S, O, nullptr);
    return 1;
  }
#endif
  return 0;
}
#define LATHE_PROBE_QGEMM(name, FMT, K, G)                                                                   \
  extern "C" int name(const LatheCtx* c, const LatheStep* st, const float* x, const void* w,                \
                      const unsigned short* s, long N, float* out) {                                          \
    return probe_qgemm<FMT, K, G>(c, st, x, w, s, N, out);                                                    \
  }
LATHE_PROBE_QGEMM(lathe_probe_qgemm_512, lk::I4, 512, 32)
LATHE_PROBE_QGEMM(lathe_probe_qgemm_2048, lk::I4, 2048, 32)
LATHE_PROBE_QGEMM(lathe_probe_q8gemm_512, lk::I8, 512, 0)
LATHE_PROBE_QGEMM(lathe_probe_q8gemm_2048, lk::I8, 2048, 0)
// The f32 GEMV of decode: gemm_kernel at most kGemvRows rows takes its GEMV path.
extern "C" void lathe_probe_fgemv_2048(const LatheCtx* c, const LatheStep* st, const float* x, const void* w,
                                       long N, float* out) {
  lk::GemmDesc d = {1, {N, 0, 0, 0}, lk::PRO_NONE, lk::EPI_NONE, 0.0f, 0};
  const void* W[1] = {w};
  const unsigned short* S[1] = {nullptr};
  float* O[1] = {out};
  lk::gemm_kernel<lk::F32, 2048, 0>(c, st, d, x, nullptr, W, S, O, nullptr);
}
)";
// Prefill attention as the plans' kernels run it (attention_kernel with the emitter's
// default 16-row query tiles), one sequence of kAttnS new tokens over an empty f32 KV
// cache in the LHTD layout, `heads` query heads sharing `kv_heads` KV heads of head_dim.
constexpr int kAttnS = 512;
// The symbol of one shape's kernel, and one source that defines all `shapes`.
struct AttnShape {
  int heads, kv_heads, head_dim;
};
std::string attention_probe_symbol(const AttnShape& a) {
  return "lathe_probe_attention_" + std::to_string(a.heads) + "_" + std::to_string(a.kv_heads) + "_" +
         std::to_string(a.head_dim);
}
std::string attention_probe_source(const std::vector<AttnShape>& shapes) {
  std::string src(cpu_prelude_text());
  for (const AttnShape& a : shapes) {
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "extern \"C\" void %s(const LatheCtx* c, const LatheStep* st, const float* q, float* o) {\n"
                  "  lk::attention_kernel<lk::F32, lk::LHTD, 1, %d, %d, 16, 1, %d, %d, 16>(c, st, 0, q, o, 0.1f);\n}\n",
                  attention_probe_symbol(a).c_str(), a.kv_heads, kAttnS, a.heads, a.head_dim);
    src += buf;
  }
  return src;
}
constexpr long kGemvProbeRows = 8;
constexpr long kQgemmKMax = 2048, kQgemmN = 2048, kQgemmM = 128, kQgemmMSmall = 32, kQgemmWeightCopies = 16;

constexpr double kFlopsPerIter = 12.0 * 16 * 2;
constexpr double kDotOpsPerIter = 12.0 * 32 * 2;  // 32 8-bit multiply-adds per instruction

std::string read_text(const char* path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string cpuinfo_field(const std::string& info, const std::string& key) {
  size_t p = info.find(key);
  if (p == std::string::npos) return "";
  p = info.find(':', p);
  size_t e = info.find('\n', p);
  std::string v = info.substr(p + 1, e - p - 1);
  while (!v.empty() && v.front() == ' ') v.erase(v.begin());
  return v;
}

// Seconds of the fastest of three runs of `job` on every thread of the pool at once.
template <class F>
double best_on_all_threads(ThreadPool& pool, const F& job) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    pool.parallel_for(
        pool.threads(), 1,
        [](void* c, long b, long e, int) {
          for (long i = b; i < e; ++i) (*static_cast<const F*>(c))();
        },
        const_cast<F*>(&job));
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

// sgemm's single fixed cost, in rows: fit_two_fixed_costs with one pair of points
// (rate = peak x eff x n / (n + half)); eff is the large-n rate's fraction and half 0
// when the two points do not show that shape.
void fit_fixed_cost(double peak, double rate_big, double n_big, double rate_small, double n_small, double& eff,
                    double& half) {
  double unused = 0;
  fit_two_fixed_costs(peak, rate_big, rate_small, 0.0, 1.0, n_big, n_small, 1.0, eff, half, unused);
}

struct ReadJob {
  float (*fn)(const float*, long);
  const float* base;
  long per_item;
  float sink;
};

}  // namespace

void fit_two_fixed_costs(double peak, double rate_a, double rate_b, double rate_c, double m_a, double k_a,
                         double k_b, double m_c, double& eff, double& half_k, double& half_rows, double cap) {
  eff = rate_a > 0 ? std::min(cap, rate_a / peak) : 0.0;
  half_k = half_rows = 0;
  if (rate_a <= 0) return;
  const double inv_a = peak / rate_a;
  const double ck = rate_b > 0 && rate_b < rate_a ? (peak / rate_b - inv_a) / (1.0 / k_b - 1.0 / k_a) : 0.0;
  const double cm = rate_c > 0 && rate_c < rate_a ? (peak / rate_c - inv_a) / (1.0 / m_c - 1.0 / m_a) : 0.0;
  const double inv_inf = inv_a - ck / k_a - cm / m_a;
  if (inv_inf <= 0) return;
  eff = 1.0 / inv_inf;
  half_k = ck / inv_inf;
  half_rows = cm / inv_inf;
  if (eff > cap) {
    // Capped: the halves shrink in proportion so that the model still meets point a,
    // eff / (1 + half_k / k_a + half_rows / m_a) = rate_a / peak (0 where even the cap
    // is below that rate).
    const double fixed = half_k / k_a + half_rows / m_a, want = std::max(0.0, cap * inv_a - 1.0);
    const double scale = fixed > 0 ? want / fixed : 0.0;
    eff = cap;
    half_k *= scale;
    half_rows *= scale;
  }
}

ProbeResult probe_machine(CpuJit& jit, int threads, double buffer_mb, double seconds) {
  ProbeResult r;
  blas_load();
  ThreadPool pool(threads);
  r.threads = pool.threads();
  auto fma_raw = reinterpret_cast<void (*)(long, const float*, float*)>(jit.get(kProbeSource, "lathe_probe_fma", "probe"));
  static float coef[48];
  for (int i = 0; i < 16; ++i) {
    coef[i] = 0.9999f - 1e-6f * float(i);
    coef[16 + i] = 1e-6f * float(i + 1);
    coef[32 + i] = 1.0f + 0.01f * float(i);
  }
  auto fma = [fma_raw](long n) {
    float out[12 * 16];
    fma_raw(n, coef, out);
    return out[0] + out[191];
  };
  auto rd = reinterpret_cast<float (*)(const float*, long)>(jit.get(kProbeSource, "lathe_probe_read", "probe"));

  // FMA throughput: calibrate the iteration count to ~0.1 s, keep the best of three.
  long iters = 1 << 20;
  for (;;) {
    auto t0 = Clock::now();
    volatile float v = fma(iters);
    (void)v;
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s > 0.1 * seconds || iters > (1L << 34)) break;
    iters *= 2;
  }
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    volatile float v = fma(iters);
    (void)v;
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    r.fma_gflops_one = std::max(r.fma_gflops_one, kFlopsPerIter * double(iters) / s / 1e9);
  }
  double s_all = best_on_all_threads(pool, [&] {
    float out[12 * 16];
    fma_raw(iters, coef, out);
  });
  r.fma_gflops_all = kFlopsPerIter * double(iters) * r.threads / s_all / 1e9;

  // 8-bit dot-product throughput, all threads, the same way.
  {
    auto dot = reinterpret_cast<int (*)(long, const int*, int*)>(jit.get(kProbeSource, "lathe_probe_dot", "probe"));
    static int icoef[24];
    for (int i = 0; i < 24; ++i) icoef[i] = 0x01010101 * (1 + i % 3);
    int out[12 * 8];
    if (dot(1, icoef, out)) {
      double s = best_on_all_threads(pool, [&] {
        int o[12 * 8];
        dot(iters, icoef, o);
      });
      r.int8_gops_all = kDotOpsPerIter * double(iters) * r.threads / s / 1e9;
    }
  }

  // Streaming read bandwidth over a buffer far larger than the caches.
  long n = long(buffer_mb * 1e6 / 4);
  AlignedBuffer buf(size_t(n) * 4);
  float* p = static_cast<float*>(buf.data());
  pool.parallel_for(
      n, 1 << 16,
      [](void* c, long b, long e, int) {
        float* q = static_cast<float*>(c);
        for (long i = b; i < e; ++i) q[i] = float(i & 1023) * 1e-3f;
      },
      p);
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    volatile float v = rd(p, n);
    (void)v;
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    r.read_gbs_one = std::max(r.read_gbs_one, double(n) * 4 / s / 1e9);
  }
  int items = r.threads * 8;
  ReadJob job{rd, p, n / items, 0};
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    pool.parallel_for(
        items, 1,
        [](void* c, long b, long e, int) {
          auto* j = static_cast<ReadJob*>(c);
          for (long i = b; i < e; ++i) j->sink += j->fn(j->base + i * j->per_item, j->per_item);
        },
        &job);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    r.read_gbs = std::max(r.read_gbs, double(job.per_item) * items * 4 / s / 1e9);
  }

  // GEMM efficiency of the path prefill kernels take: each thread multiplies an M-row
  // activation tile by its share of a 2048 x 2048 weight (sgemm_nt), at M = 256 and
  // M = 32. Packing the weight panel costs the same at any M, so 1 / efficiency(M) =
  // 1 / e_large + c / M; the two points give e_large and gemm_half_rows = c x e_large,
  // the rows at which efficiency is half of e_large.
  {
    const long N = 2048, K = 2048, M_big = 256, M_small = 32;
    AlignedBuffer A(size_t(M_big * K) * 4), B(size_t(N * K) * 4), C(size_t(M_big * N) * 4);
    for (long i = 0; i < M_big * K; ++i) static_cast<float*>(A.data())[i] = float(i % 7) * 0.1f;
    for (long i = 0; i < N * K; ++i) static_cast<float*>(B.data())[i] = float(i % 5) * 0.1f;
    struct Job {
      float *a, *b, *c;
      long M, N, K, per;
    };
    auto gflops = [&](long M, int reps) {
      Job job{static_cast<float*>(A.data()), static_cast<float*>(B.data()), static_cast<float*>(C.data()), M, N, K,
              N / r.threads};
      double best = 0;
      for (int rep = 0; rep < reps; ++rep) {
        auto t0 = Clock::now();
        pool.parallel_for(
            r.threads, 1,
            [](void* c, long b, long e, int) {
              auto* j = static_cast<Job*>(c);
              for (long i = b; i < e; ++i)
                sgemm_nt(j->M, j->per, j->K, j->a, j->K, j->b + i * j->per * j->K, j->K, j->c + i * j->per, j->N,
                         0.0f);
            },
            &job);
        double s = std::chrono::duration<double>(Clock::now() - t0).count();
        best = std::max(best, 2.0 * double(M) * double(job.per * r.threads) * double(K) / s / 1e9);
      }
      return best;
    };
    r.gemm_gflops = gflops(M_big, 4);
    r.gemm_gflops_small = gflops(M_small, 12);
    const double peak = r.fma_gflops_all;
    if (peak > 0) fit_fixed_cost(peak, r.gemm_gflops, M_big, r.gemm_gflops_small, M_small, r.gemm_efficiency,
                                 r.gemm_half_rows);
    else r.gemm_efficiency = 0.7;
  }

  // Integer GEMM efficiency (int4 weights against int8-quantized activations), of the
  // 8-bit dot-product peak: the generated kernel's own path (gemm_kernel, int4:g32) at
  // 128 rows x 2048 columns, activation quantization and weight-scale preparation
  // included, at reduction lengths K = 2048 and 512, and at 32 rows (K 2048). Each
  // register tile pays a fixed setup and reduction besides its K / 64 dot-product
  // steps, and each call a fixed amount of work on the weights, so 1 / efficiency =
  // 1 / e + c_k / K + c_m / M; the three points give e, int_dot_half_k = c_k x e and
  // int_dot_half_rows = c_m x e (fit_two_fixed_costs). The same for int8 weights.
  if (r.int8_gops_all > 0) {
    using Qgemm = int (*)(const LatheCtx*, const LatheStep*, const float*, const void*, const unsigned short*, long,
                          float*);
    const std::string src = std::string(cpu_prelude_text()) + kProbeQgemmSource;
    auto q2048 = reinterpret_cast<Qgemm>(jit.get(src, "lathe_probe_qgemm_2048", "probe-qgemm"));
    auto q512 = reinterpret_cast<Qgemm>(jit.get(src, "lathe_probe_qgemm_512", "probe-qgemm"));
    auto q8_2048 = reinterpret_cast<Qgemm>(jit.get(src, "lathe_probe_q8gemm_2048", "probe-qgemm"));
    auto q8_512 = reinterpret_cast<Qgemm>(jit.get(src, "lathe_probe_q8gemm_512", "probe-qgemm"));
    const long M = kQgemmM, N = kQgemmN, KM = kQgemmKMax;
    // Room for int8 weights (one byte per element; int4 uses the first half) and per-32
    // scales (int8 reads one per row). A plan's GEMMs each read their own weights from
    // memory: the timed calls rotate over kQgemmWeightCopies weight matrices (64 MB in
    // all, more than a last-level cache), so no call finds its weights cached.
    AlignedBuffer X(size_t(M * KM) * 4), W(size_t(N * KM) * kQgemmWeightCopies), S(size_t(N * KM / 32) * 2),
        O(size_t(M * N) * 4);
    for (long i = 0; i < M * KM; ++i) static_cast<float*>(X.data())[i] = float(i % 13) * 0.1f - 0.6f;
    for (long i = 0; i < N * KM * kQgemmWeightCopies; ++i)
      static_cast<unsigned char*>(W.data())[i] = static_cast<unsigned char>(i * 37);
    for (long i = 0; i < N * KM / 32; ++i) static_cast<unsigned short*>(S.data())[i] = 0x2000;  // 2^-7 in f16
    const long scratch_floats = 1L << 19, shared_floats = 1L << 20;
    AlignedBuffer scratch(size_t(scratch_floats * r.threads) * 4), shared(size_t(shared_floats) * 4);
    std::vector<float*> per_thread;
    for (int t = 0; t < r.threads; ++t) per_thread.push_back(static_cast<float*>(scratch.data()) + t * scratch_floats);
    LatheCtx ctx{};
    ctx.pool = &pool;
    ctx.parallel_for = ThreadPool::run;
    ctx.threads = r.threads;
    ctx.scratch = per_thread.data();
    ctx.scratch_floats = scratch_floats;
    ctx.shared = static_cast<float*>(shared.data());
    ctx.shared_floats = shared_floats;
    ctx.sgemm_nt = sgemm_nt;
    std::vector<int> row_seq(static_cast<size_t>(M), 0), row_pos(static_cast<size_t>(M), 0);
    for (long i = 0; i < M; ++i) row_pos[size_t(i)] = int(i);
    LatheSeq seq{0, 0, int(M), 0};
    LatheStep step{1, int(M), &seq, row_seq.data(), row_pos.data(), nullptr, 0};
    // The same GEMM over the first kQgemmMSmall rows only.
    LatheSeq seq_small{0, 0, int(kQgemmMSmall), 0};
    LatheStep step_small{1, int(kQgemmMSmall), &seq_small, row_seq.data(), row_pos.data(), nullptr, 0};
    auto gops = [&](Qgemm fn, long K, int reps, bool small = false) {
      const float* x = static_cast<const float*>(X.data());
      const auto* sc = static_cast<const unsigned short*>(S.data());
      float* o = static_cast<float*>(O.data());
      const LatheStep* st = small ? &step_small : &step;
      auto weights = [&](int rep) {
        return static_cast<const unsigned char*>(W.data()) + size_t(rep % kQgemmWeightCopies) * size_t(N * KM);
      };
      if (!fn(&ctx, st, x, weights(kQgemmWeightCopies - 1), sc, N, o)) return 0.0;  // also the warm-up
      double best = 1e30;
      for (int rep = 0; rep < reps; ++rep) {
        const unsigned char* wr = weights(rep);
        auto t0 = Clock::now();
        fn(&ctx, st, x, wr, sc, N, o);
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
      }
      return 2.0 * double(st->n_rows) * double(N) * double(K) / best / 1e9;
    };
    // Best of many: a shared host steals whole milliseconds.
    r.int_gemm_gops = gops(q2048, 2048, 40);
    r.int_gemm_gops_short = gops(q512, 512, 80);
    r.int_gemm_gops_rows = gops(q2048, 2048, 80, true);
    fit_two_fixed_costs(r.int8_gops_all, r.int_gemm_gops, r.int_gemm_gops_short, r.int_gemm_gops_rows, double(M), 2048,
                        512, double(kQgemmMSmall), r.int_dot_efficiency, r.int_dot_half_k, r.int_dot_half_rows);
    r.int8_gemm_gops = gops(q8_2048, 2048, 30);
    r.int8_gemm_gops_short = gops(q8_512, 512, 60);
    r.int8_gemm_gops_rows = gops(q8_2048, 2048, 60, true);
    fit_two_fixed_costs(r.int8_gops_all, r.int8_gemm_gops, r.int8_gemm_gops_short, r.int8_gemm_gops_rows, double(M),
                        2048, 512, double(kQgemmMSmall), r.int8_dot_efficiency, r.int8_dot_half_k,
                        r.int8_dot_half_rows);
    // The integer GEMVs of decode: gemm_kernel at kGemvProbeRows = 8 rows takes its GEMV
    // path (activations quantized once, dot products a weight row at a time, a
    // horizontal sum per row), a different loop from the GEMMs' register tiles above.
    // K = 2048, 256 columns (64 a thread on larger hosts), the weights kept in cache so that the dot products are
    // what is timed (decode reads its weights from memory, which the cost model adds).
    LatheSeq seq_gemv{0, 0, int(kGemvProbeRows), 0};
    LatheStep step_gemv{1, int(kGemvProbeRows), &seq_gemv, row_seq.data(), row_pos.data(), nullptr, 0};
    auto gemv_gops = [&](Qgemm fn, long K) {
      const long Ng = std::min(N, std::max(256L, 64L * r.threads));  // as the f32 GEMV's
      const float* x = static_cast<const float*>(X.data());
      const auto* sc = static_cast<const unsigned short*>(S.data());
      float* o = static_cast<float*>(O.data());
      double best = 1e30;
      if (!fn(&ctx, &step_gemv, x, W.data(), sc, Ng, o)) return 0.0;  // also the warm-up
      for (int rep = 0; rep < 400; ++rep) {
        auto t0 = Clock::now();
        fn(&ctx, &step_gemv, x, W.data(), sc, Ng, o);
        best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
      }
      return 2.0 * double(kGemvProbeRows) * double(Ng) * double(K) / best / 1e9;
    };
    r.int_gemv_gops = gemv_gops(q2048, 2048);
    r.int_gemv_gops_short = gemv_gops(q512, 512);
    r.int8_gemv_gops = gemv_gops(q8_2048, 2048);
    r.int8_gemv_gops_short = gemv_gops(q8_512, 512);
    // Each output's fixed work (the horizontal sum, scale and store; the activation
    // quantizer's per-row setup) against K: the same fit as the GEMMs' without the rows.
    double no_rows = 0;
    // Capped at the field's 1.5, not 1: a loaded host can measure the dot peak low.
    fit_two_fixed_costs(r.int8_gops_all, r.int_gemv_gops, r.int_gemv_gops_short, 0, double(kGemvProbeRows), 2048, 512,
                        double(kGemvProbeRows), r.int_dot_gemv_efficiency, r.int_dot_gemv_half_k, no_rows, 1.5);
    fit_two_fixed_costs(r.int8_gops_all, r.int8_gemv_gops, r.int8_gemv_gops_short, 0, double(kGemvProbeRows), 2048,
                        512, double(kGemvProbeRows), r.int8_dot_gemv_efficiency, r.int8_dot_gemv_half_k, no_rows, 1.5);
  }

  // Floating-point GEMV efficiency of the f32 FMA peak: the generated kernel's own path
  // (gemm_kernel with f32 weights at kGemvRows = 8 rows, the most a decode GEMV takes),
  // K = 2048 and 256 columns (64 a thread on larger hosts), the weights (2 MB) kept in cache so that the multiply-adds
  // are what is timed: decode's GEMVs read their weights from memory, which the cost
  // model adds as memory time.
  {
    using Fgemv = void (*)(const LatheCtx*, const LatheStep*, const float*, const void*, long, float*);
    const std::string src = std::string(cpu_prelude_text()) + kProbeQgemmSource;
    auto fg = reinterpret_cast<Fgemv>(jit.get(src, "lathe_probe_fgemv_2048", "probe-qgemm"));
    // The kernel hands out columns 16 at a time: 64 columns a thread keep every thread
    // busy (256 at 2 threads).
    const long M = kGemvProbeRows, N = std::max(256L, 64L * r.threads), K = 2048;
    AlignedBuffer X(size_t(M * K) * 4), W(size_t(N * K) * 4), O(size_t(M * N) * 4);
    for (long i = 0; i < M * K; ++i) static_cast<float*>(X.data())[i] = float(i % 13) * 0.1f - 0.6f;
    for (long i = 0; i < N * K; ++i) static_cast<float*>(W.data())[i] = float(i % 11) * 0.01f - 0.05f;
    const long shared_floats = (M + 16) * K;
    AlignedBuffer shared(size_t(shared_floats) * 4);
    LatheCtx ctx{};
    ctx.pool = &pool;
    ctx.parallel_for = ThreadPool::run;
    ctx.threads = r.threads;
    ctx.shared = static_cast<float*>(shared.data());
    ctx.shared_floats = shared_floats;
    ctx.sgemm_nt = sgemm_nt;
    std::vector<int> row_seq(static_cast<size_t>(M), 0), row_pos(static_cast<size_t>(M), 0);
    for (long i = 0; i < M; ++i) row_seq[size_t(i)] = int(i);
    std::vector<LatheSeq> seqs;
    for (long i = 0; i < M; ++i) seqs.push_back(LatheSeq{int(i), 0, 1, int(i)});
    LatheStep step{int(M), int(M), seqs.data(), row_seq.data(), row_pos.data(), nullptr, 0};
    double best = 1e30;
    for (int rep = 0; rep <= 400; ++rep) {  // rep 0 warms up; best of many on a shared host
      auto t0 = Clock::now();
      fg(&ctx, &step, static_cast<const float*>(X.data()), W.data(), N, static_cast<float*>(O.data()));
      if (rep > 0) best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    r.gemv_gflops = 2.0 * double(M) * double(N) * double(K) / best / 1e9;
    if (r.fma_gflops_all > 0) r.gemv_efficiency = r.gemv_gflops / r.fma_gflops_all;
  }

  // Flash-attention efficiency of the f32 FMA peak: the generated kernel's own code
  // (attention_kernel, 16-row query tiles) over a 512-token causal prompt, its FLOPs
  // counted as simulator/cost.cpp counts a flash attention's (attention_flops).
  // 16 query heads on 2 KV heads (group 8) and 2 on 2 (group 1): 2 x 32 query tiles,
  // the same 64 work items for the threads in every shape.
  const std::vector<AttnShape> attn_shapes = {{16, 2, 128}, {16, 2, 64}, {2, 2, 128}};
  const std::string attn_src = attention_probe_source(attn_shapes);
  // Each shape's kernel, inputs and step; the shapes are timed in turn, round after
  // round, so that the host's slow spells fall on all three alike.
  struct AttnRun {
    AttnShape shape;
    void (*fn)(const LatheCtx*, const LatheStep*, const float*, float*);
    AlignedBuffer q, o, kv;
    LatheCtx ctx;
    double best = 1e30;
  };
  const long S = kAttnS;
  std::vector<int> row_seq(static_cast<size_t>(S), 0), row_pos(static_cast<size_t>(S), 0);
  for (long i = 0; i < S; ++i) row_pos[size_t(i)] = int(i);
  LatheSeq seq{0, 0, int(S), 0};
  LatheStep step{1, int(S), &seq, row_seq.data(), row_pos.data(), nullptr, 0};
  std::vector<std::unique_ptr<AttnRun>> runs;
  for (const AttnShape& a : attn_shapes) {
    const long q_floats = S * a.heads * a.head_dim, kv_floats = 2L * a.kv_heads * S * a.head_dim;
    auto run = std::make_unique<AttnRun>(AttnRun{a, nullptr, AlignedBuffer(size_t(q_floats) * 4),
                                                 AlignedBuffer(size_t(q_floats) * 4), AlignedBuffer(size_t(kv_floats) * 4),
                                                 LatheCtx{}});
    run->fn = reinterpret_cast<decltype(run->fn)>(jit.get(attn_src, attention_probe_symbol(a), "probe-attention"));
    for (long i = 0; i < q_floats; ++i) static_cast<float*>(run->q.data())[i] = float(i % 17) * 0.05f - 0.4f;
    for (long i = 0; i < kv_floats; ++i) static_cast<float*>(run->kv.data())[i] = float(i % 23) * 0.04f - 0.45f;
    run->ctx.pool = &pool;
    run->ctx.parallel_for = ThreadPool::run;
    run->ctx.threads = r.threads;
    run->ctx.kv = static_cast<unsigned char*>(run->kv.data());
    runs.push_back(std::move(run));
  }
  for (int round = 0; round <= 24; ++round)  // round 0 warms up
    for (auto& run : runs) {
      auto t0 = Clock::now();
      run->fn(&run->ctx, &step, static_cast<const float*>(run->q.data()), static_cast<float*>(run->o.data()));
      if (round > 0) run->best = std::min(run->best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
  auto gflops = [&](const AttnRun& run) {  // FLOPs as the simulator counts them
    return attention_flops(1, run.shape.heads, run.shape.head_dim, double(S), double(S), kFlashWastePairs) /
           run.best / 1e9;
  };
  // Three shapes: group 8 at head_dim 128 and 64, and group 1 at 128, which span the
  // built-in models' (groups 1-8, head_dim 64-128). 1 / efficiency = 1 / e + c_d / D +
  // c_g / G, as the integer GEMMs' two fixed costs (fit_two_fixed_costs with the head
  // dim for K and the group for M).
  r.attention_gflops = gflops(*runs[0]);
  r.attention_gflops_short = gflops(*runs[1]);
  r.attention_gflops_group1 = gflops(*runs[2]);
  auto group = [](const AttnShape& a) { return double(a.heads / a.kv_heads); };
  if (r.fma_gflops_all > 0)
    fit_two_fixed_costs(r.fma_gflops_all, r.attention_gflops, r.attention_gflops_short, r.attention_gflops_group1,
                        group(attn_shapes[0]), attn_shapes[0].head_dim, attn_shapes[1].head_dim,
                        group(attn_shapes[2]), r.attention_efficiency, r.attention_half_dim, r.attention_half_group);

  // Loop overhead: empty parallel loops.
  const int loops = 20000;
  auto t0 = Clock::now();
  for (int i = 0; i < loops; ++i)
    pool.parallel_for(r.threads * 4, 1, [](void*, long, long, int) {}, nullptr);
  r.loop_overhead_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / loops;

  std::string info = read_text("/proc/cpuinfo");
  r.cpu_model = cpuinfo_field(info, "model name");
  r.clock_mhz = std::atof(cpuinfo_field(info, "cpu MHz").c_str());
  r.isa = jit.host_cpu();
  std::string mem = read_text("/proc/meminfo");
  r.memory_gb = std::atof(cpuinfo_field(mem, "MemTotal").c_str()) * 1024.0 / 1e9;
  std::string l3 = read_text("/sys/devices/system/cpu/cpu0/cache/index3/size");
  if (!l3.empty()) r.l3_mb = std::atof(l3.c_str()) / 1024.0 * (l3.find('M') != std::string::npos ? 1024.0 : 1.0);
  return r;
}

std::string cpu_model_name() { return cpuinfo_field(read_text("/proc/cpuinfo"), "model name"); }

bool cpu_has_int8_dot() {
  std::string flags = " " + cpuinfo_field(read_text("/proc/cpuinfo"), "flags") + " ";
  auto has = [&](const char* f) { return flags.find(" " + std::string(f) + " ") != std::string::npos; };
  return (has("avx512_vnni") && has("avx512vl")) || has("avx_vnni");
}

std::vector<std::string> probe_warnings(const ProbeResult& p) {
  std::vector<std::string> w;
  auto fig = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", v);
    return std::string(b);
  };
  if (p.threads > 1 && p.read_gbs_one > 0 && p.read_gbs < 0.9 * p.read_gbs_one)
    w.push_back("the streaming read on all threads (" + fig(p.read_gbs) + " GB/s, written as hbm_bandwidth_gbs) is "
                "below one thread's (" + fig(p.read_gbs_one) + " GB/s)");
  if (p.threads > 1 && p.fma_gflops_one > 0 && p.fma_gflops_all < 0.9 * p.fma_gflops_one)
    w.push_back("the FMA peak on all threads (" + fig(p.fma_gflops_all) + " GFLOP/s) is below one thread's (" +
                fig(p.fma_gflops_one) + ")");
  if (p.gemv_efficiency > 1.0)
    w.push_back("the f32 GEMV (" + fig(p.gemv_gflops) + " GFLOP/s) beat the measured FMA peak (" +
                fig(p.fma_gflops_all) + "), so the peak was measured low; efficiency.gemv is clamped");
  auto k_drop = [&](const char* what, double long_k, double short_k) {
    if (long_k > 0 && short_k > 0 && long_k < 0.5 * short_k)
      w.push_back(std::string(what) + " ran at " + fig(long_k) + " GOP/s at K 2048 against " + fig(short_k) +
                  " at K 512 (a longer K amortizes more, so it should be faster)");
  };
  k_drop("the int4 GEMM", p.int_gemm_gops, p.int_gemm_gops_short);
  k_drop("the int8 GEMM", p.int8_gemm_gops, p.int8_gemm_gops_short);
  k_drop("the int4 GEMV", p.int_gemv_gops, p.int_gemv_gops_short);
  k_drop("the int8 GEMV", p.int8_gemv_gops, p.int8_gemv_gops_short);
  return w;
}

std::string probe_to_toml(const ProbeResult& p, const std::string& name) {
  char date[32];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::localtime(&now));
  char int8_line[160] = "";
  if (p.int8_gops_all > 0)
    std::snprintf(int8_line, sizeof int8_line,
                  "int8 = %.5f                    # measured 8-bit dot-product throughput (VNNI), all threads\n",
                  p.int8_gops_all / 1e3);
  char int_dot_line[1200] = "";
  if (p.int_dot_efficiency > 0)
    std::snprintf(int_dot_line, sizeof int_dot_line,
                  "int_dot = %.3f                 # measured int4 x int8 GEMM / 8-bit dot peak, long-K limit\n"
                  "int8_dot = %.3f                # the same for int8 weights\n"
                  "int_dot_gemv = %.3f            # measured int4 GEMV at 8 rows (weights in cache) / 8-bit dot peak, long-K limit\n"
                  "int8_dot_gemv = %.3f           # the same for int8 weights\n",
                  p.int_dot_efficiency, p.int8_dot_efficiency > 0 ? p.int8_dot_efficiency : p.int_dot_efficiency,
                  // 0: not measured (the GEMMs' factor)
                  p.int_dot_gemv_efficiency > 0 ? std::clamp(p.int_dot_gemv_efficiency, 0.001, 1.5) : 0.0,
                  p.int8_dot_gemv_efficiency > 0 ? std::clamp(p.int8_dot_gemv_efficiency, 0.001, 1.5) : 0.0);
  char gemv_line[200] = "";
  if (p.gemv_efficiency > 0)
    std::snprintf(gemv_line, sizeof gemv_line,
                  "gemv = %.3f                    # %s f32 GEMV at 8 rows (weights in cache) / FMA peak\n",
                  std::clamp(p.gemv_efficiency, 0.01, 1.5),
                  p.gemv_efficiency == std::clamp(p.gemv_efficiency, 0.01, 1.5) ? "measured" : "clamped: measured");
  char buf[8192];
  std::snprintf(buf, sizeof buf,
                "# Measured by `lathe probe` on %s: %s (%s), %d threads.\n"
                "# Streaming read %.1f GB/s (one thread %.1f GB/s); f32 FMA %.1f GFLOP/s all threads,\n"
                "# %.1f GFLOP/s one thread; parallel loop overhead %.2f us; sgemm %.1f GFLOP/s (%.0f%% of FMA)\n"
                "# at 256 rows, %.1f GFLOP/s at 32 rows; int4 x int8 GEMM %.1f GOP/s at K = 2048, %.1f at 512,\n"
                "# %.1f at 32 rows; int8 x int8 GEMM %.1f GOP/s at K = 2048, %.1f at 512, %.1f at 32 rows;\n"
                "# flash attention over a 512-token prompt %.1f GFLOP/s (16 query heads on 2 KV heads, head_dim\n"
                "# 128), %.1f at head_dim 64, %.1f with 2 on 2; efficiency.attention and its two halves fit\n"
                "# the three (efficiency = attention / (1 + half_dim / head_dim + half_group / group)).\n"
                "# efficiency.gemm and gemm_half_rows fit those two sgemm points (efficiency at M rows =\n"
                "# gemm x M / (M + gemm_half_rows)); int_dot / int8_dot, their half_k and half_rows fit\n"
                "# the integer GEMMs' three points (efficiency = int_dot / (1 + half_k / K + half_rows / M),\n"
                "# M a whole number of 4-row register tiles; the cost model counts a partial tile whole).\n"
                "# The generated f32 GEMV of decode (at most 8 rows) reached %.1f GFLOP/s at 8 rows, K 2048,\n"
                "# its weights in cache: efficiency.gemv (its memory time is added by the cost model); the\n"
                "# integer GEMVs %.1f (int4) and %.1f (int8) GOP/s the same way, %.1f and %.1f at K 512:\n"
                "# int_dot_gemv, int8_dot_gemv and their half_k fit the two (efficiency = int_dot_gemv /\n"
                "# (1 + int_dot_gemv_half_k / K)).\n"
                "# The other efficiencies are lathe's CPU defaults until `lathe calibrate` fits them.\n"
                "[hardware]\n"
                "name = \"%s\"\n"
                "description = \"%s, %d threads (measured %s)\"\n"
                "kind = \"cpu\"\n"
                "sm_count = %d                  # threads the runtime uses\n"
                "clock_mhz = %.0f\n"
                "memory_gb = %.1f\n"
                "hbm_bandwidth_gbs = %.2f       # measured streaming read, all threads\n"
                "l2_mb = %.1f                   # last-level cache\n"
                "smem_per_sm_kb = 0\n"
                "launch_overhead_us = %.2f      # measured parallel-loop round trip\n"
                "gemm_half_rows = %.1f          # measured: sgemm at 32 and 256 rows\n"
                "int_dot_half_k = %.1f          # measured: the int4 GEMM at K = 512 and 2048\n"
                "int8_dot_half_k = %.1f         # the same for int8 weights\n"
                "int_dot_half_rows = %.1f       # measured: the int4 GEMM at 128 and 32 rows\n"
                "int8_dot_half_rows = %.1f      # the same for int8 weights\n"
                "int_dot_gemv_half_k = %.1f     # measured: the int4 GEMV at 8 rows, K = 512 and 2048\n"
                "int8_dot_gemv_half_k = %.1f    # the same for int8 weights\n"
                "attention_half_dim = %.1f      # measured: flash attention at head_dim 128 and 64\n"
                "attention_half_group = %.2f    # measured: flash attention with 8 and 1 query heads per KV head\n"
                "roofline_exponent = 4         # out-of-order cores overlap streaming loads and ALU work\n"
                "price_per_hour = 0\n\n"
                "[hardware.peak_tflops]\n"
                "fp32 = %.5f                    # measured FMA throughput, all threads\n"
                "%s\n"
                "[hardware.efficiency]\n"
                "gemm = %.3f                    # measured sgemm / FMA peak, large-M limit\n"
                "%s"
                "attention = %.3f               # %s\n"
                "memory = 0.85\n"
                "elementwise = 0.50\n"
                "%s",
                date, p.cpu_model.c_str(), p.isa.c_str(), p.threads, p.read_gbs, p.read_gbs_one, p.fma_gflops_all,
                p.fma_gflops_one, p.loop_overhead_us, p.gemm_gflops,
                p.fma_gflops_all > 0 ? 100.0 * p.gemm_gflops / p.fma_gflops_all : 0.0, p.gemm_gflops_small,
                p.int_gemm_gops, p.int_gemm_gops_short, p.int_gemm_gops_rows, p.int8_gemm_gops, p.int8_gemm_gops_short,
                p.int8_gemm_gops_rows, p.attention_gflops, p.attention_gflops_short, p.attention_gflops_group1,
                p.gemv_gflops, p.int_gemv_gops, p.int8_gemv_gops, p.int_gemv_gops_short, p.int8_gemv_gops_short,
                name.c_str(), p.cpu_model.c_str(), p.threads, date, p.threads, p.clock_mhz, p.memory_gb, p.read_gbs,
                p.l3_mb, p.loop_overhead_us, p.gemm_half_rows, p.int_dot_half_k, p.int8_dot_half_k, p.int_dot_half_rows, p.int8_dot_half_rows, p.int_dot_gemv_half_k, p.int8_dot_gemv_half_k, p.attention_half_dim, p.attention_half_group, p.fma_gflops_all / 1e3, int8_line,
                std::max(0.05, p.gemm_efficiency), gemv_line,
                p.attention_efficiency > 0 ? std::clamp(p.attention_efficiency, 0.01, 1.5) : 0.40,
                p.attention_efficiency > 0 ? "measured flash attention / FMA peak, large head_dim and group limit"
                                           : "default (not measured)",
                int_dot_line);
  // The kernel build measured (a later build's kernels make these figures stale).
  std::string out = buf;
  std::string warn;
  for (const std::string& w : probe_warnings(p)) warn += "# Warning: " + w + ".\n";
  if (!warn.empty())
    out.insert(out.find("[hardware]\n"), warn + "# The host was busy while measuring: run lathe probe again on a quiet machine.\n");
  const size_t at = out.find("kind = \"cpu\"\n");
  if (at != std::string::npos) out.insert(at, "measured_with = \"" + std::string(cpu_kernels_id()) + "\"\n");
  return out;
}

}  // namespace lathe
