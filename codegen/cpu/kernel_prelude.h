// Building blocks of generated CPU kernels, and the host's conversions and
// quantizers (one implementation for both). Every generated translation unit starts
// with abi.h and this file (embedded as text by codegen); kernels instantiate these
// templates with their node's constants (dims, formats, layout, group size), the
// way CUDA kernels are specialized for NVRTC. Plain C++17, no standard headers: the
// JIT compiles it in tens of milliseconds.
//
// Storage formats (the runtime writes weights and the KV cache this way):
//   F32 float; F16 / BF16 16-bit; I8 int8 with one f16 scale per row (G = 0) or per
//   G elements; I4 int4 with one f16 scale per G elements, value = (q - 8) x scale,
//   packed per 32 elements like GGUF Q4_0: byte j holds element j (low nibble) and
//   element j + 16 (high nibble).
#ifndef LATHE_KERNEL_PRELUDE_H
#define LATHE_KERNEL_PRELUDE_H

#include "codegen/cpu/abi.h"

namespace lk {

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long i64;

enum Fmt { F32 = 0, F16 = 1, BF16 = 2, I8 = 3, I4 = 4 };
enum Layout { LHTD = 0, LTHD = 1, TLHD = 2, PAGED = 3 };
enum Prologue { PRO_NONE = 0, PRO_RMS_NORM = 1, PRO_GATHER = 2 };
enum Epilogue { EPI_NONE = 0, EPI_RESIDUAL = 1, EPI_SILU_MUL = 2, EPI_COMBINE = 3, EPI_COMBINE_RESIDUAL = 4 };

// ---------------------------------------------------------------- conversions
inline float bits_to_float(u32 u) {
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
inline u32 float_to_bits(float f) {
  u32 u;
  __builtin_memcpy(&u, &f, 4);
  return u;
}
inline float h2f(u16 h) {
  u32 sign = u32(h & 0x8000u) << 16, em = h & 0x7fffu;
  float f = bits_to_float(em << 13) * 5.192296858534828e33f;  // x 2^112 rebiases normals and subnormals
  u32 u = float_to_bits(f);
  if (em >= 0x7c00u) u |= 0x7f800000u;  // inf / nan
  return bits_to_float(u | sign);
}
inline u16 f2h(float f) {  // round to nearest even
  u32 x = float_to_bits(f), sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return u16(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (x >= 0x477ff000u) return u16(sign | 0x7c00u);
  if (x < 0x38800000u) {
    if (x < 0x33000001u) return u16(sign);
    u32 m = (x & 0x7fffffu) | 0x800000u;
    int e = 126 - int(x >> 23);
    u32 r = m >> e, rem = m & ((1u << e) - 1), half = 1u << (e - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return u16(sign | r);
  }
  u32 r = (x - 0x38000000u) >> 13, rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return u16(sign | r);
}
inline float bf2f(u16 b) { return bits_to_float(u32(b) << 16); }
inline u16 f2bf(float f) {
  u32 u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return u16((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return u16(u >> 16);
}
inline float silu(float x) { return x / (1.0f + __builtin_expf(-x)); }
inline i64 min64(i64 a, i64 b) { return a < b ? a : b; }

// ---------------------------------------------------------------- quantizers
// int8 over n values: scale = max|x| / 127.
inline void quant_i8(const float* x, int n, i8* q, u16* scale) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = __builtin_fmaxf(amax, __builtin_fabsf(x[i]));
  float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) q[i] = i8(__builtin_roundf(x[i] * id));
  *scale = f2h(d);
}
// int4 over n values (n a multiple of 32), the Q4_0 rule: d = (signed max) / -8.
inline void quant_i4(const float* x, int n, u8* q, u16* scale) {
  float amax = 0, m = 0;
  for (int i = 0; i < n; ++i)
    if (__builtin_fabsf(x[i]) > amax) {
      amax = __builtin_fabsf(x[i]);
      m = x[i];
    }
  float d = m / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
  for (int b = 0; b < n / 32; ++b)
    for (int j = 0; j < 16; ++j) {
      int lo = int(x[b * 32 + j] * id + 8.5f), hi = int(x[b * 32 + j + 16] * id + 8.5f);
      lo = lo < 0 ? 0 : (lo > 15 ? 15 : lo);
      hi = hi < 0 ? 0 : (hi > 15 ? 15 : hi);
      q[b * 16 + j] = u8(lo | (hi << 4));
    }
  *scale = f2h(d);
}

// ---------------------------------------------------------------- weights
// 32 elements [32 kb, 32 kb + 32) of row n of a [N, K] weight, dequantized (the
// per-row int8 scale is applied by row_scale).
template <int FMT, int K, int G>
inline void wblock(const void* w, const u16* s, i64 n, int kb, float* o) {
  if constexpr (FMT == F32) {
    const float* p = (const float*)w + n * K + kb * 32;
    for (int j = 0; j < 32; ++j) o[j] = p[j];
  } else if constexpr (FMT == F16) {
    const u16* p = (const u16*)w + n * K + kb * 32;
    for (int j = 0; j < 32; ++j) o[j] = h2f(p[j]);
  } else if constexpr (FMT == BF16) {
    const u16* p = (const u16*)w + n * K + kb * 32;
    for (int j = 0; j < 32; ++j) o[j] = bf2f(p[j]);
  } else if constexpr (FMT == I8) {
    const i8* p = (const i8*)w + n * K + kb * 32;
    float sc = G > 0 ? h2f(s[n * (K / (G > 0 ? G : 1)) + (kb * 32) / (G > 0 ? G : 1)]) : 1.0f;
    for (int j = 0; j < 32; ++j) o[j] = float(p[j]) * sc;
  } else {
    const u8* p = (const u8*)w + n * (K / 2) + kb * 16;
    float sc = h2f(s[n * (K / G) + (kb * 32) / G]);
    for (int j = 0; j < 16; ++j) {
      o[j] = float(int(p[j] & 15) - 8) * sc;
      o[j + 16] = float(int(p[j] >> 4) - 8) * sc;
    }
  }
}
template <int FMT, int G>
inline float row_scale(const u16* s, i64 n) {
  if constexpr (FMT == I8 && G == 0) return h2f(s[n]);
  return 1.0f;
}
// Element offset of expert e's [N, K] matrix in a [E, N, K] weight, and of its scales.
template <int FMT, int K, int G>
inline const void* expert_w(const void* w, i64 e, i64 N) {
  if constexpr (FMT == F32) return (const float*)w + e * N * K;
  if constexpr (FMT == F16 || FMT == BF16) return (const u16*)w + e * N * K;
  if constexpr (FMT == I8) return (const i8*)w + e * N * K;
  return (const u8*)w + e * N * (K / 2);
}
template <int FMT, int K, int G>
inline const u16* expert_s(const u16* s, i64 e, i64 N) {
  if constexpr (FMT == I8 && G == 0) return s + e * N;
  if constexpr (FMT == I8 || FMT == I4) return s + e * N * (K / G);
  return s;
}

// out[m] = sum_k W[n, k] x[m ldx + k] for m < M (M <= 16): one pass over the row.
template <int FMT, int K, int G>
inline void gemv_row(const void* w, const u16* s, i64 n, const float* x, i64 ldx, int M, float* out) {
  float wb[32];
  if (M == 1) {
    float acc[32] = {0};
    for (int kb = 0; kb < K / 32; ++kb) {
      wblock<FMT, K, G>(w, s, n, kb, wb);
      const float* xp = x + kb * 32;
      for (int j = 0; j < 32; ++j) acc[j] += wb[j] * xp[j];
    }
    float t = 0;
    for (int j = 0; j < 32; ++j) t += acc[j];
    out[0] = t * row_scale<FMT, G>(s, n);
    return;
  }
  float acc[16][32];
  for (int m = 0; m < M; ++m)
    for (int j = 0; j < 32; ++j) acc[m][j] = 0;
  for (int kb = 0; kb < K / 32; ++kb) {
    wblock<FMT, K, G>(w, s, n, kb, wb);
    for (int m = 0; m < M; ++m) {
      const float* xp = x + m * ldx + kb * 32;
      for (int j = 0; j < 32; ++j) acc[m][j] += wb[j] * xp[j];
    }
  }
  float rs = row_scale<FMT, G>(s, n);
  for (int m = 0; m < M; ++m) {
    float t = 0;
    for (int j = 0; j < 32; ++j) t += acc[m][j];
    out[m] = t * rs;
  }
}

// C[mt, nb] (ldc) = A[mt, K] . W[n0 .. n0 + nb)^T + beta C, through the runtime's
// sgemm; quantized weights are dequantized block by block into `wbuf` (nb x K).
template <int FMT, int K, int G>
inline void gemm_block(const LatheCtx* c, float* wbuf, const float* A, i64 lda, i64 mt, const void* w, const u16* s,
                       i64 n0, i64 nb, float* C, i64 ldc, float beta) {
  if constexpr (FMT == F32) {
    c->sgemm_nt(mt, nb, K, A, lda, (const float*)w + n0 * K, K, C, ldc, beta);
  } else {
    for (i64 r = 0; r < nb; ++r) {
      float rs = row_scale<FMT, G>(s, n0 + r);
      for (int kb = 0; kb < K / 32; ++kb) {
        wblock<FMT, K, G>(w, s, n0 + r, kb, wbuf + r * K + kb * 32);
        if constexpr (FMT == I8 && G == 0)
          for (int j = 0; j < 32; ++j) wbuf[r * K + kb * 32 + j] *= rs;
      }
    }
    c->sgemm_nt(mt, nb, K, A, lda, wbuf, K, C, ldc, beta);
  }
}

// ---------------------------------------------------------------- parallel loops
template <class F>
inline void par(const LatheCtx* c, i64 n, i64 grain, const F& f) {
  struct Box {
    const F* f;
  } box{&f};
  c->parallel_for(
      c->pool, n, grain, [](void* p, long b, long e, int t) { (*static_cast<Box*>(p)->f)(b, e, t); }, &box);
}

// ---------------------------------------------------------------- norms, RoPE
inline float rms_scale(const float* x, int K, float eps) {
  float ss = 0;
  for (int k = 0; k < K; ++k) ss += x[k] * x[k];
  return 1.0f / __builtin_sqrtf(ss / float(K) + eps);
}
template <int K>
inline void rms_norm_row(const float* x, const float* w, float eps, float* y) {
  float r = rms_scale(x, K, eps);
  for (int k = 0; k < K; ++k) y[k] = x[k] * r * w[k];
}
// cos/sin of position pos for the D/2 rotation pairs (2i, 2i+1), frequency
// theta^(-2i/D); computed in double so long contexts stay accurate.
template <int D>
inline void rope_table(int pos, double theta, float* cs, float* sn) {
  for (int i = 0; i < D / 2; ++i) {
    double freq = __builtin_pow(theta, -2.0 * double(i) / double(D));
    double a = double(pos) * freq;
    cs[i] = float(__builtin_cos(a));
    sn[i] = float(__builtin_sin(a));
  }
}
template <int D>
inline void rope_rotate(const float* x, const float* cs, const float* sn, float* y) {
  for (int i = 0; i < D / 2; ++i) {
    float a = x[2 * i], b = x[2 * i + 1];
    y[2 * i] = a * cs[i] - b * sn[i];
    y[2 * i + 1] = a * sn[i] + b * cs[i];
  }
}

// ---------------------------------------------------------------- KV cache
// Index of the (layer, k|v, slot, position, kv head) vector; see ir/plan_options.h.
template <int LAY, int L, int KVH, int TCAP, int NB, int SLOTS>
inline i64 kv_index(const LatheStep* st, int layer, int kv, int slot, int t, int h) {
  if constexpr (LAY == LHTD) return ((((i64)layer * 2 + kv) * SLOTS + slot) * KVH + h) * TCAP + t;
  if constexpr (LAY == LTHD) return ((((i64)layer * 2 + kv) * SLOTS + slot) * TCAP + t) * KVH + h;
  if constexpr (LAY == TLHD) return ((((i64)slot * TCAP + t) * L + layer) * 2 + kv) * KVH + h;
  i64 blk = st->block_table[(i64)slot * st->blocks_per_slot + t / NB];
  return (((blk * L + layer) * 2 + kv) * KVH + h) * NB + t % NB;
}
template <int KF, int D>
inline void kv_load(const LatheCtx* c, i64 v, float* o) {
  if constexpr (KF == F32) {
    const float* p = (const float*)c->kv + v * D;
    for (int i = 0; i < D; ++i) o[i] = p[i];
  } else if constexpr (KF == F16) {
    const u16* p = (const u16*)c->kv + v * D;
    for (int i = 0; i < D; ++i) o[i] = h2f(p[i]);
  } else if constexpr (KF == BF16) {
    const u16* p = (const u16*)c->kv + v * D;
    for (int i = 0; i < D; ++i) o[i] = bf2f(p[i]);
  } else if constexpr (KF == I8) {
    const i8* p = (const i8*)c->kv + v * D;
    float sc = h2f(c->kv_scales[v]);
    for (int i = 0; i < D; ++i) o[i] = float(p[i]) * sc;
  } else {
    const u8* p = c->kv + v * (D / 2);
    float sc = h2f(c->kv_scales[v]);
    for (int b = 0; b < D / 32; ++b)
      for (int j = 0; j < 16; ++j) {
        o[b * 32 + j] = float(int(p[b * 16 + j] & 15) - 8) * sc;
        o[b * 32 + j + 16] = float(int(p[b * 16 + j] >> 4) - 8) * sc;
      }
  }
}
template <int KF, int D>
inline void kv_store(const LatheCtx* c, i64 v, const float* x) {
  if constexpr (KF == F32) {
    float* p = (float*)c->kv + v * D;
    for (int i = 0; i < D; ++i) p[i] = x[i];
  } else if constexpr (KF == F16) {
    u16* p = (u16*)c->kv + v * D;
    for (int i = 0; i < D; ++i) p[i] = f2h(x[i]);
  } else if constexpr (KF == BF16) {
    u16* p = (u16*)c->kv + v * D;
    for (int i = 0; i < D; ++i) p[i] = f2bf(x[i]);
  } else if constexpr (KF == I8) {
    quant_i8(x, D, (i8*)c->kv + v * D, c->kv_scales + v);
  } else {
    quant_i4(x, D, c->kv + v * (D / 2), c->kv_scales + v);
  }
}

}  // namespace lk

#endif
