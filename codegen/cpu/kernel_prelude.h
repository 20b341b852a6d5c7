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
#if defined(__F16C__) && defined(__clang__)
typedef short v8s __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
inline float h2f(u16 h) {
  v8s v = {short(h)};
  return __builtin_ia32_vcvtph2ps(v)[0];
}
#else
inline float h2f(u16 h) {
  u32 sign = u32(h & 0x8000u) << 16, em = h & 0x7fffu;
  float f = bits_to_float(em << 13) * 5.192296858534828e33f;  // x 2^112 rebiases normals and subnormals
  u32 u = float_to_bits(f);
  if (em >= 0x7c00u) u |= 0x7f800000u;  // inf / nan
  return bits_to_float(u | sign);
}
#endif
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

// ---------------------------------------------------------------- vectors
// 16-lane vectors (one AVX-512 register, two AVX2 registers): explicit so the
// compiler vectorizes along K, never across blocks. GCC notes that returning them
// without AVX-512 changes the ABI; the host compiles this file for its conversions and
// quantizers only (inline, never across a library boundary), so the note is silenced.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float vf __attribute__((vector_size(64)));
typedef int vi __attribute__((vector_size(64)));
typedef unsigned short vh __attribute__((vector_size(32)));
typedef unsigned char vb __attribute__((vector_size(16)));
typedef signed char vsb __attribute__((vector_size(16)));

inline vf vload(const float* p) {
  vf v;
  __builtin_memcpy(&v, p, 64);
  return v;
}
inline void vstore(float* p, vf v) { __builtin_memcpy(p, &v, 64); }
inline vf vsplat(float x) { return vf{} + x; }
// The 16 lanes reduced by op, a tree over halves (a loop over the lanes would be one
// serial chain).
template <class Op>
inline float vreduce(vf v, Op op) {
  typedef float v8 __attribute__((vector_size(32)));
  typedef float v4 __attribute__((vector_size(16)));
  const v8 a = op(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7),
                  __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
  const v4 b = op(__builtin_shufflevector(a, a, 0, 1, 2, 3), __builtin_shufflevector(a, a, 4, 5, 6, 7));
  return op(op(b[0], b[1]), op(b[2], b[3]));
}
inline float vsum(vf v) {
  return vreduce(v, [](auto x, auto y) { return x + y; });
}
inline float vmax_lanes(vf v) {
  return vreduce(v, [](auto x, auto y) { return x > y ? x : y; });
}
inline vf h2f_v(vh h) {
#if defined(__F16C__) && defined(__clang__)
  v8s a, b;
  __builtin_memcpy(&a, &h, 16);
  __builtin_memcpy(&b, (const char*)&h + 16, 16);
  v8f lo = __builtin_ia32_vcvtph2ps256(a), hi = __builtin_ia32_vcvtph2ps256(b);
  vf r;
  __builtin_memcpy(&r, &lo, 32);
  __builtin_memcpy((char*)&r + 32, &hi, 32);
  return r;
#endif
  vi x = __builtin_convertvector(h, vi);
  vi sign = (x & 0x8000) << 16, em = x & 0x7fff;
  vf f = (vf)(em << 13) * 5.192296858534828e33f;
  vi u = (vi)f | ((em >= 0x7c00) & 0x7f800000);
  return (vf)(u | sign);
}
inline vf bf2f_v(vh h) { return (vf)(__builtin_convertvector(h, vi) << 16); }
// exp(x) lane by lane for x <= 0 (attention scores minus their running max): 2^n e^r
// with n the nearest integer to x / ln 2, |r| <= ln 2 / 2, and a degree-6 Taylor
// polynomial (relative error below 2e-7); x below -87 gives 0.
inline vf vexp_neg(vf x) {
  const vi under = x < -87.0f;
  x = (vf)(((vi)x & ~under) | ((vi)(vf{} - 87.0f) & under));
  const vi n = __builtin_convertvector(x * 1.44269504088896341f - 0.5f, vi);  // x <= 0: trunc = ceil
  const vf nf = __builtin_convertvector(n, vf);
  const vf r = x - nf * 0.693145751953125f - nf * 1.42860682030941723212e-6f;
  vf p = vsplat(1.0f / 720);
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return (vf)((vi)(p * (vf)((n + 127) << 23)) & ~under);
}
// silu(x) = x / (1 + e^-x) lane by lane, from e = exp(-|x|) (vexp_neg's range, so no
// overflow): x / (1 + e) for x >= 0, x e / (1 + e) below. A scalar libm expf per value
// cost about 3 ns here, a fifth of a 128-row prefill gate/up GEMM's time.
inline vf vsilu(vf x) {
  const vi neg = x < 0.0f;
  const vf e = vexp_neg((vf)((vi)x | (vi{} + int(0x80000000u))));  // -|x|: the sign bit set
  const vf num = (vf)(((vi)e & neg) | ((vi)vsplat(1.0f) & ~neg));
  return x * num / (1.0f + e);
}
// o[i] = silu(g[i]) * u[i] (u null: silu(g[i])) for i < n, 16 lanes at a time; the
// tail goes through the same vector code, so a value's result never depends on where
// it sits. o may be g or u.
inline void silu_mul(const float* g, const float* u, float* o, i64 n) {
  i64 i = 0;
  for (; i + 16 <= n; i += 16) {
    vf s = vsilu(vload(g + i));
    if (u) s *= vload(u + i);
    vstore(o + i, s);
  }
  if (i == n) return;
  float tg[16] = {}, tu[16] = {};
  for (i64 j = i; j < n; ++j) tg[j - i] = g[j], tu[j - i] = u ? u[j] : 1.0f;
  vstore(tg, vsilu(vload(tg)) * vload(tu));
  for (i64 j = i; j < n; ++j) o[j] = tg[j - i];
}
// The 16 lane sums of a[0..15] as one vector (lane j = the sum of a[j]'s lanes): four
// rounds that each add two shuffles of vector pairs, halving the lanes each vector of
// the pair keeps (30 shuffles and 15 adds, where a transpose is 64 shuffles).
inline vf hsum16(const vf* a) {
  vf u[8], w[4], x[2];
  for (int i = 0; i < 8; ++i)  // lanes 0-7: a[i], 8-15: a[i + 8]
    u[i] = __builtin_shufflevector(a[i], a[i + 8], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
           __builtin_shufflevector(a[i], a[i + 8], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  for (int i = 0; i < 4; ++i)  // 4 lanes each: a[i], a[i + 4], a[i + 8], a[i + 12]
    w[i] = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27) +
           __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int i = 0; i < 2; ++i)  // 2 lanes each: a[i], a[i + 2], ..., a[i + 14]
    x[i] = __builtin_shufflevector(w[i], w[i + 2], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29) +
           __builtin_shufflevector(w[i], w[i + 2], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  return __builtin_shufflevector(x[0], x[1], 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30) +
         __builtin_shufflevector(x[0], x[1], 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
}
// 16 x 16 transpose in place: four stages swap the off-diagonal d x d blocks (d = 8, 4,
// 2, 1), each a two-source shuffle per pair of rows.
inline void transpose16(vf* m) {
  for (int i = 0; i < 16; ++i) {
    if (i & 8) continue;
    const vf a = m[i], b = m[i + 8];
    m[i] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    m[i + 8] = __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  }
  for (int i = 0; i < 16; ++i) {
    if (i & 4) continue;
    const vf a = m[i], b = m[i + 4];
    m[i] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    m[i + 4] = __builtin_shufflevector(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
  }
  for (int i = 0; i < 16; ++i) {
    if (i & 2) continue;
    const vf a = m[i], b = m[i + 2];
    m[i] = __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
    m[i + 2] = __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  }
  for (int i = 0; i < 16; ++i) {
    if (i & 1) continue;
    const vf a = m[i], b = m[i + 1];
    m[i] = __builtin_shufflevector(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
    m[i + 1] = __builtin_shufflevector(a, b, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
  }
}
// All bits set in lanes 0..n-1, none in lanes n..15.
inline vi vlanes_below(int n) {
  const vi iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return iota < n;
}

// ---------------------------------------------------------------- weights
// Elements [32 kb, 32 kb + 32) of row n of a [N, K] weight as two vectors (lo: the
// first 16, hi: the next 16), dequantized; the per-row int8 scale is applied by
// row_scale.
template <int FMT, int K, int G>
inline void wblock2(const void* w, const u16* s, i64 n, int kb, vf& lo, vf& hi) {
  if constexpr (FMT == F32) {
    const float* p = (const float*)w + n * K + kb * 32;
    lo = vload(p);
    hi = vload(p + 16);
  } else if constexpr (FMT == F16 || FMT == BF16) {
    const u16* p = (const u16*)w + n * K + kb * 32;
    vh a, b;
    __builtin_memcpy(&a, p, 32);
    __builtin_memcpy(&b, p + 16, 32);
    if constexpr (FMT == F16) {
      lo = h2f_v(a);
      hi = h2f_v(b);
    } else {
      lo = bf2f_v(a);
      hi = bf2f_v(b);
    }
  } else if constexpr (FMT == I8) {
    const i8* p = (const i8*)w + n * K + kb * 32;
    vsb a, b;
    __builtin_memcpy(&a, p, 16);
    __builtin_memcpy(&b, p + 16, 16);
    lo = __builtin_convertvector(a, vf);
    hi = __builtin_convertvector(b, vf);
    if constexpr (G > 0) {
      float sc = h2f(s[n * (K / G) + (kb * 32) / G]);
      lo *= sc;
      hi *= sc;
    }
  } else {
    const u8* p = (const u8*)w + n * (K / 2) + kb * 16;
    vb q;
    __builtin_memcpy(&q, p, 16);
    float sc = h2f(s[n * (K / G) + (kb * 32) / G]);
    lo = (__builtin_convertvector(q & 15, vf) - 8.0f) * sc;
    hi = (__builtin_convertvector(q >> 4, vf) - 8.0f) * sc;
  }
}
template <int FMT, int K, int G>
inline void wblock(const void* w, const u16* s, i64 n, int kb, float* o) {
  vf lo, hi;
  wblock2<FMT, K, G>(w, s, n, kb, lo, hi);
  vstore(o, lo);
  vstore(o + 16, hi);
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

// out[m] = sum_k W[n, k] x[m ldx + k] for m < M: one pass over the weight row, M
// rows of x (M a compile-time constant so the accumulators stay in registers).
// Unscaled quantized values of a 32-element block (int8 as is, int4 as q - 8).
template <int FMT, int K>
inline void qblock2(const void* w, i64 n, int kb, vf& lo, vf& hi) {
  if constexpr (FMT == I8) {
    const i8* p = (const i8*)w + n * K + kb * 32;
    vsb a, b;
    __builtin_memcpy(&a, p, 16);
    __builtin_memcpy(&b, p + 16, 16);
    lo = __builtin_convertvector(a, vf);
    hi = __builtin_convertvector(b, vf);
  } else {
    const u8* p = (const u8*)w + n * (K / 2) + kb * 16;
    vb q;
    __builtin_memcpy(&q, p, 16);
    lo = __builtin_convertvector(q & 15, vf) - 8.0f;
    hi = __builtin_convertvector(q >> 4, vf) - 8.0f;
  }
}

template <int FMT, int K, int G, int M>
inline void gemv_row_m(const void* w, const u16* s, i64 n, const float* x, i64 ldx, float* out) {
  vf acc[M][2];
  for (int m = 0; m < M; ++m) acc[m][0] = acc[m][1] = vf{};
  if constexpr ((FMT == I8 && G > 0) || FMT == I4) {
    // Grouped formats: one scale per group, applied once per block product.
    // Two blocks per iteration into two accumulators with fixed indices (a
    // dynamically indexed accumulator would live on the stack).
    const u16* srow = s + n * (K / G);
    constexpr int NBK = K / 32;
    auto block = [&](int kb, int slot) {
      vf lo, hi;
      qblock2<FMT, K>(w, n, kb, lo, hi);
      float sc = h2f(srow[(kb * 32) / G]);
      for (int m = 0; m < M; ++m) {
        const float* xp = x + m * ldx + kb * 32;
        vf p = lo * vload(xp) + hi * vload(xp + 16);
        if (slot == 0) acc[m][0] += p * sc;
        else acc[m][1] += p * sc;
      }
    };
    int kb = 0;
    for (; kb + 1 < NBK; kb += 2) {
      block(kb, 0);
      block(kb + 1, 1);
    }
    if constexpr (NBK % 2 == 1) block(NBK - 1, 0);
  } else {
    for (int kb = 0; kb < K / 32; ++kb) {
      vf lo, hi;
      wblock2<FMT, K, G>(w, s, n, kb, lo, hi);
      for (int m = 0; m < M; ++m) {
        const float* xp = x + m * ldx + kb * 32;
        acc[m][0] += lo * vload(xp);
        acc[m][1] += hi * vload(xp + 16);
      }
    }
  }
  float rs = row_scale<FMT, G>(s, n);
  for (int m = 0; m < M; ++m) out[m] = vsum(acc[m][0] + acc[m][1]) * rs;
}
// Formats whose weight vectors need no per-block scale (f32, f16, bf16, int8 with one
// scale per row): gemv_row_m2 takes two weight rows at a time for them.
template <int FMT, int G>
constexpr bool gemv_unscaled_blocks() {
  return FMT == F32 || FMT == F16 || FMT == BF16 || (FMT == I8 && G == 0);
}
// gemv_row_m for two weight rows at once (w0 row n0 and w1 row n1: two columns of a
// GEMV, or the gate and up rows of a SwiGLU) against the same M activation rows: each
// activation vector loaded meets both rows, 0.75 loads per multiply-add at M = 4
// instead of 1.25 (the loads, not the FMAs, bounded the one-row loop). 16 accumulators
// at M = 4: with AVX-512's 32 registers they stay in registers.
template <int FMT, int K, int G, int M>
inline void gemv_row_m2(const void* w0, const u16* s0, i64 n0, const void* w1, const u16* s1, i64 n1, const float* x,
                        i64 ldx, float* out0, float* out1) {
  static_assert(gemv_unscaled_blocks<FMT, G>(), "grouped formats go a row at a time");
  vf a0[M][2], a1[M][2];
  for (int m = 0; m < M; ++m) a0[m][0] = a0[m][1] = a1[m][0] = a1[m][1] = vf{};
  for (int kb = 0; kb < K / 32; ++kb) {
    vf lo0, hi0, lo1, hi1;
    wblock2<FMT, K, G>(w0, s0, n0, kb, lo0, hi0);
    wblock2<FMT, K, G>(w1, s1, n1, kb, lo1, hi1);
    for (int m = 0; m < M; ++m) {
      const float* xp = x + m * ldx + kb * 32;
      const vf xl = vload(xp), xh = vload(xp + 16);
      a0[m][0] += lo0 * xl;
      a0[m][1] += hi0 * xh;
      a1[m][0] += lo1 * xl;
      a1[m][1] += hi1 * xh;
    }
  }
  const float r0 = row_scale<FMT, G>(s0, n0), r1 = row_scale<FMT, G>(s1, n1);
  for (int m = 0; m < M; ++m) {
    out0[m] = vsum(a0[m][0] + a0[m][1]) * r0;
    out1[m] = vsum(a1[m][0] + a1[m][1]) * r1;
  }
}
// ---------------------------------------------------------------- integer dot products
// Quantized weights (int8, int4) against activations quantized to int8 per 32-block
// (like llama.cpp's q8 activations): 32 products per VNNI / maddubs instruction
// instead of a dozen float conversions per block. Unsigned weight codes (int4 q in
// 0..15; int8 w + 128) meet signed activations; the offset comes back per block:
//   sum (q - o) x = dw dx (sum q xq - o sum xq),  o = 8 (int4) or 128 (int8).
// Bytes of one activation row quantized for the integer GEMV and GEMM (qgemv_xrow), and
// of one weight row prepared for the GEMM (qgemm_wrow): groups of 8 blocks.
constexpr i64 qgemv_group_bytes = 320, qgemm_wgroup_bytes = 288;
constexpr i64 qgemv_row_bytes(i64 K) { return (K / 32 + 7) / 8 * qgemv_group_bytes; }
constexpr i64 qgemm_wrow_bytes(i64 K) { return (K / 32 + 7) / 8 * qgemm_wgroup_bytes; }
#if defined(__AVX2__) && defined(__clang__)
#define LATHE_INT_DOT 1
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define LATHE_VNNI 1
#endif
typedef int v8i __attribute__((vector_size(32)));
typedef short v16s __attribute__((vector_size(32)));
typedef char v32c __attribute__((vector_size(32)));
typedef float v8fl __attribute__((vector_size(32)));
// One block of 32 activations: its 32 codes at qb, *d the scale; returns the sum of the
// codes.
// NaN activations count as 0 (the scalar rule's fmaxf skipped them too).
inline int quant_xblock(const float* x, i8* qb, float* d) {
#pragma clang fp contract(off)  // x id + half as two roundings, as roundf(x id) (the JIT contracts)
  vf a = vload(x), b = vload(x + 16);
  a = a == a ? a : vf{};
  b = b == b ? b : vf{};
  const vf aa = (vf)((vi)a & 0x7fffffff), ab = (vf)((vi)b & 0x7fffffff);
  const float amax = vmax_lanes(aa > ab ? aa : ab);
  const float db = amax / 127.0f, id = db > 0 ? 127.0f / amax : 0.0f;
  // round half away from zero, as roundf: trunc(v + copysign(0.5 - 2^-25, v)), exact
  // (0.5 itself would round 0.49999997 up).
  const vf sa = a * id, sb = b * id;
  const vf half = vsplat(0.49999997f);
  const vi qa = __builtin_convertvector(sa + (vf)(((vi)sa & (int)0x80000000) | (vi)half), vi);
  const vi qv = __builtin_convertvector(sb + (vf)(((vi)sb & (int)0x80000000) | (vi)half), vi);
  const vsb ca = __builtin_convertvector(qa, vsb), cb = __builtin_convertvector(qv, vsb);
  __builtin_memcpy(qb, &ca, 16);
  __builtin_memcpy(qb + 16, &cb, 16);
  *d = db;
  return int(vsum(__builtin_convertvector(qa + qv, vf)));  // at most 32 x 127: exact
}
// acc + 8 lanes, each the sum of 4 u8 (w) x s8 (x) products.
inline v8i dot_add(v8i acc, v8i w, v8i x) {
#ifdef LATHE_VNNI
  return __builtin_ia32_vpdpbusd256(acc, w, x);
#else
  // pmaddubsw saturates pairs to s16: safe for int4 codes (15 x 127 x 2), not int8.
  v16s p = __builtin_ia32_pmaddubsw256((v32c)w, (v32c)x);
  return acc + __builtin_ia32_pmaddwd256(p, v16s{} + 1);
#endif
}
// Weight scales of blocks b .. b + 7 (one per 32 elements) as floats.
template <int G>
inline v8fl block_scales8(const u16* srow, int b) {
#if defined(__F16C__)
  if constexpr (G == 32) {
    v8s h;
    __builtin_memcpy(&h, srow + b, 16);
    return __builtin_ia32_vcvtph2ps256(h);
  }
#endif
  v8fl r;
  for (int j = 0; j < 8; ++j) r[j] = h2f(srow[((b + j) * 32) / G]);
  return r;
}
inline float hsum8(v8fl v) {
  typedef float v4fl __attribute__((vector_size(16)));
  v4fl a = __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
  return (a[0] + a[2]) + (a[1] + a[3]);
}
// ---- int4 / int8 GEMV on int8 activations (decode: at most kGemvRows rows, or the
// expert GEMVs' pairs, up to 16, 8 at a time): a weight row against M activation rows. The row is taken in groups of 8 blocks (256 elements):
// the group's weight bytes are transposed as 4 x 4 dwords per 128-bit lane so that
// lane L of every code vector holds 4 bytes of block qgemv_block(L), and the activation
// rows are stored in the same order (qgemv_xrow). Eight dot products (VNNI) then
// accumulate a whole group into one int32 vector whose lanes are the 8 blocks' sums:
// one conversion and one FMA with the 8 blocks' scales per group and activation row
// (a pair of blocks at a time would take four of each, and the FMAs share the two pipes
// of the dot products). The weight code offset O (8: int4 codes; 128: int8 read as
// w + 128) starts the accumulator as -O x the block's activation code sum.
//   int4 (16 bytes a block, element j in the low nibble of byte j, j + 16 in the high
//   one): a 32-byte load holds blocks 2q and 2q + 1; after the transpose lane 4h + p
//   holds block 2p + h, nibbles split by masks.
//   int8 (32 bytes a block): vector q is built from the first 16 bytes of blocks q and
//   q + 4 (lo) or the last 16 (hi); lane L holds block L.
// A row is ceil(K / 256) groups of qgemv_group_bytes: code vectors lo0..lo3 and hi0..hi3
// (lane L of lo_r: elements 4r .. 4r + 3 of block qgemv_block(L); of hi_r: 16 + 4r ..),
// then the 8 activation scales and the 8 start values (int32), in lane order. Blocks past
// K / 32 in a last group have zero codes, scales and start values (their weight bytes
// are read from a zeroed copy).
template <int FMT>
constexpr int qgemv_block(int L) {
  return FMT == I4 ? (L % 4) * 2 + L / 4 : L;
}
template <int FMT, int K>
inline void qgemv_xrow(const float* x, u8* row) {
  constexpr int NBK = K / 32, O = FMT == I4 ? 8 : 128;
  for (int g = 0; g < (NBK + 7) / 8; ++g) {
    i8 q[8][32];
    float d[8];
    int sum[8];
    for (int k = 0; k < 8; ++k) {
      if (g * 8 + k < NBK) {
        sum[k] = quant_xblock(x + (g * 8 + k) * 32, q[k], &d[k]);
      } else {
        __builtin_memset(q[k], 0, 32);
        d[k] = 0, sum[k] = 0;
      }
    }
    u8* p = row + g * qgemv_group_bytes;
    for (int L = 0; L < 8; ++L) {
      const int k = qgemv_block<FMT>(L), start = -O * sum[k];
      for (int r = 0; r < 4; ++r) {
        __builtin_memcpy(p + r * 32 + L * 4, &q[k][4 * r], 4);
        __builtin_memcpy(p + 128 + r * 32 + L * 4, &q[k][16 + 4 * r], 4);
      }
      __builtin_memcpy(p + 256 + L * 4, &d[k], 4);
      __builtin_memcpy(p + 288 + L * 4, &start, 4);
    }
  }
}
// 4 x 4 transpose of dwords within each 128-bit lane: out r, lane p = in p, lane r.
inline void transpose4_dw(v8i* t) {
  const v8i a = __builtin_shufflevector(t[0], t[1], 0, 8, 1, 9, 4, 12, 5, 13);
  const v8i b = __builtin_shufflevector(t[0], t[1], 2, 10, 3, 11, 6, 14, 7, 15);
  const v8i c = __builtin_shufflevector(t[2], t[3], 0, 8, 1, 9, 4, 12, 5, 13);
  const v8i d = __builtin_shufflevector(t[2], t[3], 2, 10, 3, 11, 6, 14, 7, 15);
  t[0] = __builtin_shufflevector(a, c, 0, 1, 8, 9, 4, 5, 12, 13);
  t[1] = __builtin_shufflevector(a, c, 2, 3, 10, 11, 6, 7, 14, 15);
  t[2] = __builtin_shufflevector(b, d, 0, 1, 8, 9, 4, 5, 12, 13);
  t[3] = __builtin_shufflevector(b, d, 2, 3, 10, 11, 6, 7, 14, 15);
}
// Group g of weight row n as code vectors lo[4], hi[4] (unsigned) in qgemv lane order,
// and its 8 weight scales in lane order (1 for int8 with one scale per row).
template <int FMT, int K, int G>
inline void qgemv_wgroup(const void* w, const u16* s, i64 n, int g, v8i* lo, v8i* hi, v8fl& dw) {
  constexpr int NBK = K / 32, BB = FMT == I4 ? 16 : 32;  // bytes a block
  const int nb = NBK - g * 8 < 8 ? NBK - g * 8 : 8;
  const u8* src = (const u8*)w + n * (i64(NBK) * BB) + i64(g) * 8 * BB;
  u8 pad[8 * BB];
  if (nb < 8) {  // a last partial group: its blocks, then zeros
    __builtin_memset(pad, 0, sizeof pad);
    __builtin_memcpy(pad, src, nb * BB);
    src = pad;
  }
  if constexpr (FMT == I4) {
    v8i t[4];
    __builtin_memcpy(t, src, 128);
    transpose4_dw(t);
    for (int r = 0; r < 4; ++r) {
      lo[r] = t[r] & 0x0f0f0f0f;
      hi[r] = (t[r] >> 4) & 0x0f0f0f0f;
    }
  } else {
    for (int q = 0; q < 4; ++q) {
      __builtin_memcpy(&lo[q], src + q * 32, 16);
      __builtin_memcpy((char*)&lo[q] + 16, src + (q + 4) * 32, 16);
      __builtin_memcpy(&hi[q], src + q * 32 + 16, 16);
      __builtin_memcpy((char*)&hi[q] + 16, src + (q + 4) * 32 + 16, 16);
    }
    transpose4_dw(lo);
    transpose4_dw(hi);
    for (int r = 0; r < 4; ++r) {
      lo[r] ^= (int)0x80808080;  // s8 -> u8 = w + 128
      hi[r] ^= (int)0x80808080;
    }
  }
  dw = v8fl{} + 1.0f;
  if constexpr (G > 0) {
    const u16* srow = s + n * (K / G);
    v8fl d;
    if (nb == 8) {
      d = block_scales8<G>(srow, g * 8);
    } else {
      for (int k = 0; k < 8; ++k) d[k] = k < nb ? h2f(srow[((g * 8 + k) * 32) / G]) : 0.0f;
    }
    if constexpr (FMT == I4) dw = __builtin_shufflevector(d, d, 0, 2, 4, 6, 1, 3, 5, 7);
    else dw = d;
  }
}
// out[m] = W[n] . x_m for M activation rows at xr (qgemv_xrow, qgemv_row_bytes apart).
template <int FMT, int K, int G, int M>
inline void qgemv_row(const void* w, const u16* s, i64 n, const u8* xr, float* out) {
  static_assert(FMT == I4 || FMT == I8, "integer weights only");
  constexpr int NG = (K / 32 + 7) / 8;
  constexpr bool SCALED = G > 0;  // block scales (else one scale per row, applied last)
  v8fl acc[M];
  for (int m = 0; m < M; ++m) acc[m] = v8fl{};
  for (int g = 0; g < NG; ++g) {
    if constexpr (M * (FMT == I4 ? 4 : 2) >= 12) {
      // The weight stream 2 KB ahead where the dot products, not the memory, set the
      // pace (12 or more operations per weight byte: int4 from 3 rows, int8 from 6; this
      // host's GEMV runs ~10 per byte of its bandwidth). Without it a cold int8 row block
      // took the sum of its compute and memory times (K 1536 x 512 rows, 8 rows, one
      // thread: 123 us cold, 78 warm, 83 with this); at 1 row (memory-bound) it made
      // tinyllama int8 decode 10-15% slower, and at int8 4 rows 3-4%. Prefetches do not
      // fault past the end of the weights.
      constexpr i64 BB = FMT == I4 ? 16 : 32, RB = K / 32 * BB;
      const unsigned long ahead = (unsigned long)w + n * RB + g * 8 * BB + 2048;  // may pass the end
      for (int l = 0; l < 8 * BB; l += 64) __builtin_prefetch((const void*)(ahead + l));
    }
    v8i lo[4], hi[4];
    v8fl dw;
    qgemv_wgroup<FMT, K, G>(w, s, n, g, lo, hi, dw);
    for (int m = 0; m < M; ++m) {
      const u8* p = xr + m * qgemv_row_bytes(K) + g * qgemv_group_bytes;
      v8i xv[8], a;
      v8fl xd;
      __builtin_memcpy(xv, p, 256);
      __builtin_memcpy(&xd, p + 256, 32);
      __builtin_memcpy(&a, p + 288, 32);
      v8i b = v8i{};
      for (int r = 0; r < 4; ++r) {
        a = dot_add(a, lo[r], xv[r]);
        b = dot_add(b, hi[r], xv[4 + r]);
      }
      if constexpr (SCALED) acc[m] += __builtin_convertvector(a + b, v8fl) * (dw * xd);
      else acc[m] += __builtin_convertvector(a + b, v8fl) * xd;
    }
  }
  const float rs = SCALED ? 1.0f : h2f(s[n]);
  for (int m = 0; m < M; ++m) out[m] = hsum8(acc[m]) * rs;
}
// ---- int4 / int8 GEMM on int8 activations (prefill): register tiles of RM activation
// rows x RN weight rows on the GEMV's groups of 8 blocks. The activation rows are
// quantized as for the GEMV (qgemv_xrow); each weight row of a column block is prepared
// once into the same lane order, codes unpacked and its 8 scales per group beside them
// (qgemm_wrow: 288 bytes a group; int8 with one scale per row carries it in every lane).
// A tile takes a group as 8 slices of 32 code bytes: each slice loads RM activation and
// RN weight vectors and makes RM x RN dot products into int32 accumulators (one per
// output, started at the activation's -O x code sums), so a loaded vector meets RN or
// RM others; after the 8 slices each output takes one conversion and one FMA with its
// 8 blocks' scales (weight x activation).
template <int FMT, int K, int G>
inline void qgemm_wrow(const void* w, const u16* s, i64 n, u8* out) {
  for (int g = 0; g < (K / 32 + 7) / 8; ++g) {
    v8i lo[4], hi[4];
    v8fl dw;
    qgemv_wgroup<FMT, K, G>(w, s, n, g, lo, hi, dw);
    if constexpr (G == 0) dw = v8fl{} + h2f(s[n]);  // int8 with one scale per row
    u8* o = out + g * qgemm_wgroup_bytes;
    __builtin_memcpy(o, lo, 128);
    __builtin_memcpy(o + 128, hi, 128);
    __builtin_memcpy(o + 256, &dw, 32);
  }
}
// out[m x ldo + j] = W_j . x_m for RM activation rows xr[m] (qgemv_xrow) and RN weight
// rows wr[j] (qgemm_wrow).
template <int K, int RM, int RN>
inline void qgemm_tile(const u8* const* xr, const u8* const* wr, float* out, i64 ldo) {
  constexpr int NG = (K / 32 + 7) / 8;
  v8fl acc[RM][RN];
  for (int m = 0; m < RM; ++m)
    for (int j = 0; j < RN; ++j) acc[m][j] = v8fl{};
  for (int g = 0; g < NG; ++g) {
    v8i a[RM][RN];
    for (int m = 0; m < RM; ++m) {
      v8i start;
      __builtin_memcpy(&start, xr[m] + g * qgemv_group_bytes + 288, 32);
      for (int j = 0; j < RN; ++j) a[m][j] = start;
    }
    for (int r = 0; r < 8; ++r) {  // lo0..lo3 meet the activations' slices 0-3, hi0..hi3 4-7
      v8i xv[RM], wv[RN];
      for (int m = 0; m < RM; ++m) __builtin_memcpy(&xv[m], xr[m] + g * qgemv_group_bytes + r * 32, 32);
      for (int j = 0; j < RN; ++j) __builtin_memcpy(&wv[j], wr[j] + g * qgemm_wgroup_bytes + r * 32, 32);
      for (int m = 0; m < RM; ++m)
        for (int j = 0; j < RN; ++j) a[m][j] = dot_add(a[m][j], wv[j], xv[m]);
    }
    for (int j = 0; j < RN; ++j) {
      v8fl dw;
      __builtin_memcpy(&dw, wr[j] + g * qgemm_wgroup_bytes + 256, 32);
      for (int m = 0; m < RM; ++m) {
        v8fl xd;
        __builtin_memcpy(&xd, xr[m] + g * qgemv_group_bytes + 256, 32);
        acc[m][j] += __builtin_convertvector(a[m][j], v8fl) * (dw * xd);
      }
    }
  }
  for (int m = 0; m < RM; ++m)
    for (int j = 0; j < RN; ++j) out[m * ldo + j] = hsum8(acc[m][j]);
}
#endif


// ---------------------------------------------------------------- parallel loops
template <class F>
inline void par(const LatheCtx* c, i64 n, i64 grain, const F& f) {
  struct Box {
    const F* f;
  } box{&f};
  c->parallel_for(
      c->pool, n, grain, [](void* p, long b, long e, int t) { (*static_cast<Box*>(p)->f)(b, e, t); }, &box);
}

// Scratch floats for M rows of K quantized activations (qgemv_xrow).
constexpr i64 gemv_x_floats(i64 K, i64 M) { return M * qgemv_row_bytes(K) / 4 + 16; }

// Activations of a GEMV in the form its weight format wants: floats as they are, or
// (integer formats with integer dot products) quantized once for all output rows.
template <int FMT, int K>
struct GemvX {
  static constexpr bool quantized =
#if defined(LATHE_VNNI)
      FMT == I8 || FMT == I4;
#elif defined(LATHE_INT_DOT)
      FMT == I4;
#else
      false;
#endif
  const float* x = nullptr;
  i64 ldx = K;
  u8* xq = nullptr;  // rows of qgemv_xrow
  // Quantizes the M rows (when the format wants it) on the context's threads; ctx null:
  // on the calling thread.
  void prepare(const LatheCtx* ctx, const float* xs, i64 ld, int M, float* scratch) {
    x = xs;
    ldx = ld;
#ifdef LATHE_INT_DOT
    if constexpr (quantized) {
      xq = (u8*)scratch;
      auto rows = [&](i64 b, i64 e, int) {
        for (i64 m = b; m < e; ++m) qgemv_xrow<FMT, K>(xs + m * ld, xq + m * qgemv_row_bytes(K));
      };
      if (ctx && M > 1) par(ctx, M, 1, rows);
      else rows(0, M, 0);
    }
#endif
  }
};

template <int FMT, int K, int G>
inline void gemv_row(const void* w, const u16* s, i64 n, const float* x, i64 ldx, int M, float* out);

// One output row for M activation rows prepared in `gx` (m0: first row of this call).
template <int FMT, int K, int G>
inline void gemv_rows(const void* w, const u16* s, i64 n, const GemvX<FMT, K>& gx, int m0, int M, float* out) {
#ifdef LATHE_INT_DOT
  if constexpr (GemvX<FMT, K>::quantized) {
    for (int a = 0; a < M; a += 8) {
      const u8* xr = gx.xq + (m0 + a) * qgemv_row_bytes(K);
      switch (M - a < 8 ? M - a : 8) {
        case 1: qgemv_row<FMT, K, G, 1>(w, s, n, xr, out + a); break;
        case 2: qgemv_row<FMT, K, G, 2>(w, s, n, xr, out + a); break;
        case 3: qgemv_row<FMT, K, G, 3>(w, s, n, xr, out + a); break;
        case 4: qgemv_row<FMT, K, G, 4>(w, s, n, xr, out + a); break;
        case 5: qgemv_row<FMT, K, G, 5>(w, s, n, xr, out + a); break;
        case 6: qgemv_row<FMT, K, G, 6>(w, s, n, xr, out + a); break;
        case 7: qgemv_row<FMT, K, G, 7>(w, s, n, xr, out + a); break;
        default: qgemv_row<FMT, K, G, 8>(w, s, n, xr, out + a); break;
      }
    }
    return;
  }
#endif
  gemv_row<FMT, K, G>(w, s, n, gx.x + m0 * gx.ldx, gx.ldx, M, out);
}

// Whether gemv_rows2 takes its two rows in one pass: float weights without per-block
// scales (not on integer dot products), where AVX-512 has the registers for it.
template <int FMT, int K, int G>
constexpr bool gemv_two_rows() {
#ifdef __AVX512F__
  return !GemvX<FMT, K>::quantized && gemv_unscaled_blocks<FMT, G>();
#else
  return false;
#endif
}
// Two weight rows (w0 row n0, w1 row n1) against M activation rows prepared in `gx`:
// out0[m] and out1[m]; in one pass (gemv_row_m2) where gemv_two_rows, else a row at a
// time.
template <int FMT, int K, int G>
inline void gemv_rows2(const void* w0, const u16* s0, i64 n0, const void* w1, const u16* s1, i64 n1,
                       const GemvX<FMT, K>& gx, int m0, int M, float* out0, float* out1) {
  if constexpr (gemv_two_rows<FMT, K, G>()) {
    for (int a = 0; a < M; a += 4) {
      const float* x = gx.x + (m0 + a) * gx.ldx;
      switch (M - a < 4 ? M - a : 4) {
        case 1: gemv_row_m2<FMT, K, G, 1>(w0, s0, n0, w1, s1, n1, x, gx.ldx, out0 + a, out1 + a); break;
        case 2: gemv_row_m2<FMT, K, G, 2>(w0, s0, n0, w1, s1, n1, x, gx.ldx, out0 + a, out1 + a); break;
        case 3: gemv_row_m2<FMT, K, G, 3>(w0, s0, n0, w1, s1, n1, x, gx.ldx, out0 + a, out1 + a); break;
        default: gemv_row_m2<FMT, K, G, 4>(w0, s0, n0, w1, s1, n1, x, gx.ldx, out0 + a, out1 + a); break;
      }
    }
    return;
  }
  gemv_rows<FMT, K, G>(w0, s0, n0, gx, m0, M, out0);
  gemv_rows<FMT, K, G>(w1, s1, n1, gx, m0, M, out1);
}

template <int FMT, int K, int G>
inline void gemv_row(const void* w, const u16* s, i64 n, const float* x, i64 ldx, int M, float* out) {
  switch (M) {
    case 1: return gemv_row_m<FMT, K, G, 1>(w, s, n, x, ldx, out);
    case 2: return gemv_row_m<FMT, K, G, 2>(w, s, n, x, ldx, out);
    case 3: return gemv_row_m<FMT, K, G, 3>(w, s, n, x, ldx, out);
    case 4: return gemv_row_m<FMT, K, G, 4>(w, s, n, x, ldx, out);
    default:
      for (int m0 = 0; m0 < M; m0 += 4) {
        int mt = M - m0 < 4 ? M - m0 : 4;
        gemv_row<FMT, K, G>(w, s, n, x + m0 * ldx, ldx, mt, out + m0);
      }
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
// cos and sin of position pos for the D/2 rotation pairs (2i, 2i+1) at the kernel's
// frequencies freq[i] (theta^(-2i/D) over the model's RoPE divisors, a table emitted
// into the kernel), in double: the angles reach pos radians. The angle is reduced by
// the nearest multiple q of pi/2 (|r| <= pi/4; the reduction's error grows with q, about
// 1e-10 rad at a million radians, far below a float's resolution), sin r and cos r are
// Taylor polynomials to r^11 and r^12 (truncation below 7e-12), and q mod 4 picks and
// signs them. No branch and no libm call, so the loop runs on vectors; libm's double
// sin and cos and the frequencies' pow were most of a decode step's RoPE kernel.
template <int D>
inline void rope_table(int pos, const double* freq, float* cs, float* sn) {
  for (int i = 0; i < D / 2; ++i) {
    const double a = double(pos) * freq[i];
    const double q = __builtin_rint(a * 0.636619772367581343076);  // 2 / pi
    const double r = a - q * 1.57079632679489661923, r2 = r * r;
    const double s =
        r * (1 + r2 * (-1.0 / 6 + r2 * (1.0 / 120 + r2 * (-1.0 / 5040 + r2 * (1.0 / 362880 + r2 * (-1.0 / 39916800))))));
    const double co =
        1 + r2 * (-1.0 / 2 +
                  r2 * (1.0 / 24 + r2 * (-1.0 / 720 + r2 * (1.0 / 40320 + r2 * (-1.0 / 3628800 + r2 / 479001600)))));
    const long k = (long)q & 3;
    const double c1 = (k & 1) ? s : co, s1 = (k & 1) ? co : s;
    cs[i] = float(k == 1 || k == 2 ? -c1 : c1);
    sn[i] = float(k >= 2 ? -s1 : s1);
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
// Bytes of one cached K or V vector of D elements.
template <int KF, int D>
constexpr i64 kv_row_bytes() {
  return KF == F32 ? 4 * D : KF == F16 || KF == BF16 ? 2 * D : KF == I8 ? D : D / 2;
}
// Formats stored with one f16 scale per cached vector (c->kv_scales).
constexpr bool kv_scaled(int kf) { return kf == I8 || kf == I4; }
// Elements 16v .. 16v + 15 of a cached vector as floats, before its scale: I8 the
// integers, I4 the unsigned nibbles q (the value is (q - 8) x scale).
template <int KF>
inline vf kv_vec(const u8* row, int v) {
  if constexpr (KF == F32) {
    return vload((const float*)row + v * 16);
  } else if constexpr (KF == F16 || KF == BF16) {
    vh h;
    __builtin_memcpy(&h, row + v * 32, 32);
    return KF == F16 ? h2f_v(h) : bf2f_v(h);
  } else if constexpr (KF == I8) {
    vsb q;
    __builtin_memcpy(&q, row + v * 16, 16);
    return __builtin_convertvector(q, vf);
  } else {
    vb q;
    __builtin_memcpy(&q, row + (v / 2) * 16, 16);
    return __builtin_convertvector((v & 1) ? vb(q >> 4) : vb(q & 15), vf);
  }
}
// A cached vector (D a multiple of 16; of 32 for I4) as D floats: its values, I4's offset
// and I8 / I4's scale (unused for the other formats) applied.
template <int KF, int D>
inline void kv_row_f32(const u8* row, float scale, float* o) {
  for (int v = 0; v < D / 16; ++v) {
    vf x = kv_vec<KF>(row, v);
    if constexpr (KF == I4) x -= 8.0f;
    if constexpr (kv_scaled(KF)) x *= scale;
    vstore(o + v * 16, x);
  }
}
// Cached vector v as D floats.
template <int KF, int D>
inline void kv_load(const LatheCtx* c, i64 v, float* o) {
  kv_row_f32<KF, D>(c->kv + v * kv_row_bytes<KF, D>(), kv_scaled(KF) ? h2f(c->kv_scales[v]) : 1.0f, o);
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
