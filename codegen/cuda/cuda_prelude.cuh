// Building blocks of generated CUDA kernels (compiled with NVRTC). Every generated
// .cu file is this prelude followed by one node's kernel: templates instantiated with
// the node's constants (activation type T, weight format, dims, KV layout and dtype,
// group size, tile sizes). Storage formats match the CPU backend (see
// codegen/cpu/kernel_prelude.h): int4 packs 32 elements per 16 bytes (byte j = element
// j low nibble, element j + 16 high nibble), value = (q - 8) x scale; int8 scales per
// row (G = 0) or per 32; f16 scales; fp8 e4m3 with one f32 scale per row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#ifdef LATHE_FP8
#include <cuda_fp8.h>
#endif

// ---------------------------------------------------------------- ABI
struct LatheSeq {
  int slot, past, len, row0;
};
struct LatheCudaStep {
  int n_seq, n_rows, blocks_per_slot, max_len;
  const LatheSeq* seq;
  const int* row_seq;
  const int* row_pos;
  const int* block_table;
  unsigned char* kv;
  void* kv_scales;       // f16 per cached (token, head) vector; f32 for fp8
  float* scratch;        // kernel scratch (decode-attention partials, MoE products)
  unsigned* counters;    // zeroed before each step; "last block" bookkeeping
};

namespace lk {

typedef long i64;
typedef unsigned char u8;
typedef unsigned short u16;
enum Fmt { F32 = 0, F16 = 1, BF16 = 2, I8 = 3, I4 = 4, FP8 = 5 };
enum Layout { LHTD = 0, LTHD = 1, TLHD = 2, PAGED = 3 };
enum Prologue { PRO_NONE = 0, PRO_RMS_NORM = 1, PRO_GATHER = 2 };
enum Epilogue { EPI_NONE = 0, EPI_RESIDUAL = 1, EPI_SILU_MUL = 2, EPI_COMBINE = 3, EPI_COMBINE_RESIDUAL = 4 };

template <typename A, typename B>
struct same_type {
  static constexpr bool value = false;
};
template <typename A>
struct same_type<A, A> {
  static constexpr bool value = true;
};

__device__ __forceinline__ float inf() { return __int_as_float(0x7f800000); }
__device__ __forceinline__ float tof(float x) { return x; }
__device__ __forceinline__ float tof(__half x) { return __half2float(x); }
__device__ __forceinline__ float tof(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__device__ __forceinline__ T fromf(float x);
template <>
__device__ __forceinline__ float fromf<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half fromf<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 fromf<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
__device__ __forceinline__ float h2f(u16 h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ u16 f2h(float f) { return __half_as_ushort(__float2half_rn(f)); }
__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Max over the block (all threads get it); `red` holds 32 floats of shared memory.
__device__ __forceinline__ float block_max(float v, float* red) {
  v = warp_max(v);
  int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (l == 0) red[w] = v;
  __syncthreads();
  float t = l < nw ? red[l] : -inf();
  return warp_max(t);
}
// Sum over the block (all threads get it); `red` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (l == 0) red[w] = v;
  __syncthreads();
  float t = l < nw ? red[l] : 0.0f;
  return warp_sum(t);
}

// ---------------------------------------------------------------- weights
// Elements per 16-byte load of a weight row.
template <int FMT>
struct WChunk {
  static constexpr int E = FMT == F32 ? 4 : (FMT == F16 || FMT == BF16) ? 8 : (FMT == I4 ? 32 : 16);
};
// Bytes per element x 2 (int4 = 1).
template <int FMT>
__device__ __forceinline__ i64 row_bytes(i64 K) {
  return FMT == F32 ? 4 * K : (FMT == F16 || FMT == BF16) ? 2 * K : (FMT == I4 ? K / 2 : K);
}
// The 16 raw bytes of chunk c (elements c*E .. c*E+E-1) of row n of a [N, K] weight.
// Read-only path; separate from the decoding so that a lane can issue several loads
// before it needs the first.
template <int FMT, int K>
__device__ __forceinline__ uint4 wraw(const void* w, i64 n, int c) {
  // Streamed once per step: bypass L1 (ld.global.nc.L1::no_allocate), keep L1 for
  // the activations every warp re-reads.
  const void* p = reinterpret_cast<const u8*>(w) + n * row_bytes<FMT>(K) + i64(c) * 16;
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
  return r;
}
// Chunk c of row n dequantized from its raw bytes (the per-row scale of int8
// per-channel and fp8 is applied by row_scale).
template <int FMT, int K, int G>
__device__ __forceinline__ void wdecode(const uint4 raw, const void* s, i64 n, int c, float* o) {
  constexpr int E = WChunk<FMT>::E;
  const u8* b = reinterpret_cast<const u8*>(&raw);
  if constexpr (FMT == F32) {
    const float* f = reinterpret_cast<const float*>(b);
#pragma unroll
    for (int i = 0; i < E; ++i) o[i] = f[i];
  } else if constexpr (FMT == F16) {
    const __half* f = reinterpret_cast<const __half*>(b);
#pragma unroll
    for (int i = 0; i < E; ++i) o[i] = __half2float(f[i]);
  } else if constexpr (FMT == BF16) {
    const __nv_bfloat16* f = reinterpret_cast<const __nv_bfloat16*>(b);
#pragma unroll
    for (int i = 0; i < E; ++i) o[i] = __bfloat162float(f[i]);
  } else if constexpr (FMT == I8) {
    // Integer to float without the quarter-rate I2F: 2^23 + v in a float's mantissa
    // (exact for v < 2^23), minus 2^23 and the code offset.
    float sc = G > 0 ? h2f(reinterpret_cast<const u16*>(s)[n * (K / (G > 0 ? G : 1)) + (c * E) / (G > 0 ? G : 1)]) : 1.0f;
#pragma unroll
    for (int i = 0; i < E; ++i) o[i] = (__int_as_float(0x4B000000 | (b[i] ^ 0x80)) - 8388736.0f) * sc;
  } else if constexpr (FMT == I4) {
    float sc = h2f(reinterpret_cast<const u16*>(s)[n * (K / G) + (c * 32) / G]);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      o[j] = (__int_as_float(0x4B000000 | (b[j] & 15)) - 8388616.0f) * sc;
      o[j + 16] = (__int_as_float(0x4B000000 | (b[j] >> 4)) - 8388616.0f) * sc;
    }
  } else {
#ifdef LATHE_FP8
    const __nv_fp8_e4m3* f = reinterpret_cast<const __nv_fp8_e4m3*>(b);
#pragma unroll
    for (int i = 0; i < E; ++i) o[i] = float(f[i]);
#endif
  }
}
template <int FMT, int K, int G>
__device__ __forceinline__ void wchunk(const void* w, const void* s, i64 n, int c, float* o) {
  wdecode<FMT, K, G>(wraw<FMT, K>(w, n, c), s, n, c, o);
}
// E consecutive activations (or gains) as floats; 16-byte loads when E is a multiple
// of 8 (the pointer is then 16-byte aligned: rows are multiples of 32 elements).
template <typename T, int E>
__device__ __forceinline__ void xvec(const T* x, float* o) {
  if constexpr (E % 8 == 0 && sizeof(T) == 2) {
#pragma unroll
    for (int j = 0; j < E / 8; ++j) {
      const uint4 v = *reinterpret_cast<const uint4*>(x + j * 8);
      const T* t = reinterpret_cast<const T*>(&v);
#pragma unroll
      for (int i = 0; i < 8; ++i) o[j * 8 + i] = tof(t[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) o[i] = tof(x[i]);
  }
}
template <int FMT, int G>
__device__ __forceinline__ float row_scale(const void* s, i64 n) {
  if constexpr (FMT == I8 && G == 0) return h2f(reinterpret_cast<const u16*>(s)[n]);
  if constexpr (FMT == FP8) return reinterpret_cast<const float*>(s)[n];
  return 1.0f;
}
// The [N, K] matrix of expert e in a [E, N, K] weight, and its scales.
template <int FMT, int K, int G>
__device__ __forceinline__ const void* expert_w(const void* w, i64 e, i64 N) {
  return reinterpret_cast<const u8*>(w) + e * N * row_bytes<FMT>(K);
}
template <int FMT, int K, int G>
__device__ __forceinline__ const void* expert_s(const void* s, i64 e, i64 N) {
  if constexpr (FMT == I8 && G == 0) return reinterpret_cast<const u16*>(s) + e * N;
  if constexpr (FMT == FP8) return reinterpret_cast<const float*>(s) + e * N;
  if constexpr (FMT == I8 || FMT == I4) return reinterpret_cast<const u16*>(s) + e * N * (K / G);
  return s;
}

// ---------------------------------------------------------------- GEMV (decode)
// One warp per output row n; lanes stride over 16-byte chunks of the row, each chunk
// dotted with the M activation rows (the RMSNorm prologue scales them on the fly).
struct GemmDesc {
  int nw;
  i64 n[4];
  int prologue, epilogue;
  float eps;
  int last_rows;  // lm_head: one row per sequence (its last), float logits out
};

// The norm prologue is a template flag so the inner loop carries no branch. Each lane
// issues U independent 16-byte weight loads before decoding the first (memory-level
// parallelism is what a bandwidth-bound GEMV needs); activations and gains are read
// with 16-byte loads too.
template <typename T, int FMT, int K, int G, int MAXM, bool NORM, int LOADS = 0>
__device__ __forceinline__ void warp_gemv(const void* w, const void* s, i64 n, const T* const* xr, const float* rr,
                                          const T* normw, int M, float* acc) {
  constexpr int E = WChunk<FMT>::E;
  constexpr int CH = K / E;  // 16-byte chunks per row
  // Four loads in flight for 16-bit rows; one for int8/fp8/int4, whose decoding needs
  // the registers (a software-pipelined variant measured slower, docs/performance.md).
  // LOADS > 0 (tune_cuda_loads, `lathe tune --backend cuda`) sets the count instead.
  constexpr int U = LOADS > 0 ? LOADS : CH >= 32 * 4 && E <= 8 ? 4 : 1;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int m = 0; m < MAXM; ++m) acc[m] = 0.0f;
#pragma unroll 1
  for (int c0 = lane; c0 < CH; c0 += 32 * U) {
    uint4 raw[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (c0 + 32 * u < CH) raw[u] = wraw<FMT, K>(w, n, c0 + 32 * u);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + 32 * u;
      if (c < CH) {
        float wv[E];
        wdecode<FMT, K, G>(raw[u], s, n, c, wv);
        // Gains and activations in pieces of one 16-byte load (few live registers).
        constexpr int P = E % 8 == 0 ? 8 : E;
        if constexpr (NORM) {
#pragma unroll
          for (int j = 0; j < E / P; ++j) {
            float gv[P];
            xvec<T, P>(normw + c * E + j * P, gv);
#pragma unroll
            for (int i = 0; i < P; ++i) wv[j * P + i] *= gv[i];
          }
        }
#pragma unroll
        for (int m = 0; m < MAXM; ++m) {
          if (m < M) {
            float a = 0.0f;
#pragma unroll
            for (int j = 0; j < E / P; ++j) {
              float xv[P];
              xvec<T, P>(xr[m] + c * E + j * P, xv);
#pragma unroll
              for (int i = 0; i < P; ++i) a += wv[j * P + i] * xv[i];
            }
            acc[m] += NORM ? a * rr[m] : a;
          }
        }
      }
    }
  }
  float rs = row_scale<FMT, G>(s, n);
#pragma unroll
  for (int m = 0; m < MAXM; ++m) acc[m] = warp_sum(acc[m]) * rs;
}

// M up to 8 rows, handled 4 at a time (the unrolled 4-row dot keeps NVRTC's compile
// time low; rows 5-8 re-read the weight row from L2: weight loads bypass L1).
template <typename T, int FMT, int K, int G, int WARPS, bool NORM, int LOADS = 0>
__device__ void gemv_kernel(const LatheCudaStep* st, const GemmDesc& d, const T* x, const T* normw, const void* const* W,
                            const void* const* S, void* const* out, const T* res) {
  constexpr int MAXM = 8, UNROLL = 4;
  __shared__ float rr[MAXM];
  __shared__ float red[32];
  const int M = d.last_rows ? st->n_seq : st->n_rows;
  const T* xr[MAXM];
  for (int m = 0; m < MAXM && m < M; ++m) {
    i64 row = d.last_rows ? st->seq[m].row0 + st->seq[m].len - 1 : m;
    xr[m] = x + row * K;
  }
  if (NORM) {
    for (int m = 0; m < M; ++m) {
      float ss = 0.0f;
      for (int k = threadIdx.x; k < K; k += blockDim.x) {
        float v = tof(xr[m][k]);
        ss += v * v;
      }
      ss = block_sum(ss, red);
      if (threadIdx.x == 0) rr[m] = rsqrtf(ss / float(K) + d.eps);
    }
    __syncthreads();
  }
  const i64 total = d.epilogue == EPI_SILU_MUL ? d.n[0] : d.n[0] + d.n[1] + d.n[2] + d.n[3];
  const i64 g = i64(blockIdx.x) * WARPS + (threadIdx.x >> 5);
  if (g >= total) return;
  float acc[MAXM], acc2[MAXM];
  auto dot = [&](const void* w, const void* s, i64 row, float* out) {
    for (int m0 = 0; m0 < M; m0 += UNROLL)
      warp_gemv<T, FMT, K, G, UNROLL, NORM, LOADS>(w, s, row, xr + m0, rr + m0, normw, min(UNROLL, M - m0),
                                                   out + m0);
  };
  if (d.epilogue == EPI_SILU_MUL) {
    dot(W[0], S[0], g, acc);
    dot(W[1], S[1], g, acc2);
    if ((threadIdx.x & 31) == 0)
      for (int m = 0; m < M; ++m) reinterpret_cast<T*>(out[0])[m * d.n[0] + g] = fromf<T>(silu(acc[m]) * acc2[m]);
    return;
  }
  int seg = 0;
  i64 n = g;
  while (n >= d.n[seg]) n -= d.n[seg++];
  dot(W[seg], S[seg], n, acc);
  if ((threadIdx.x & 31) != 0) return;
  for (int m = 0; m < M; ++m) {
    float v = acc[m];
    if (d.epilogue == EPI_RESIDUAL) v += tof(res[m * d.n[seg] + n]);
    if (d.last_rows) reinterpret_cast<float*>(out[seg])[m * d.n[seg] + n] = v;
    else reinterpret_cast<T*>(out[seg])[m * d.n[seg] + n] = fromf<T>(v);
  }
}

// ---------------------------------------------------------------- dequantization
// The cuBLAS route of a GEMM whose weights are not in the activation dtype (prefill,
// decode steps of 5 or more rows) multiplies a copy of them in T: one warp per weight row (rows of the nw weights counted one after
// the other), each lane decoding every 32nd 16-byte chunk (the GEMV's decoding, per-row
// scale folded in) and storing it with 16-byte stores into scratch at off[seg].
template <typename T, int FMT, int K, int G>
__device__ void dequant_kernel(const LatheCudaStep* st, const void* const* W, const void* const* S, const long* n,
                               const long* off, int nw) {
  constexpr int E = WChunk<FMT>::E, CH = K / E;
  static_assert(E % 8 == 0, "dequantization stores 8 elements at a time");
  i64 r = i64(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  int seg = 0;
  while (seg < nw && r >= n[seg]) r -= n[seg++];
  if (seg >= nw) return;
  T* dst = reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(st->scratch) + off[seg]) + r * K;
  const float rs = row_scale<FMT, G>(S[seg], r);
#pragma unroll 1
  for (int c = threadIdx.x & 31; c < CH; c += 32) {
    float v[E];
    wchunk<FMT, K, G>(W[seg], S[seg], r, c, v);
#pragma unroll
    for (int j = 0; j < E / 8; ++j) {
      uint4 o;
      T* t = reinterpret_cast<T*>(&o);
#pragma unroll
      for (int i = 0; i < 8; ++i) t[i] = fromf<T>(v[j * 8 + i] * rs);
      *reinterpret_cast<uint4*>(dst + i64(c) * E + j * 8) = o;
    }
  }
}

// ---------------------------------------------------------------- GEMM (prefill)
// Tensor-core tiles (WMMA 16x16x16, T = half or bfloat16, f32 accumulate): a block
// computes a 64 x 64 output tile with 4 warps (32 x 32 each) over K in steps of 32.
// The A tile applies the RMSNorm prologue while loading; B tiles are the weight rows,
// dequantized while loading; the epilogue (residual, SiLU x up) runs on the tile in
// shared memory before one store.
constexpr int BM = 64, BN = 64, BK = 32, PAD = 8;

// Shared memory of a GEMM tile: the A and B tiles during the K loop, overlaid by the
// two float output tiles afterwards (static shared memory is limited to 48 KB).
template <typename T>
struct GemmSmem {
  static constexpr int AB = (BM * (BK + PAD) + 2 * BN * (BK + PAD)) * int(sizeof(T));
  static constexpr int CB = 2 * BM * (BN + 4) * int(sizeof(float));
  static constexpr int BYTES = AB > CB ? AB : CB;
};

template <typename T, int FMT, int K, int G>
__device__ void gemm_tile(unsigned char* smem, const T* x, i64 M, const i64* rows, const float* rr, const T* normw,
                          const void* w, const void* s, i64 N, i64 m0, i64 n0, int nb_mats, const void* w2,
                          const void* s2) {
  using namespace nvcuda;
  typedef T ARow[BK + PAD];
  ARow* As = reinterpret_cast<ARow*>(smem);
  ARow* Bs0 = As + BM;
  ARow* Bs1 = Bs0 + BN;
  float* C = reinterpret_cast<float*>(smem);
  float* C2 = C + BM * (BN + 4);
  const int warp = threadIdx.x >> 5, wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2][2];
#pragma unroll
  for (int q = 0; q < 2; ++q)
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[q][i][j], 0.0f);
  for (int k0 = 0; k0 < K; k0 += BK) {
    // A: 64 x 32, 16 elements per thread.
    for (int e = threadIdx.x; e < BM * BK; e += blockDim.x) {
      int r = e / BK, k = e % BK;
      i64 gm = m0 + r;
      float v = 0.0f;
      if (gm < M) {
        i64 row = rows ? rows[gm] : gm;
        v = tof(x[row * K + k0 + k]);
        if (normw) v *= rr[r] * tof(normw[k0 + k]);
      }
      As[r][k] = fromf<T>(v);
    }
    // B: 64 weight rows x 32 columns per matrix, dequantized chunk by chunk.
    constexpr int E = WChunk<FMT>::E;
    for (int q = 0; q < nb_mats; ++q) {
      const void* wq = q == 0 ? w : w2;
      const void* sq = q == 0 ? s : s2;
      ARow* Bs = q == 0 ? Bs0 : Bs1;
      constexpr int per_row = BK / E;  // E <= 32 = BK for every format
      for (int e = threadIdx.x; e < BN * per_row; e += blockDim.x) {
        int r = e / per_row, c = e % per_row;
        i64 gn = n0 + r;
        float v[E];
        if (gn < N) {
          wchunk<FMT, K, G>(wq, sq, gn, (k0 / E) + c, v);
          float rs = row_scale<FMT, G>(sq, gn);
#pragma unroll
          for (int i = 0; i < E; ++i) v[i] *= rs;
        } else {
#pragma unroll
          for (int i = 0; i < E; ++i) v[i] = 0.0f;
        }
#pragma unroll
        for (int i = 0; i < E; ++i) Bs[r][c * E + i] = fromf<T>(v[i]);
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &As[wm + i * 16][kk], BK + PAD);
      for (int q = 0; q < nb_mats; ++q) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
          wmma::load_matrix_sync(b, &(q == 0 ? Bs0 : Bs1)[wn + j * 16][kk], BK + PAD);
#pragma unroll
          for (int i = 0; i < 2; ++i) wmma::mma_sync(acc[q][i][j], a[i], b, acc[q][i][j]);
        }
      }
    }
    __syncthreads();
  }
  for (int q = 0; q < nb_mats; ++q)
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        wmma::store_matrix_sync((q == 0 ? C : C2) + (wm + i * 16) * (BN + 4) + wn + j * 16, acc[q][i][j], BN + 4,
                                wmma::mem_row_major);
  __syncthreads();
}

// Per-row inverse RMS of the block's 64 rows (each warp 16 rows).
template <typename T, int K>
__device__ void tile_rms(const T* x, i64 M, const i64* rows, i64 m0, float eps, float* rr) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int r = warp; r < BM; r += blockDim.x >> 5) {
    i64 gm = m0 + r;
    float ss = 0.0f;
    if (gm < M) {
      i64 row = rows ? rows[gm] : gm;
      for (int k = lane; k < K; k += 32) {
        float v = tof(x[row * K + k]);
        ss += v * v;
      }
    }
    ss = warp_sum(ss);
    if (lane == 0) rr[r] = rsqrtf(ss / float(K) + eps);
  }
  __syncthreads();
}

template <typename T, int FMT, int K, int G>
__device__ void gemm_kernel(const LatheCudaStep* st, const GemmDesc& d, const T* x, const T* normw, const void* const* W,
                            const void* const* S, void* const* out, const T* res) {
  __shared__ __align__(128) unsigned char smem[GemmSmem<T>::BYTES];
  __shared__ float rr[BM];
  __shared__ i64 rows_s[BM];
  const float* C = reinterpret_cast<const float*>(smem);
  const float* C2 = C + BM * (BN + 4);
  const i64 M = d.last_rows ? st->n_seq : st->n_rows;
  // blockIdx.x enumerates the column tiles of every segment, blockIdx.y the row tiles.
  int seg = 0;
  i64 tile = blockIdx.x;
  const int segs = d.epilogue == EPI_SILU_MUL ? 1 : d.nw;
  while (seg < segs && tile >= (d.n[seg] + BN - 1) / BN) tile -= (d.n[seg++] + BN - 1) / BN;
  if (seg >= segs) return;
  const i64 N = d.n[seg], n0 = tile * BN, m0 = i64(blockIdx.y) * BM;
  if (m0 >= M) return;
  // lm_head: row m of the tile is the last new row of sequence m0 + m.
  const i64* rows = nullptr;
  if (d.last_rows) {
    for (int r = threadIdx.x; r < BM; r += blockDim.x)
      if (m0 + r < M) rows_s[r] = st->seq[m0 + r].row0 + st->seq[m0 + r].len - 1;
    __syncthreads();
    rows = rows_s - m0;  // gemm_tile indexes rows[m0 + r]
  }
  const T* nw = d.prologue == PRO_RMS_NORM ? normw : nullptr;
  if (nw) tile_rms<T, K>(x, M, rows, m0, d.eps, rr);
  const bool pair = d.epilogue == EPI_SILU_MUL;
  gemm_tile<T, FMT, K, G>(smem, x, M, rows, rr, nw, W[seg], S[seg], N, m0, n0, pair ? 2 : 1,
                          pair ? W[1] : nullptr, pair ? S[1] : nullptr);
  if (d.last_rows) {
    float* o = reinterpret_cast<float*>(out[seg]);
    for (int e = threadIdx.x; e < BM * BN; e += blockDim.x) {
      int r = e / BN, c = e % BN;
      if (m0 + r < M && n0 + c < N) o[(m0 + r) * N + n0 + c] = C[r * (BN + 4) + c];
    }
    return;
  }
  T* o = reinterpret_cast<T*>(out[seg]);
  for (int e = threadIdx.x; e < BM * BN; e += blockDim.x) {
    int r = e / BN, c = e % BN;
    i64 gm = m0 + r, gn = n0 + c;
    if (gm >= M || gn >= N) continue;
    float v = C[r * (BN + 4) + c];
    if (pair) v = silu(v) * C2[r * (BN + 4) + c];
    if (d.epilogue == EPI_RESIDUAL) v += tof(res[gm * N + gn]);
    o[gm * N + gn] = fromf<T>(v);
  }
}

// ---------------------------------------------------------------- MoE experts
struct ExpertDesc {
  int nw;
  i64 n[4];
  int prologue, epilogue, top_k, experts;
};

// Decode: one warp per output column n, looping over the (few) token-expert pairs.
template <typename T, int FMT, int K, int G, int WARPS, int LOADS = 0>
__device__ void expert_gemv_kernel(const LatheCudaStep* st, const ExpertDesc& d, const T* x, const int* idx,
                                   const void* const* W, const void* const* S, const float* gates, const T* res,
                                   void* const* out) {
  const i64 rows = st->n_rows, P = rows * d.top_k;
  const bool combine = d.epilogue == EPI_COMBINE || d.epilogue == EPI_COMBINE_RESIDUAL;
  i64 total = (d.epilogue == EPI_NONE) ? d.n[0] + d.n[1] + d.n[2] + d.n[3] : d.n[0];
  const i64 g = i64(blockIdx.x) * WARPS + (threadIdx.x >> 5);
  if (g >= total) return;
  int seg = 0;
  i64 n = g;
  if (d.epilogue == EPI_NONE)
    while (n >= d.n[seg]) n -= d.n[seg++];
  const i64 N = d.n[seg];
  float sum = 0.0f;
  for (i64 p = 0; p < P; ++p) {
    const int ex = idx[p];
    const T* xr = d.prologue == PRO_GATHER ? x + (p / d.top_k) * K : x + p * K;
    float a, u;
    warp_gemv<T, FMT, K, G, 1, false, LOADS>(expert_w<FMT, K, G>(W[seg], ex, N), expert_s<FMT, K, G>(S[seg], ex, N),
                                             n, &xr, nullptr, nullptr, 1, &a);
    if (d.epilogue == EPI_SILU_MUL) {
      warp_gemv<T, FMT, K, G, 1, false, LOADS>(expert_w<FMT, K, G>(W[1], ex, N), expert_s<FMT, K, G>(S[1], ex, N),
                                               n, &xr, nullptr, nullptr, 1, &u);
      if ((threadIdx.x & 31) == 0) reinterpret_cast<T*>(out[0])[p * N + n] = fromf<T>(silu(a) * u);
    } else if (combine) {
      sum += gates[p] * a;
      if ((p + 1) % d.top_k == 0) {
        const i64 r = p / d.top_k;
        if ((threadIdx.x & 31) == 0) {
          float v = sum + (d.epilogue == EPI_COMBINE_RESIDUAL ? tof(res[r * N + n]) : 0.0f);
          reinterpret_cast<T*>(out[0])[r * N + n] = fromf<T>(v);
        }
        sum = 0.0f;
      }
    } else if ((threadIdx.x & 31) == 0) {
      reinterpret_cast<T*>(out[seg])[p * N + n] = fromf<T>(a);
    }
  }
}

// Prefill: block (expert, pair tile, column tile). The block finds its pairs by
// scanning the routing, multiplies them with tensor cores, and writes per-pair
// results; combine epilogues accumulate weighted products into float scratch and the
// last block to finish folds them (with the residual) into the output.
template <typename T, int FMT, int K, int G>
__device__ void expert_gemm_kernel(const LatheCudaStep* st, const ExpertDesc& d, const T* x, const int* idx,
                                   const void* const* W, const void* const* S, const float* gates, const T* res,
                                   void* const* out) {
  __shared__ __align__(128) unsigned char smem[GemmSmem<T>::BYTES];
  const float* C = reinterpret_cast<const float*>(smem);
  const float* C2 = C + BM * (BN + 4);
  __shared__ i64 list[BM];
  __shared__ i64 xrow[BM];
  __shared__ int count;
  const i64 rows = st->n_rows, P = rows * d.top_k;
  const bool combine = d.epilogue == EPI_COMBINE || d.epilogue == EPI_COMBINE_RESIDUAL;
  const int ex = blockIdx.z;
  const i64 ptile = blockIdx.y;
  // This block's pairs: the ptile-th group of 64 among those routed to ex.
  if (threadIdx.x == 0) {
    int seen = 0, taken = 0;
    for (i64 p = 0; p < P && taken < BM; ++p)
      if (idx[p] == ex) {
        if (seen >= ptile * BM) {
          list[taken] = p;
          xrow[taken] = d.prologue == PRO_GATHER ? p / d.top_k : p;
          ++taken;
        }
        ++seen;
      }
    count = taken;
  }
  __syncthreads();
  const int segs = d.epilogue == EPI_NONE ? d.nw : 1;
  int seg = 0;
  i64 tile = blockIdx.x;
  while (seg < segs && tile >= (d.n[seg] + BN - 1) / BN) tile -= (d.n[seg++] + BN - 1) / BN;
  if (count > 0 && seg < segs) {
    const i64 N = d.n[seg], n0 = tile * BN;
    const bool pair = d.epilogue == EPI_SILU_MUL;
    gemm_tile<T, FMT, K, G>(smem, x, count, xrow, nullptr, nullptr, expert_w<FMT, K, G>(W[seg], ex, N),
                            expert_s<FMT, K, G>(S[seg], ex, N), N, 0, n0, pair ? 2 : 1,
                            pair ? expert_w<FMT, K, G>(W[1], ex, N) : nullptr,
                            pair ? expert_s<FMT, K, G>(S[1], ex, N) : nullptr);
    for (int e = threadIdx.x; e < BM * BN; e += blockDim.x) {
      int r = e / BN, c = e % BN;
      i64 gn = n0 + c;
      if (r >= count || gn >= N) continue;
      const i64 p = list[r];
      float v = C[r * (BN + 4) + c];
      if (pair) reinterpret_cast<T*>(out[0])[p * N + gn] = fromf<T>(silu(v) * C2[r * (BN + 4) + c]);
      else if (combine) atomicAdd(&st->scratch[(p / d.top_k) * N + gn], gates[p] * v);
      else reinterpret_cast<T*>(out[seg])[p * N + gn] = fromf<T>(v);
    }
  }
  if (!combine) return;
  // The last block to finish writes out = scratch (+ residual). Scratch is zeroed by
  // the runtime before the step (counters and scratch start at 0).
  __threadfence();
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned total = gridDim.x * gridDim.y * gridDim.z;
    last = atomicAdd(&st->counters[0], 1u) == total - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const i64 N = d.n[0];
  for (i64 e = threadIdx.x; e < rows * N; e += blockDim.x) {
    float v = st->scratch[e] + (d.epilogue == EPI_COMBINE_RESIDUAL ? tof(res[e]) : 0.0f);
    reinterpret_cast<T*>(out[0])[e] = fromf<T>(v);
  }
}

// ---------------------------------------------------------------- KV cache
template <int LAY, int L, int KVH, int TCAP, int NB, int SLOTS>
__device__ __forceinline__ i64 kv_index(const LatheCudaStep* st, int layer, int kv, int slot, int t, int h) {
  if constexpr (LAY == LHTD) return ((((i64)layer * 2 + kv) * SLOTS + slot) * KVH + h) * TCAP + t;
  if constexpr (LAY == LTHD) return ((((i64)layer * 2 + kv) * SLOTS + slot) * TCAP + t) * KVH + h;
  if constexpr (LAY == TLHD) return ((((i64)slot * TCAP + t) * L + layer) * 2 + kv) * KVH + h;
  i64 blk = st->block_table[(i64)slot * st->blocks_per_slot + t / NB];
  return (((blk * L + layer) * 2 + kv) * KVH + h) * NB + t % NB;
}
// Element i of cached vector v (KF: F32 F16 BF16 I8 I4 FP8).
template <int KF, int D>
__device__ __forceinline__ float kv_get(const LatheCudaStep* st, i64 v, int i) {
  if constexpr (KF == F32) return reinterpret_cast<const float*>(st->kv)[v * D + i];
  if constexpr (KF == F16) return __half2float(reinterpret_cast<const __half*>(st->kv)[v * D + i]);
  if constexpr (KF == BF16) return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(st->kv)[v * D + i]);
  if constexpr (KF == I8)
    return float(reinterpret_cast<const signed char*>(st->kv)[v * D + i]) * h2f(reinterpret_cast<const u16*>(st->kv_scales)[v]);
  if constexpr (KF == I4) {
    u8 b = st->kv[v * (D / 2) + (i / 32) * 16 + (i % 16)];
    int q = (i % 32) < 16 ? (b & 15) : (b >> 4);
    return float(q - 8) * h2f(reinterpret_cast<const u16*>(st->kv_scales)[v]);
  }
#ifdef LATHE_FP8
  if constexpr (KF == FP8)
    return float(reinterpret_cast<const __nv_fp8_e4m3*>(st->kv)[v * D + i]) * reinterpret_cast<const float*>(st->kv_scales)[v];
#endif
  return 0.0f;
}
// Stores a D-vector from shared memory `x` into cached vector v using one warp
// (integer formats: one scale per vector, the Q4_0 rule for int4).
template <int KF, int D>
__device__ __forceinline__ void kv_put_warp(const LatheCudaStep* st, i64 v, const float* x) {
  const int lane = threadIdx.x & 31;
  if constexpr (KF == F32 || KF == F16 || KF == BF16) {
    for (int i = lane; i < D; i += 32) {
      if constexpr (KF == F32) reinterpret_cast<float*>(st->kv)[v * D + i] = x[i];
      if constexpr (KF == F16) reinterpret_cast<__half*>(st->kv)[v * D + i] = __float2half_rn(x[i]);
      if constexpr (KF == BF16) reinterpret_cast<__nv_bfloat16*>(st->kv)[v * D + i] = __float2bfloat16_rn(x[i]);
    }
    return;
  }
  float amax = 0.0f, sm = 0.0f;
  for (int i = lane; i < D; i += 32)
    if (fabsf(x[i]) > amax) amax = fabsf(x[i]), sm = x[i];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float a2 = __shfl_xor_sync(0xffffffffu, amax, o), s2 = __shfl_xor_sync(0xffffffffu, sm, o);
    if (a2 > amax || (a2 == amax && s2 > sm)) amax = a2, sm = s2;
  }
  if constexpr (KF == I8) {
    float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int i = lane; i < D; i += 32) reinterpret_cast<signed char*>(st->kv)[v * D + i] = (signed char)__float2int_rn(x[i] * id);
    if (lane == 0) reinterpret_cast<u16*>(st->kv_scales)[v] = f2h(d);
  } else if constexpr (KF == I4) {
    float d = sm / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = lane; j < D / 2; j += 32) {
      int blk = j / 16, jj = j % 16;
      int lo = min(15, max(0, int(x[blk * 32 + jj] * id + 8.5f)));
      int hi = min(15, max(0, int(x[blk * 32 + jj + 16] * id + 8.5f)));
      st->kv[v * (D / 2) + j] = u8(lo | (hi << 4));
    }
    if (lane == 0) reinterpret_cast<u16*>(st->kv_scales)[v] = f2h(d);
  } else {
#ifdef LATHE_FP8
    float d = amax / 448.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int i = lane; i < D; i += 32) reinterpret_cast<__nv_fp8_e4m3*>(st->kv)[v * D + i] = __nv_fp8_e4m3(x[i] * id);
    if (lane == 0) reinterpret_cast<float*>(st->kv_scales)[v] = d;
#endif
  }
}

// cos/sin of the (2i, 2i+1) rotation at a position; the angle is reduced in double
// so long contexts stay accurate under fast math. div: the model's RoPE-scaling
// divisors (null: plain RoPE).
__device__ __forceinline__ void rope_cs(int pos, int i, int D, double theta, float* c, float* s,
                                        const double* div = nullptr) {
  double freq = pow(theta, -2.0 * double(i) / double(D));
  if (div) freq /= div[i];  // RoPE scaling (a divisor per rotation pair)
  double a = fmod(double(pos) * freq, 6.283185307179586);
  sincosf(float(a), s, c);
}

// RoPE on Q and K and the K/V cache write of each row; a block per row, a warp per
// head. Rotated vectors are staged in shared memory for the quantizing store.
template <typename T, int KF, int LAY, int L, int KVH, int TCAP, int NB, int SLOTS, int H, int D>
__device__ void rope_kvwrite_kernel(const LatheCudaStep* st, int layer, const T* q, const T* k, const T* v, T* qo,
                                    double theta, const double* rope_div = nullptr) {
  __shared__ float stage[8][D];
  // A block per (row, group of blockDim / 32 heads): decode's single row still
  // spreads its heads over several multiprocessors.
  const int nw = blockDim.x >> 5, groups = (H + 2 * KVH + nw - 1) / nw;
  const i64 r = blockIdx.x / groups;
  if (r >= st->n_rows) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int pos = st->row_pos[r], slot = st->seq[st->row_seq[r]].slot;
  for (int h = int(blockIdx.x % groups) * nw + warp; h < min(H + 2 * KVH, int(blockIdx.x % groups + 1) * nw); h += nw) {
    float* s = stage[warp];
    for (int i = lane; i < D / 2; i += 32) {
      const T* src = h < H ? q + r * (H * D) + h * D : (h < H + KVH ? k + r * (KVH * D) + (h - H) * D : v + r * (KVH * D) + (h - H - KVH) * D);
      float a = tof(src[2 * i]), b = tof(src[2 * i + 1]);
      if (h < H + KVH) {
        float c, sn;
        rope_cs(pos, i, D, theta, &c, &sn, rope_div);
        s[2 * i] = a * c - b * sn;
        s[2 * i + 1] = a * sn + b * c;
      } else {
        s[2 * i] = a;
        s[2 * i + 1] = b;
      }
    }
    __syncwarp();
    if (h < H) {
      for (int i = lane; i < D; i += 32) qo[r * (H * D) + h * D + i] = fromf<T>(s[i]);
    } else {
      const int kvh = h < H + KVH ? h - H : h - H - KVH, which = h < H + KVH ? 0 : 1;
      kv_put_warp<KF, D>(st, kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, which, slot, pos, kvh), s);
    }
    __syncwarp();
  }
}

// ---------------------------------------------------------------- tensor-core tiles
// mma.sync m16n8k16 (f32 accumulate) on T = bf16 or f16. Fragment layouts (PTX ISA,
// "matrix fragments for mma.m16n8k16"): with g = lane / 4 and t = lane % 4, A (16 x 16,
// row-major) reg 0 = (row g, cols 2t, 2t+1), reg 1 = (row g+8, same cols), reg 2 =
// (row g, cols 2t+8, 2t+9), reg 3 = (row g+8, cols 2t+8, 2t+9); B (16 x 8) reg 0 =
// (rows 2t, 2t+1, col g), reg 1 = (rows 2t+8, 2t+9, col g); C (16 x 8) c0, c1 = (row g,
// cols 2t, 2t+1), c2, c3 = (row g+8, same cols). The lower column (row) sits in the
// lower 16 bits.
template <typename T>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  T a = fromf<T>(lo), b = fromf<T>(hi);
  unsigned short ua = *reinterpret_cast<unsigned short*>(&a), ub = *reinterpret_cast<unsigned short*>(&b);
  return unsigned(ua) | (unsigned(ub) << 16);
}
template <typename T>
__device__ __forceinline__ void mma16816(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  if constexpr (same_type<T, __nv_bfloat16>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
__device__ __forceinline__ unsigned u16pair(const void* base, int lo_index, int hi_index) {
  const unsigned short* p = reinterpret_cast<const unsigned short*>(base);
  return unsigned(p[lo_index]) | (unsigned(p[hi_index]) << 16);
}

// ---------------------------------------------------------------- GEMV on tensor cores (2-8 rows)
// lm_head over 2 to 8 sequences (5 to 8 for decoded weights: cuda_batched_min_rows; the
// matmuls of such steps go to cuBLAS instead): a block of GEMV_MMA_WARPS warps computes
// 16 output rows for every activation row with mma.sync m16n8k16 (A: 16 weight rows x
// 16 k, B: 16 k x 8 activation rows, f32 accumulate), so each weight is loaded and
// decoded once for all rows; the warp-per-row GEMV pays the decoding and the activation
// loads per row. The warps take interleaved groups of 4 chunks along K, U groups in
// flight, and sum in shared memory. Lane (g = lane / 4, t = lane % 4) loads whole
// 16-byte chunks: chunk c + t of weight rows g and g + 8, and the matching 8-element
// pieces of activation row g. Inside an mma step the k positions are a permutation of
// the chunk's (element pair q of a piece is A/B register pair q: step 0 takes pairs 0
// and 1, step 1 pairs 2 and 3), the same for A and B, which a dot product does not see.
// Weights in T are used as loaded; others are decoded (group scales included) and
// rounded to T. NORM: the gains scale the activations, rounded to T before 1/rms scales
// the sums (the cuBLAS route rounds the normalized row instead). The residual, SiLU x
// up and multi-weight paths are written like the warp-per-row GEMV's for any dense GEMM
// but only lm_head (one weight, norm prologue, last rows) uses this kernel; only that
// has run on a GPU.
constexpr int GEMV_MMA_WARPS = 8;
template <typename T, int FMT, int K, int G, bool NORM>
__device__ void gemv_mma_kernel(const LatheCudaStep* st, const GemmDesc& d, const T* x, const T* normw,
                                const void* const* W, const void* const* S, void* const* out, const T* res) {
  constexpr int E = WChunk<FMT>::E, CH = K / E, NW = GEMV_MMA_WARPS, U = 2;
  constexpr bool RAW = (FMT == BF16 && same_type<T, __nv_bfloat16>::value) || (FMT == F16 && same_type<T, __half>::value);
  static_assert(E % 8 == 0, "the tensor-core GEMV takes 16-bit or narrower weights");
  __shared__ float rr[8];
  __shared__ float red[32];
  __shared__ float part[NW][2][16][8];
  const int M = min(8, d.last_rows ? st->n_seq : st->n_rows);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  auto row_of = [&](int m) -> i64 { return d.last_rows ? st->seq[m].row0 + st->seq[m].len - 1 : m; };
  const T* xg = g < M ? x + row_of(g) * K : nullptr;
  if (NORM) {
    for (int m = 0; m < M; ++m) {
      const T* xm = x + row_of(m) * K;
      float ss = 0.0f;
      for (int k = threadIdx.x; k < K; k += blockDim.x) {
        float v = tof(xm[k]);
        ss += v * v;
      }
      ss = block_sum(ss, red);
      if (threadIdx.x == 0) rr[m] = rsqrtf(ss / float(K) + d.eps);
    }
  }
  const bool silu_mul = d.epilogue == EPI_SILU_MUL;
  int seg = 0;
  i64 n0 = i64(blockIdx.x) * 16;
  if (!silu_mul)
    while (n0 >= d.n[seg]) n0 -= d.n[seg++];
  float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
  for (int mat = 0; mat < 2; ++mat) {
    if (mat == 1 && !silu_mul) break;
    const void* w = W[silu_mul ? mat : seg];
    const void* s = S[silu_mul ? mat : seg];
#pragma unroll 1
    for (int c0 = warp * 4; c0 < CH; c0 += 4 * NW * U) {
      uint4 ra[U], rb[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = c0 + 4 * NW * u + t;
        ra[u] = rb[u] = make_uint4(0u, 0u, 0u, 0u);
        if (c < CH) {
          ra[u] = wraw<FMT, K>(w, n0 + g, c);
          rb[u] = wraw<FMT, K>(w, n0 + g + 8, c);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = c0 + 4 * NW * u + t;
        const bool live = c < CH;
        float fa[RAW ? 1 : E], fb[RAW ? 1 : E];
        if constexpr (!RAW) {
          if (live) {
            wdecode<FMT, K, G>(ra[u], s, n0 + g, c, fa);
            wdecode<FMT, K, G>(rb[u], s, n0 + g + 8, c, fb);
          } else {
#pragma unroll
            for (int i = 0; i < E; ++i) fa[i] = fb[i] = 0.0f;
          }
        }
#pragma unroll
        for (int j = 0; j < E / 8; ++j) {
          unsigned aw[4], bw[4];
          if constexpr (RAW) {
            aw[0] = ra[u].x, aw[1] = ra[u].y, aw[2] = ra[u].z, aw[3] = ra[u].w;
            bw[0] = rb[u].x, bw[1] = rb[u].y, bw[2] = rb[u].z, bw[3] = rb[u].w;
          } else {
#pragma unroll
            for (int q = 0; q < 4; ++q) {
              aw[q] = pack2<T>(fa[8 * j + 2 * q], fa[8 * j + 2 * q + 1]);
              bw[q] = pack2<T>(fb[8 * j + 2 * q], fb[8 * j + 2 * q + 1]);
            }
          }
          uint4 xv = make_uint4(0u, 0u, 0u, 0u);
          if (xg && live) {
            if constexpr (!NORM) {
              xv = *reinterpret_cast<const uint4*>(xg + i64(c) * E + j * 8);
            } else {
              float xf[8], gf[8];
              xvec<T, 8>(xg + i64(c) * E + j * 8, xf);
              xvec<T, 8>(normw + i64(c) * E + j * 8, gf);
              xv.x = pack2<T>(xf[0] * gf[0], xf[1] * gf[1]);
              xv.y = pack2<T>(xf[2] * gf[2], xf[3] * gf[3]);
              xv.z = pack2<T>(xf[4] * gf[4], xf[5] * gf[5]);
              xv.w = pack2<T>(xf[6] * gf[6], xf[7] * gf[7]);
            }
          }
          const unsigned a0[4] = {aw[0], bw[0], aw[1], bw[1]};
          mma16816<T>(acc[mat], a0, xv.x, xv.y);
          const unsigned a1[4] = {aw[2], bw[2], aw[3], bw[3]};
          mma16816<T>(acc[mat], a1, xv.z, xv.w);
        }
      }
    }
    part[warp][mat][g][2 * t] = acc[mat][0];
    part[warp][mat][g][2 * t + 1] = acc[mat][1];
    part[warp][mat][g + 8][2 * t] = acc[mat][2];
    part[warp][mat][g + 8][2 * t + 1] = acc[mat][3];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 16 * 8; i += blockDim.x) {
    const int r = i >> 3, m = i & 7;
    if (m >= M) continue;
    const i64 n = n0 + r;
    float v[2] = {0.0f, 0.0f};
    for (int mat = 0; mat < (silu_mul ? 2 : 1); ++mat) {
      float sum = 0.0f;
      for (int wp = 0; wp < NW; ++wp) sum += part[wp][mat][r][m];
      v[mat] = sum * row_scale<FMT, G>(S[silu_mul ? mat : seg], n) * (NORM ? rr[m] : 1.0f);
    }
    if (silu_mul) {
      reinterpret_cast<T*>(out[0])[m * d.n[0] + n] = fromf<T>(silu(v[0]) * v[1]);
      continue;
    }
    float o = v[0];
    if (d.epilogue == EPI_RESIDUAL) o += tof(res[m * d.n[seg] + n]);
    if (d.last_rows) reinterpret_cast<float*>(out[seg])[m * d.n[seg] + n] = o;
    else reinterpret_cast<T*>(out[seg])[m * d.n[seg] + n] = fromf<T>(o);
  }
}

// Keys t0 .. t0 + KT - 1 of one kv head (K or V, `which`) into shared memory as T, rows
// of stride DS; keys past `last` are zeros. A 16-bit cache of type T is copied with
// 16-byte loads (a cached vector's D elements are contiguous in every layout).
template <typename T, int KF, int LAY, int L, int KVH, int TCAP, int NB, int SLOTS, int D, int KT, int DS>
__device__ __forceinline__ void kv_tile(const LatheCudaStep* st, int layer, int which, int slot, int kvh, int t0,
                                        int last, T* dst) {
  constexpr bool same = (KF == BF16 && same_type<T, __nv_bfloat16>::value) || (KF == F16 && same_type<T, __half>::value);
  if constexpr (same) {
    constexpr int V8 = D / 8;
    for (int e = threadIdx.x; e < KT * V8; e += blockDim.x) {
      const int t = e / V8, c = e % V8;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (t0 + t <= last) {
        const i64 vi = kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, which, slot, t0 + t, kvh);
        v = *reinterpret_cast<const uint4*>(st->kv + (vi * D + c * 8) * 2);
      }
      *reinterpret_cast<uint4*>(dst + t * DS + c * 8) = v;
    }
  } else {
    for (int e = threadIdx.x; e < KT * D; e += blockDim.x) {
      const int t = e / D, d = e % D;
      float x = 0.0f;
      if (t0 + t <= last) x = kv_get<KF, D>(st, kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, which, slot, t0 + t, kvh), d);
      dst[t * DS + d] = fromf<T>(x);
    }
  }
}

// Attention of new rows over their sequence's cache, causal, GQA-aware, on tensor
// cores (FlashAttention-2 style). A block of 4 warps per (sequence, q head, tile of 64
// query rows); each warp owns 16 rows: S = Q K^T and O += P V with mma.sync, the
// online softmax on the accumulators in registers. K/V tiles of KT keys are staged in
// shared memory as T.
template <typename T, int KF, int LAY, int L, int KVH, int TCAP, int NB, int SLOTS, int H, int D>
__device__ void flash_attention_kernel(const LatheCudaStep* st, int layer, const T* q, T* o, float scale) {
  constexpr int QT = 64, KT = D > 128 ? 32 : 64, DS = D + 8;
  __shared__ __align__(16) T ks[KT * DS];
  __shared__ __align__(16) T vs[KT * DS];
  const int tiles = (st->max_len + QT - 1) / QT;
  const int s_i = blockIdx.x / (H * tiles), h = (blockIdx.x / tiles) % H, tile = blockIdx.x % tiles;
  if (s_i >= st->n_seq) return;
  const LatheSeq sq = st->seq[s_i];
  const int i0 = tile * QT;
  if (i0 >= sq.len) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
  const int kvh = h / (H / KVH);
  const int r0 = i0 + warp * 16 + g, r1 = r0 + 8;  // the thread's two query rows (new-token index)
  const int pos0 = sq.past + r0, pos1 = sq.past + r1;
  // Q fragments for the whole head dim (rows past the sequence read as zeros).
  unsigned qa[D / 16][4];
  {
    const T* q0 = q + i64(sq.row0 + r0) * (H * D) + h * D;
    const T* q1 = q + i64(sq.row0 + r1) * (H * D) + h * D;
    const bool v0 = r0 < sq.len, v1 = r1 < sq.len;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int c = kk * 16 + 2 * t4;
      qa[kk][0] = v0 ? *reinterpret_cast<const unsigned*>(q0 + c) : 0u;
      qa[kk][1] = v1 ? *reinterpret_cast<const unsigned*>(q1 + c) : 0u;
      qa[kk][2] = v0 ? *reinterpret_cast<const unsigned*>(q0 + c + 8) : 0u;
      qa[kk][3] = v1 ? *reinterpret_cast<const unsigned*>(q1 + c + 8) : 0u;
    }
  }
  float oacc[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; ++j) oacc[j][0] = oacc[j][1] = oacc[j][2] = oacc[j][3] = 0.0f;
  float m0 = -inf(), m1 = -inf(), l0 = 0.0f, l1 = 0.0f;
  const int last = sq.past + min(sq.len, i0 + QT) - 1;    // the block's last key
  const int warp_last = sq.past + i0 + warp * 16 + 15;     // the warp's last visible key
  for (int t0 = 0; t0 <= last; t0 += KT) {
    __syncthreads();
    kv_tile<T, KF, LAY, L, KVH, TCAP, NB, SLOTS, D, KT, DS>(st, layer, 0, sq.slot, kvh, t0, last, ks);
    kv_tile<T, KF, LAY, L, KVH, TCAP, NB, SLOTS, D, KT, DS>(st, layer, 1, sq.slot, kvh, t0, last, vs);
    __syncthreads();
    if (t0 > warp_last) continue;  // every key of the tile is in this warp's future
    float sacc[KT / 8][4];
#pragma unroll
    for (int j = 0; j < KT / 8; ++j) sacc[j][0] = sacc[j][1] = sacc[j][2] = sacc[j][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int j = 0; j < KT / 8; ++j) {
        const T* kr = ks + (j * 8 + g) * DS + kk * 16 + 2 * t4;
        mma16816<T>(sacc[j], qa[kk], *reinterpret_cast<const unsigned*>(kr), *reinterpret_cast<const unsigned*>(kr + 8));
      }
    // Scale, causal mask, online softmax (rows r0: c0, c1; r1: c2, c3).
    float mx0 = -inf(), mx1 = -inf();
#pragma unroll
    for (int j = 0; j < KT / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = t0 + j * 8 + 2 * t4 + (e & 1);
        float v = sacc[j][e] * scale;
        if (key > (e < 2 ? pos0 : pos1)) v = -inf();
        sacc[j][e] = v;
        if (e < 2) mx0 = fmaxf(mx0, v);
        else mx1 = fmaxf(mx1, v);
      }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
    // Rows with nothing visible yet keep -inf maxima: their factors stay 0, not NaN.
    const float a0 = n0 == -inf() ? 0.0f : __expf(m0 - n0), a1 = n1 == -inf() ? 0.0f : __expf(m1 - n1);
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int j = 0; j < KT / 8; ++j) {
      sacc[j][0] = n0 == -inf() ? 0.0f : __expf(sacc[j][0] - n0);
      sacc[j][1] = n0 == -inf() ? 0.0f : __expf(sacc[j][1] - n0);
      sacc[j][2] = n1 == -inf() ? 0.0f : __expf(sacc[j][2] - n1);
      sacc[j][3] = n1 == -inf() ? 0.0f : __expf(sacc[j][3] - n1);
      s0 += sacc[j][0] + sacc[j][1];
      s1 += sacc[j][2] + sacc[j][3];
    }
    s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
    s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
    s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
    s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
    l0 = l0 * a0 + s0;
    l1 = l1 * a1 + s1;
    m0 = n0;
    m1 = n1;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) oacc[j][0] *= a0, oacc[j][1] *= a0, oacc[j][2] *= a1, oacc[j][3] *= a1;
    // O += P V: P's accumulators are already in A-fragment order, two key tiles per k step.
#pragma unroll
    for (int kb = 0; kb < KT / 16; ++kb) {
      unsigned pa[4] = {pack2<T>(sacc[2 * kb][0], sacc[2 * kb][1]), pack2<T>(sacc[2 * kb][2], sacc[2 * kb][3]),
                        pack2<T>(sacc[2 * kb + 1][0], sacc[2 * kb + 1][1]),
                        pack2<T>(sacc[2 * kb + 1][2], sacc[2 * kb + 1][3])};
      const int k0 = kb * 16 + 2 * t4;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        const int col = j * 8 + g;
        mma16816<T>(oacc[j], pa, u16pair(vs, k0 * DS + col, (k0 + 1) * DS + col),
                    u16pair(vs, (k0 + 8) * DS + col, (k0 + 9) * DS + col));
      }
    }
  }
  const float i0f = l0 > 0.0f ? 1.0f / l0 : 0.0f, i1f = l1 > 0.0f ? 1.0f / l1 : 0.0f;
  T* o0 = o + i64(sq.row0 + r0) * (H * D) + h * D;
  T* o1 = o + i64(sq.row0 + r1) * (H * D) + h * D;
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    const int c = j * 8 + 2 * t4;
    if (r0 < sq.len) *reinterpret_cast<unsigned*>(o0 + c) = pack2<T>(oacc[j][0] * i0f, oacc[j][1] * i0f);
    if (r1 < sq.len) *reinterpret_cast<unsigned*>(o1 + c) = pack2<T>(oacc[j][2] * i1f, oacc[j][3] * i1f);
  }
}

// Decode attention split over the context (flash-decoding): a block per (sequence,
// kv head, split) handles every query head of the GQA group over its slice of keys,
// writes a partial (max, sum, accumulator) to scratch, and the last block of the
// (sequence, kv head) to finish merges the splits into the output.
template <typename T, int KF, int LAY, int L, int KVH, int TCAP, int NB, int SLOTS, int H, int D, int SPLITS>
__device__ void decode_attention_kernel(const LatheCudaStep* st, int layer, const T* q, T* o, float scale) {
  constexpr int GQ = H / KVH, WARPS = 4, DL = D / 32;
  __shared__ float qs[GQ][D];
  __shared__ float wm[WARPS][GQ], wl[WARPS][GQ], wacc[WARPS][GQ][D];
  __shared__ bool last;
  const int s_i = blockIdx.x / (KVH * SPLITS), kvh = (blockIdx.x / SPLITS) % KVH, split = blockIdx.x % SPLITS;
  if (s_i >= st->n_seq) return;
  const LatheSeq sq = st->seq[s_i];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int T_ctx = sq.past + sq.len, chunk = (T_ctx + SPLITS - 1) / SPLITS;
  const int t_begin = split * chunk, t_end = min(T_ctx, t_begin + chunk);
  const i64 row = sq.row0 + sq.len - 1;  // decode: the sequence's one new row
  for (int e = threadIdx.x; e < GQ * D; e += blockDim.x)
    qs[e / D][e % D] = tof(q[row * (H * D) + (kvh * GQ + e / D) * D + e % D]) * scale;
  __syncthreads();
  float m[GQ], l[GQ], acc[GQ][DL];
#pragma unroll
  for (int g = 0; g < GQ; ++g) {
    m[g] = -1e30f;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < DL; ++i) acc[g][i] = 0.0f;
  }
  // Each warp takes U keys at a time and issues all their loads before the first use
  // (a key's latency, not its bytes, is what one warp waits on).
  constexpr int U = 4;
  for (int t0 = t_begin + warp; t0 < t_end; t0 += WARPS * U) {
    float kd[U][DL], vd[U][DL];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int t = t0 + u * WARPS;
      if (t < t_end) {
        const i64 kvi = kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, 0, sq.slot, t, kvh);
        const i64 vvi = kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, 1, sq.slot, t, kvh);
#pragma unroll
        for (int i = 0; i < DL; ++i)
          kd[u][i] = kv_get<KF, D>(st, kvi, lane + 32 * i), vd[u][i] = kv_get<KF, D>(st, vvi, lane + 32 * i);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (t0 + u * WARPS >= t_end) break;
#pragma unroll
      for (int g = 0; g < GQ; ++g) {
        float sdot = 0.0f;
#pragma unroll
        for (int i = 0; i < DL; ++i) sdot += qs[g][lane + 32 * i] * kd[u][i];
        sdot = warp_sum(sdot);
        float mn = fmaxf(m[g], sdot), alpha = __expf(m[g] - mn), p = __expf(sdot - mn);
        l[g] = l[g] * alpha + p;
#pragma unroll
        for (int i = 0; i < DL; ++i) acc[g][i] = acc[g][i] * alpha + p * vd[u][i];
        m[g] = mn;
      }
    }
  }
#pragma unroll
  for (int g = 0; g < GQ; ++g) {
    if (lane == 0) wm[warp][g] = m[g], wl[warp][g] = l[g];
#pragma unroll
    for (int i = 0; i < DL; ++i) wacc[warp][g][lane + 32 * i] = acc[g][i];
  }
  __syncthreads();
  // Merge the warps, then publish this split's partial.
  float* part = st->scratch + ((i64(s_i) * KVH + kvh) * SPLITS + split) * GQ * (D + 2);
  for (int e = threadIdx.x; e < GQ * D; e += blockDim.x) {
    int g = e / D, d = e % D;
    float mx = -1e30f;
    for (int w = 0; w < WARPS; ++w) mx = fmaxf(mx, wm[w][g]);
    float a = 0.0f, s = 0.0f;
    for (int w = 0; w < WARPS; ++w) {
      float f = __expf(wm[w][g] - mx);
      a += wacc[w][g][d] * f;
      s += wl[w][g] * f;
    }
    if constexpr (SPLITS == 1) {  // one split: no partials, no merge
      o[row * (H * D) + (kvh * GQ + g) * D + d] = fromf<T>(a / s);
    } else {
      part[g * (D + 2) + d] = a;
      if (d == 0) part[g * (D + 2) + D] = mx, part[g * (D + 2) + D + 1] = s;
    }
  }
  if constexpr (SPLITS == 1) return;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&st->counters[s_i * KVH + kvh], 1u) == SPLITS - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float* parts = st->scratch + (i64(s_i) * KVH + kvh) * SPLITS * GQ * (D + 2);
  for (int e = threadIdx.x; e < GQ * D; e += blockDim.x) {
    int g = e / D, d = e % D;
    float mx = -1e30f;
    for (int s = 0; s < SPLITS; ++s) mx = fmaxf(mx, parts[(s * GQ + g) * (D + 2) + D]);
    float a = 0.0f, sum = 0.0f;
    for (int s = 0; s < SPLITS; ++s) {
      const float* pp = parts + (s * GQ + g) * (D + 2);
      float f = __expf(pp[D] - mx);
      a += pp[d] * f;
      sum += pp[D + 1] * f;
    }
    o[row * (H * D) + (kvh * GQ + g) * D + d] = fromf<T>(a / sum);
  }
}

// ---------------------------------------------------------------- unfused ops
template <typename T, int H, int D>
__device__ void rope_kernel(const LatheCudaStep* st, const T* x, T* y, double theta,
                            const double* rope_div = nullptr) {
  const i64 r = blockIdx.x;
  if (r >= st->n_rows) return;
  const int pos = st->row_pos[r];
  for (int e = threadIdx.x; e < H * D / 2; e += blockDim.x) {
    int h = e / (D / 2), i = e % (D / 2);
    float c, s;
    rope_cs(pos, i, D, theta, &c, &s, rope_div);
    float a = tof(x[r * H * D + h * D + 2 * i]), b = tof(x[r * H * D + h * D + 2 * i + 1]);
    y[r * H * D + h * D + 2 * i] = fromf<T>(a * c - b * s);
    y[r * H * D + h * D + 2 * i + 1] = fromf<T>(a * s + b * c);
  }
}

template <typename T, int KF, int LAY, int L, int KVH, int TCAP, int NB, int SLOTS, int D>
__device__ void kv_write_kernel(const LatheCudaStep* st, int layer, const T* k, const T* v) {
  __shared__ float stage[8][D];
  const i64 r = blockIdx.x;
  if (r >= st->n_rows) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  const int pos = st->row_pos[r], slot = st->seq[st->row_seq[r]].slot;
  for (int h = warp; h < 2 * KVH; h += nw) {
    const T* src = (h < KVH ? k : v) + r * (KVH * D) + (h % KVH) * D;
    for (int i = lane; i < D; i += 32) stage[warp][i] = tof(src[i]);
    __syncwarp();
    kv_put_warp<KF, D>(st, kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, h / KVH, slot, pos, h % KVH), stage[warp]);
    __syncwarp();
  }
}

template <typename T, int KF, int LAY, int L, int KVH, int TCAP, int NB, int SLOTS, int D, int TP>
__device__ void kv_read_kernel(const LatheCudaStep* st, int layer, T* ko, T* vo) {
  const int s_i = blockIdx.x / KVH, h = blockIdx.x % KVH;
  if (s_i >= st->n_seq) return;
  const LatheSeq sq = st->seq[s_i];
  for (i64 e = threadIdx.x; e < i64(sq.past + sq.len) * D; e += blockDim.x) {
    int t = int(e / D), d = int(e % D);
    i64 o = ((i64(s_i) * KVH + h) * TP + t) * D + d;
    ko[o] = fromf<T>(kv_get<KF, D>(st, kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, 0, sq.slot, t, h), d));
    vo[o] = fromf<T>(kv_get<KF, D>(st, kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, 1, sq.slot, t, h), d));
  }
}

template <typename T, int H, int KVH, int D, int SP, int TP>
__device__ void qk_kernel(const LatheCudaStep* st, const T* q, const T* k, float* s, float scale) {
  const int s_i = blockIdx.x / H, h = blockIdx.x % H;
  if (s_i >= st->n_seq) return;
  const LatheSeq sq = st->seq[s_i];
  const int T_ctx = sq.past + sq.len;
  for (i64 e = threadIdx.x; e < i64(sq.len) * T_ctx; e += blockDim.x) {
    int i = int(e / T_ctx), t = int(e % T_ctx);
    const T* qp = q + i64(sq.row0 + i) * (H * D) + h * D;
    const T* kp = k + ((i64(s_i) * KVH + h / (H / KVH)) * TP + t) * D;
    float dot = 0.0f;
    for (int d = 0; d < D; ++d) dot += tof(qp[d]) * tof(kp[d]);
    s[((i64(s_i) * H + h) * SP + i) * TP + t] = dot * scale;
  }
}

template <int H, int SP, int TP>
__device__ void mask_kernel(const LatheCudaStep* st, const float* in, float* out) {
  const int s_i = blockIdx.x / H;
  if (s_i >= st->n_seq) return;
  const LatheSeq sq = st->seq[s_i];
  const int T_ctx = sq.past + sq.len;
  for (i64 e = threadIdx.x; e < i64(sq.len) * T_ctx; e += blockDim.x) {
    int i = int(e / T_ctx), t = int(e % T_ctx);
    i64 o = (i64(blockIdx.x) * SP + i) * TP + t;
    out[o] = t <= sq.past + i ? in[o] : -inf();
  }
}

template <int H, int SP, int TP>
__device__ void softmax_kernel(const LatheCudaStep* st, const float* in, float* out) {
  __shared__ float red[32];
  const int s_i = blockIdx.x / H;
  if (s_i >= st->n_seq) return;
  const LatheSeq sq = st->seq[s_i];
  const int T_ctx = sq.past + sq.len;
  for (int i = 0; i < sq.len; ++i) {
    const i64 o = (i64(blockIdx.x) * SP + i) * TP;
    float mx = -inf();
    for (int t = threadIdx.x; t < T_ctx; t += blockDim.x) mx = fmaxf(mx, in[o + t]);
    const float m2 = block_max(mx, red);
    float sum = 0.0f;
    for (int t = threadIdx.x; t < T_ctx; t += blockDim.x) sum += __expf(in[o + t] - m2);
    sum = block_sum(sum, red);
    for (int t = threadIdx.x; t < T_ctx; t += blockDim.x) out[o + t] = __expf(in[o + t] - m2) / sum;
    __syncthreads();
  }
}

template <typename T, int H, int KVH, int D, int SP, int TP>
__device__ void pv_kernel(const LatheCudaStep* st, const float* p, const T* v, T* o) {
  const int s_i = blockIdx.x / H, h = blockIdx.x % H;
  if (s_i >= st->n_seq) return;
  const LatheSeq sq = st->seq[s_i];
  const int T_ctx = sq.past + sq.len;
  for (i64 e = threadIdx.x; e < i64(sq.len) * D; e += blockDim.x) {
    int i = int(e / D), d = int(e % D);
    const float* pp = p + ((i64(s_i) * H + h) * SP + i) * TP;
    float acc = 0.0f;
    for (int t = 0; t < T_ctx; ++t) acc += pp[t] * tof(v[((i64(s_i) * KVH + h / (H / KVH)) * TP + t) * D + d]);
    o[i64(sq.row0 + i) * (H * D) + h * D + d] = fromf<T>(acc);
  }
}

template <typename T, int FMT, int K, int G>
__device__ void embedding_kernel(const LatheCudaStep* st, const int* tokens, const void* w, const void* s, T* out) {
  constexpr int E = WChunk<FMT>::E;
  const i64 r = blockIdx.x;
  if (r >= st->n_rows) return;
  const i64 tok = tokens[r];
  const float rs = row_scale<FMT, G>(s, tok);
  for (int c = threadIdx.x; c < K / E; c += blockDim.x) {
    float v[E];
    wchunk<FMT, K, G>(w, s, tok, c, v);
#pragma unroll
    for (int i = 0; i < E; ++i) out[r * K + c * E + i] = fromf<T>(v[i] * rs);
  }
}

template <typename T, int K>
__device__ void rms_norm_kernel(const LatheCudaStep* st, const T* x, const T* w, T* y, float eps) {
  __shared__ float red[32];
  const i64 r = blockIdx.x;
  if (r >= st->n_rows) return;
  float ss = 0.0f;
  for (int k = threadIdx.x; k < K; k += blockDim.x) {
    float v = tof(x[r * K + k]);
    ss += v * v;
  }
  const float sc = rsqrtf(block_sum(ss, red) / float(K) + eps);
  for (int k = threadIdx.x; k < K; k += blockDim.x) y[r * K + k] = fromf<T>(tof(x[r * K + k]) * sc * tof(w[k]));
}

// op 0: silu(a); 1: a * b; 2: a + b; 3: silu(a) * b, over rows x W elements.
template <typename T, int OP, i64 W>
__device__ void elementwise_kernel(const LatheCudaStep* st, const T* a, const T* b, T* y) {
  const i64 n = i64(st->n_rows) * W;
  for (i64 i = i64(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += i64(gridDim.x) * blockDim.x) {
    float v = tof(a[i]);
    if (OP == 0) v = silu(v);
    else if (OP == 3) v = silu(v) * tof(b[i]);
    else if (OP == 1) v *= tof(b[i]);
    else v += tof(b[i]);
    y[i] = fromf<T>(v);
  }
}

template <typename T, int FMT, int K, int G, int E, int TOPK>
__device__ void router_kernel(const LatheCudaStep* st, const T* h, const void* w, const void* s, int* ids, float* gates) {
  __shared__ float logits[E];
  const i64 r = blockIdx.x;
  if (r >= st->n_rows) return;
  const T* xr = h + r * K;
  for (int e = threadIdx.x >> 5; e < E; e += blockDim.x >> 5) {
    float a;
    warp_gemv<T, FMT, K, G, 1, false>(w, s, e, &xr, nullptr, nullptr, 1, &a);
    if ((threadIdx.x & 31) == 0) logits[e] = a;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  int chosen[TOPK];
  for (int j = 0; j < TOPK; ++j) {
    int best = -1;
    for (int e = 0; e < E; ++e) {
      bool taken = false;
      for (int q = 0; q < j; ++q) taken |= chosen[q] == e;
      if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
    }
    chosen[j] = best;
  }
  float mx = logits[chosen[0]], sum = 0.0f;
  for (int j = 0; j < TOPK; ++j) sum += __expf(logits[chosen[j]] - mx);
  for (int j = 0; j < TOPK; ++j) {
    ids[r * TOPK + j] = chosen[j];
    gates[r * TOPK + j] = __expf(logits[chosen[j]] - mx) / sum;
  }
}

template <typename T, int K, int TOPK>
__device__ void dispatch_kernel(const LatheCudaStep* st, const T* h, T* out) {
  const i64 r = blockIdx.x;
  if (r >= st->n_rows) return;
  for (int e = threadIdx.x; e < TOPK * K; e += blockDim.x) out[r * TOPK * K + e] = h[r * K + e % K];
}

template <typename T, int N, int TOPK>
__device__ void combine_kernel(const LatheCudaStep* st, const T* y, const float* gates, T* out) {
  const i64 r = blockIdx.x;
  if (r >= st->n_rows) return;
  for (int n = threadIdx.x; n < N; n += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < TOPK; ++j) acc += gates[r * TOPK + j] * tof(y[(r * TOPK + j) * N + n]);
    out[r * N + n] = fromf<T>(acc);
  }
}

template <int V>
__device__ void argmax_kernel(const LatheCudaStep* st, const float* logits, int* tokens) {
  __shared__ float bv[32];
  __shared__ int bi[32];
  const int s_i = blockIdx.x;
  if (s_i >= st->n_seq) return;
  const float* l = logits + i64(s_i) * V;
  float best = -inf();
  int idx = 0;
  if constexpr (V % 4 == 0) {
    // 16-byte loads, four in flight per thread (one block streams the whole row).
    const float4* l4 = reinterpret_cast<const float4*>(l);
    constexpr int V4 = V / 4;
#pragma unroll 4
    for (int v = threadIdx.x; v < V4; v += blockDim.x) {
      const float4 q = l4[v];
      if (q.x > best) best = q.x, idx = 4 * v;
      if (q.y > best) best = q.y, idx = 4 * v + 1;
      if (q.z > best) best = q.z, idx = 4 * v + 2;
      if (q.w > best) best = q.w, idx = 4 * v + 3;
    }
  } else {
    for (int v = threadIdx.x; v < V; v += blockDim.x)
      if (l[v] > best) best = l[v], idx = v;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float b2 = __shfl_xor_sync(0xffffffffu, best, o);
    int i2 = __shfl_xor_sync(0xffffffffu, idx, o);
    if (b2 > best || (b2 == best && i2 < idx)) best = b2, idx = i2;
  }
  if ((threadIdx.x & 31) == 0) bv[threadIdx.x >> 5] = best, bi[threadIdx.x >> 5] = idx;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x >> 5); ++w)
      if (bv[w] > best || (bv[w] == best && bi[w] < idx)) best = bv[w], idx = bi[w];
    tokens[s_i] = idx;
  }
}

}  // namespace lk
