// Kernel bodies for every op kind, as templates over the node's constants. A
// generated kernel is one instantiation; prologues and epilogues run inside the same
// loop nest as the GEMM (row tiles of the prologue and tiles of the epilogue live in
// scratch, never as full tensors in memory).
//
// Activation buffers are row-packed: [B, S, X] holds step->n_rows rows of X; score
// buffers [B, h, S, T] are indexed [seq][h][i][t] with the plan's S and T as strides.
#ifndef LATHE_KERNEL_LIB_H
#define LATHE_KERNEL_LIB_H

#include "codegen/cpu/kernel_prelude.h"

namespace lk {

constexpr int kGemvRows = 8;    // up to this many rows a GEMM runs as GEMV (decode)
constexpr int kTileRows = 256;  // row tile of the GEMM path
constexpr int kTileCols = 128;  // column block of the GEMM path (dequantized or prepared integer weights)

// Column blocks of a GEMM over N columns: f32 weights without an epilogue tile give
// each thread one wide sgemm (BLAS packs its operands once); otherwise blocks of
// kTileCols bound the dequantization and epilogue scratch.
inline i64 col_block(const LatheCtx* c, i64 N, bool wide) {
  if (!wide) return kTileCols;
  i64 per = (N + c->threads - 1) / c->threads;
  return (per + 15) / 16 * 16;
}

struct GemmDesc {
  int nw;        // weights (= outputs unless silu_mul)
  i64 n[4];      // output width of each weight
  int prologue;  // PRO_NONE / PRO_RMS_NORM
  int epilogue;  // EPI_NONE / EPI_RESIDUAL / EPI_SILU_MUL
  float eps;
  int last_rows;  // lm_head: one row per sequence, its last
};

constexpr int kQRows = 4, kQCols = 3;  // register tile of qgemm_tile: activation x weight rows

#ifdef LATHE_INT_DOT

// The GEMM path of gemm_kernel for int4 weights on hosts with integer dot products (and
// int8 weights on hosts with VNNI, whose dot products do not saturate):
// each tile of TR rows is quantized to int8 once (prologue applied on the way,
// qgemv_xrow), then every thread takes column blocks of CB weight rows, prepares them in
// the dot products' lane order (qgemm_wrow) and runs register tiles over them, writing
// the epilogue straight into the output: no dequantized weights, no f32 GEMM.
template <int FMT, int K, int G, int TR, i64 CB, class SrcRow>
void qgemm_kernel(const LatheCtx* c, const GemmDesc& d, i64 M, const SrcRow& src_row, const float* x,
                  const float* norm, const void* const* W, const u16* const* S, float* const* out, const float* res) {
  static_assert(FMT == I8 || G > 0, "int4 weights have group scales");
  constexpr i64 XB = qgemv_row_bytes(K), WB = qgemm_wrow_bytes(K);
  u8* xq = (u8*)c->shared;  // [TR] quantized rows
  for (i64 r0 = 0; r0 < M; r0 += TR) {
    const i64 mt = min64(TR, M - r0);
    par(c, mt, 4, [&](i64 b, i64 e, int t) {
      float* tmp = c->scratch[t];
      for (i64 i = b; i < e; ++i) {
        const float* src = x + src_row(r0 + i) * K;
        if (d.prologue == PRO_RMS_NORM) {
          rms_norm_row<K>(src, norm, d.eps, tmp);
          src = tmp;
        }
        qgemv_xrow<FMT, K>(src, xq + i * XB);
      }
    });
    const bool gated = d.epilogue == EPI_SILU_MUL;
    const int segs = gated ? 1 : d.nw;
    for (int seg = 0; seg < segs; ++seg) {
      const i64 N = d.n[seg], blocks = (N + CB - 1) / CB;
      par(c, blocks, 1, [&](i64 b, i64 e, int t) {
        u8* wt = (u8*)c->scratch[t];  // [2][CB] prepared weight rows
        for (i64 blk = b; blk < e; ++blk) {
          const i64 n0 = blk * CB, nb = min64(CB, N - n0);
          for (i64 j = 0; j < nb; ++j) {
            qgemm_wrow<FMT, K, G>(W[seg], S[seg], n0 + j, wt + j * WB);
            if (gated) qgemm_wrow<FMT, K, G>(W[1], S[1], n0 + j, wt + (CB + j) * WB);
          }
          for (i64 i0 = 0; i0 < mt; i0 += kQRows) {
            const u8* xr[kQRows];
            for (int i = 0; i < kQRows; ++i) xr[i] = xq + min64(i0 + i, mt - 1) * XB;  // tails repeat a row
            for (i64 j0 = 0; j0 < nb; j0 += kQCols) {
              const u8 *wa[kQCols], *wb[kQCols];
              for (int j = 0; j < kQCols; ++j) {
                const i64 jj = min64(j0 + j, nb - 1);
                wa[j] = wt + jj * WB;
                wb[j] = wt + (CB + jj) * WB;
              }
              static_assert(kQRows * kQCols <= 16, "a register tile's results fit one vector");
              float ta[16] = {}, tb[16] = {};
              qgemm_tile<K, kQRows, kQCols>(xr, wa, ta, kQCols);
              if (gated) {
                qgemm_tile<K, kQRows, kQCols>(xr, wb, tb, kQCols);
                vstore(ta, vsilu(vload(ta)) * vload(tb));
              }
              const i64 ni = min64(kQRows, mt - i0), nj = min64(kQCols, nb - j0);
              for (i64 i = 0; i < ni; ++i) {
                const i64 o = (r0 + i0 + i) * N + n0 + j0;
                for (i64 j = 0; j < nj; ++j) {
                  float v = ta[i * kQCols + j];
                  if (d.epilogue == EPI_RESIDUAL) v += res[o + j];
                  out[seg][o + j] = v;
                }
              }
            }
          }
        }
      });
    }
  }
}
#endif

// matmul / lm_head. x [rows, K]; W[i] [n[i], K]; out[i] [rows, n[i]] (lm_head: [seq, n]).
// Tuning knobs (`lathe tune`): TR rows per tile of the GEMM path, TC columns per block
// (0: the default rule of col_block).
template <int FMT, int K, int G, int TR = kTileRows, int TC = 0>
void gemm_kernel(const LatheCtx* c, const LatheStep* st, const GemmDesc& d, const float* x, const float* norm,
                 const void* const* W, const u16* const* S, float* const* out, const float* res) {
  const i64 M = d.last_rows ? st->n_seq : st->n_rows;
  if (M == 0) return;
  auto src_row = [&](i64 i) -> i64 { return d.last_rows ? st->seq[i].row0 + st->seq[i].len - 1 : i; };
  const bool direct = d.prologue == PRO_NONE && !d.last_rows;  // A rows are x rows as they are
  auto fill = [&](i64 r0, i64 mt, float* A) {
    par(c, mt, 4, [&](i64 b, i64 e, int) {
      for (i64 i = b; i < e; ++i) {
        const float* src = x + src_row(r0 + i) * K;
        if (d.prologue == PRO_RMS_NORM) {
          rms_norm_row<K>(src, norm, d.eps, A + i * K);
        } else {
          for (int k = 0; k < K; ++k) A[i * K + k] = src[k];
        }
      }
    });
  };
  if (M <= kGemvRows) {
    const float* A = x;
    if (!direct) {
      fill(0, M, c->shared);
      A = c->shared;
    }
    GemvX<FMT, K> gx;
    gx.prepare(c, A, K, int(M), c->shared + kGemvRows * K);
    i64 total = d.epilogue == EPI_SILU_MUL ? d.n[0] : 0;
    if (d.epilogue != EPI_SILU_MUL)
      for (int i = 0; i < d.nw; ++i) total += d.n[i];
    par(c, total, 16, [&](i64 b, i64 e, int) {
      float acc[kGemvRows], acc2[kGemvRows];
      if (d.epilogue == EPI_SILU_MUL) {  // the gate and up rows of a column in one pass
        // 16 columns' gate and up values, then silu(gate) x up for them as vectors.
        for (i64 g0 = b; g0 < e; g0 += 16) {
          const i64 nc = min64(16, e - g0);
          float ga[kGemvRows][16], ua[kGemvRows][16];
          for (i64 j = 0; j < nc; ++j) {
            gemv_rows2<FMT, K, G>(W[0], S[0], g0 + j, W[1], S[1], g0 + j, gx, 0, int(M), acc, acc2);
            for (i64 m = 0; m < M; ++m) ga[m][j] = acc[m], ua[m][j] = acc2[m];
          }
          for (i64 m = 0; m < M; ++m) silu_mul(ga[m], ua[m], out[0] + m * d.n[0] + g0, nc);
        }
        return;
      }
      auto store = [&](int seg, i64 n, const float* a) {
        for (i64 m = 0; m < M; ++m) {
          float v = a[m];
          if (d.epilogue == EPI_RESIDUAL) v += res[m * d.n[seg] + n];
          out[seg][m * d.n[seg] + n] = v;
        }
      };
      // Column g is row n of weight seg.
      auto locate = [&](i64 g, int& seg, i64& n) {
        seg = 0, n = g;
        while (n >= d.n[seg]) n -= d.n[seg++];
      };
      int seg, seg1;
      i64 n, n1;
      if constexpr (!gemv_two_rows<FMT, K, G>()) {  // a column at a time, in order
        for (i64 g = b; g < e; ++g) {
          locate(g, seg, n);
          gemv_rows<FMT, K, G>(W[seg], S[seg], n, gx, 0, int(M), acc);
          store(seg, n, acc);
        }
        return;
      }
      // Two columns a pass (they may lie in different weights): column g of the chunk's
      // first half with column g + h of its second, so the weights are read as two
      // sequential streams. Adjacent columns (rows n and n + 1 together) measured up to 3x
      // slower at hidden 512: interleaving two short rows defeats the hardware prefetch.
      const i64 h = (e - b) / 2;
      for (i64 g = b; g < b + h; ++g) {
        locate(g, seg, n);
        locate(g + h, seg1, n1);
        gemv_rows2<FMT, K, G>(W[seg], S[seg], n, W[seg1], S[seg1], n1, gx, 0, int(M), acc, acc2);
        store(seg, n, acc);
        store(seg1, n1, acc2);
      }
      if ((e - b) % 2 == 1) {
        locate(e - 1, seg, n);
        gemv_rows<FMT, K, G>(W[seg], S[seg], n, gx, 0, int(M), acc);
        store(seg, n, acc);
      }
    });
    return;
  }
  constexpr i64 CB = TC > 0 ? TC : kTileCols;  // column block of the scratch layout
#ifdef LATHE_INT_DOT
  if constexpr ((FMT == I4 || FMT == I8) && GemvX<FMT, K>::quantized) {
    qgemm_kernel<FMT, K, G, TR, CB>(c, d, M, src_row, x, norm, W, S, out, res);
    return;
  }
#endif
  for (i64 r0 = 0; r0 < M; r0 += TR) {
    const i64 mt = min64(TR, M - r0);
    const float* A = x + r0 * K;
    if (!direct) {
      fill(r0, mt, c->shared);
      A = c->shared;
    }
    const int segs = d.epilogue == EPI_SILU_MUL ? 1 : d.nw;
    for (int seg = 0; seg < segs; ++seg) {
      const i64 N = d.n[seg];
      const i64 cb = TC > 0 ? TC : col_block(c, N, FMT == F32 && d.epilogue != EPI_SILU_MUL),
                blocks = (N + cb - 1) / cb;
      par(c, blocks, 1, [&](i64 b, i64 e, int t) {
        float* wbuf = c->scratch[t];
        float* tile = wbuf + CB * K;  // [2][TR][CB] for silu_mul
        for (i64 blk = b; blk < e; ++blk) {
          const i64 n0 = blk * cb, nb = min64(cb, N - n0);
          float* C = out[seg] + r0 * N + n0;
          if (d.epilogue == EPI_SILU_MUL) {
            float* gt = tile;
            float* ut = tile + TR * CB;
            gemm_block<FMT, K, G>(c, wbuf, A, K, mt, W[0], S[0], n0, nb, gt, nb, 0.0f);
            gemm_block<FMT, K, G>(c, wbuf, A, K, mt, W[1], S[1], n0, nb, ut, nb, 0.0f);
            for (i64 i = 0; i < mt; ++i) silu_mul(gt + i * nb, ut + i * nb, C + i * N, nb);
            continue;
          }
          float beta = 0.0f;
          if (d.epilogue == EPI_RESIDUAL) {
            for (i64 i = 0; i < mt; ++i)
              for (i64 j = 0; j < nb; ++j) C[i * N + j] = res[(r0 + i) * N + n0 + j];
            beta = 1.0f;
          }
          gemm_block<FMT, K, G>(c, wbuf, A, K, mt, W[seg], S[seg], n0, nb, C, N, beta);
        }
      });
    }
  }
}

struct ExpertDesc {
  int nw;
  i64 n[4];
  int prologue;  // PRO_NONE (x is [rows, k, K]) or PRO_GATHER (x is [rows, K])
  int epilogue;  // EPI_NONE / EPI_SILU_MUL / EPI_COMBINE / EPI_COMBINE_RESIDUAL
  int top_k;
  int experts;
};

// expert_matmul: pair p = row * top_k + j uses expert idx[p]. Outputs [pairs, n] per
// weight, [pairs, n] for silu_mul, [rows, n] for combine (sum_j gate_j y_j (+ res)).
template <int FMT, int K, int G>
void expert_kernel(const LatheCtx* c, const LatheStep* st, const ExpertDesc& d, const float* x, const int* idx,
                   const void* const* W, const u16* const* S, const float* gates, const float* res,
                   float* const* out) {
  const i64 rows = st->n_rows, P = rows * d.top_k;
  if (rows == 0) return;
  auto xrow = [&](i64 p) { return d.prologue == PRO_GATHER ? x + (p / d.top_k) * K : x + p * K; };
  const bool combine = d.epilogue == EPI_COMBINE || d.epilogue == EPI_COMBINE_RESIDUAL;
  if (P <= 16) {  // decode: one weight row per (pair, n)
    // Activation rows: the token rows when gathering, else one per pair.
    const i64 R = d.prologue == PRO_GATHER ? rows : P;
    GemvX<FMT, K> gx;
    gx.prepare(c, x, K, int(R), c->shared);
    auto xm = [&](i64 p) { return int(d.prologue == PRO_GATHER ? p / d.top_k : p); };
    i64 total = 0;
    if (d.epilogue == EPI_SILU_MUL || combine) total = d.n[0];
    else
      for (int i = 0; i < d.nw; ++i) total += d.n[i];
    par(c, total, 16, [&](i64 b, i64 e, int) {
      for (i64 g = b; g < e; ++g) {
        int seg = 0;
        i64 n = g;
        if (d.epilogue == EPI_NONE)
          while (n >= d.n[seg]) n -= d.n[seg++];
        const i64 N = d.n[seg];
        if (combine)
          for (i64 r = 0; r < rows; ++r) out[0][r * N + n] = d.epilogue == EPI_COMBINE_RESIDUAL ? res[r * N + n] : 0.0f;
        float ga[16], ua[16];  // P <= 16 pairs' gate and up values
        for (i64 p = 0; p < P; ++p) {
          const i64 ex = idx[p];
          float a;
          if (d.epilogue == EPI_SILU_MUL) {  // the gate and up rows in one pass
            gemv_rows2<FMT, K, G>(expert_w<FMT, K, G>(W[0], ex, N), expert_s<FMT, K, G>(S[0], ex, N), n,
                                  expert_w<FMT, K, G>(W[1], ex, N), expert_s<FMT, K, G>(S[1], ex, N), n, gx, xm(p), 1,
                                  &ga[p], &ua[p]);
            continue;
          }
          gemv_rows<FMT, K, G>(expert_w<FMT, K, G>(W[seg], ex, N), expert_s<FMT, K, G>(S[seg], ex, N), n, gx, xm(p), 1,
                               &a);
          if (combine) {
            out[0][(p / d.top_k) * N + n] += gates[p] * a;
          } else {
            out[seg][p * N + n] = a;
          }
        }
        if (d.epilogue == EPI_SILU_MUL) {
          silu_mul(ga, ua, ga, P);
          for (i64 p = 0; p < P; ++p) out[0][p * N + n] = ga[p];
        }
      }
    });
    return;
  }
  // Prefill: pairs grouped by expert, gathered in row tiles, multiplied with sgemm.
  int* order = (int*)c->shared;  // [P] pairs sorted by expert
  int* start = order + P;        // [experts + 1]
  float* A = (float*)(start + d.experts + 1);
  A = (float*)(((unsigned long)A + 63) & ~63ul);
  for (int e = 0; e <= d.experts; ++e) start[e] = 0;
  for (i64 p = 0; p < P; ++p) ++start[idx[p] + 1];
  for (int e = 0; e < d.experts; ++e) start[e + 1] += start[e];
  {
    int fill[256];
    for (int e = 0; e < d.experts; ++e) fill[e] = start[e];
    for (i64 p = 0; p < P; ++p) order[fill[idx[p]]++] = int(p);
  }
  if (combine) {
    const i64 N = d.n[0];
    par(c, rows, 16, [&](i64 b, i64 e, int) {
      for (i64 i = b * N; i < e * N; ++i) out[0][i] = d.epilogue == EPI_COMBINE_RESIDUAL ? res[i] : 0.0f;
    });
  }
  const int segs = (d.epilogue == EPI_NONE) ? d.nw : 1;
  for (int ex = 0; ex < d.experts; ++ex) {
    for (i64 q0 = start[ex]; q0 < start[ex + 1]; q0 += kTileRows) {
      const i64 mt = min64(kTileRows, start[ex + 1] - q0);
      for (i64 i = 0; i < mt; ++i) {
        const float* src = xrow(order[q0 + i]);
        for (int k = 0; k < K; ++k) A[i * K + k] = src[k];
      }
      for (int seg = 0; seg < segs; ++seg) {
        const i64 N = d.n[seg], blocks = (N + kTileCols - 1) / kTileCols;
        par(c, blocks, 1, [&](i64 b, i64 e, int t) {
          float* wbuf = c->scratch[t];
          float* gt = wbuf + kTileCols * K;
          float* ut = gt + kTileRows * kTileCols;
          for (i64 blk = b; blk < e; ++blk) {
            const i64 n0 = blk * kTileCols, nb = min64(kTileCols, N - n0);
            gemm_block<FMT, K, G>(c, wbuf, A, K, mt, expert_w<FMT, K, G>(W[seg], ex, N),
                                  expert_s<FMT, K, G>(S[seg], ex, N), n0, nb, gt, nb, 0.0f);
            if (d.epilogue == EPI_SILU_MUL)
              gemm_block<FMT, K, G>(c, wbuf, A, K, mt, expert_w<FMT, K, G>(W[1], ex, N),
                                    expert_s<FMT, K, G>(S[1], ex, N), n0, nb, ut, nb, 0.0f);
            for (i64 i = 0; i < mt; ++i) {
              const i64 p = order[q0 + i];
              if (d.epilogue == EPI_SILU_MUL) {
                silu_mul(gt + i * nb, ut + i * nb, out[0] + p * N + n0, nb);
                continue;
              }
              for (i64 j = 0; j < nb; ++j) {
                float v = gt[i * nb + j];
                if (combine) out[0][(p / d.top_k) * N + n0 + j] += gates[p] * v;
                else out[seg][p * N + n0 + j] = v;
              }
            }
          }
        });
      }
    }
  }
}

// ---------------------------------------------------------------- attention
// Keys go in blocks of kKeyBlock (one vector of scores). Decode's single row reads a
// block's K and V rows where they lie in the cache, in its format: block_scores_rows
// takes 16 dot products per head (each key's vectors converted once for the GQ heads)
// and one lane reduction, I8 / I4 scales applied to the 16 sums and folded into the
// probabilities. Prefill's tiles: load_kv_block converts the block to f32 once for the
// tile (f32 rows read in place) and transposes K so that a query's 16 scores are D
// vector FMAs (block_scores_t). Either way attend_scores takes the block into one query
// row's online softmax for the GQ query heads of a KV head: one vector exp per head, the
// running output rescaled once per block and updated with each V vector loaded once for
// the heads.
constexpr int kKeyBlock = 16;

// A block's K and V rows (keys t0 .. t0 + nb - 1) where they lie in the cache and, for
// I8 / I4, their scales (lanes nb.. 0).
template <int KF, int LAY, int L, int KVH, int TCAP, int NB, int SLOTS, int D>
inline void kv_block_ptrs(const LatheCtx* c, const LatheStep* st, int layer, int slot, int h, int t0, int nb,
                          const u8** kp, const u8** vp, float* ks, float* vs) {
  constexpr i64 RB = kv_row_bytes<KF, D>();
  for (int j = 0; j < nb; ++j) {
    const i64 ki = kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, 0, slot, t0 + j, h);
    const i64 vi_ = kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, 1, slot, t0 + j, h);
    kp[j] = c->kv + ki * RB;
    vp[j] = c->kv + vi_ * RB;
    if constexpr (kv_scaled(KF)) {
      ks[j] = h2f(c->kv_scales[ki]);
      vs[j] = h2f(c->kv_scales[vi_]);
    }
  }
  if constexpr (kv_scaled(KF))
    for (int j = nb; j < kKeyBlock; ++j) ks[j] = vs[j] = 0;
}

// Prefill's block: f32 K and V rows (in place, or converted into kb / vb once for the
// tile) and K transposed for the tile's rows to share: kt[i] lane j = element i of key
// t0 + j (16 x 16 transposes; lanes nb.. of a short last block are 0, masked).
template <int KF, int LAY, int L, int KVH, int TCAP, int NB, int SLOTS, int D>
inline void load_kv_block(const LatheCtx* c, const LatheStep* st, int layer, int slot, int h, int t0, int nb,
                          float (*kb)[D], float (*vb)[D], const u8** krow, const u8** vrow, vf* kt) {
  float ks[kKeyBlock], vs[kKeyBlock];
  kv_block_ptrs<KF, LAY, L, KVH, TCAP, NB, SLOTS, D>(c, st, layer, slot, h, t0, nb, krow, vrow, ks, vs);
  if constexpr (KF != F32)
    for (int j = 0; j < nb; ++j) {
      kv_row_f32<KF, D>(krow[j], kv_scaled(KF) ? ks[j] : 1.0f, kb[j]);
      kv_row_f32<KF, D>(vrow[j], kv_scaled(KF) ? vs[j] : 1.0f, vb[j]);
      krow[j] = (const u8*)kb[j];
      vrow[j] = (const u8*)vb[j];
    }
  for (int d0 = 0; d0 < D; d0 += 16) {
    for (int j = 0; j < kKeyBlock; ++j) kt[d0 + j] = j < nb ? vload((const float*)krow[j] + d0) : vf{};
    transpose16(kt + d0);
  }
}

// The scores of one query row (qs, already scaled) against a block's keys from the
// transposed block kt: lane j of sc[g] = head g's query . key j.
template <int GQ, int D>
inline void block_scores_t(const float (*qs)[D], const vf* kt, vf* sc) {
  // CH independent sums per head: one chain of D FMAs would wait on each FMA's latency.
  constexpr int CH = GQ >= 4 ? 2 : 4;
  vf sgs[GQ][CH];
  for (int g = 0; g < GQ; ++g)
    for (int u = 0; u < CH; ++u) sgs[g][u] = vf{};
  for (int i = 0; i < D; i += CH)
    for (int u = 0; u < CH; ++u) {
      const vf k = kt[i + u];
      for (int g = 0; g < GQ; ++g) sgs[g][u] += qs[g][i + u] * k;
    }
  for (int g = 0; g < GQ; ++g) {
    sc[g] = sgs[g][0];
    for (int u = 1; u < CH; ++u) sc[g] += sgs[g][u];
  }
}

// The same scores from the keys' rows in the cache (kp[j], j < nb; lanes nb.. are 0):
// per head 16 dot products of D / 16 vector FMAs each, then one vector of the 16 sums
// (hsum16); I8 / I4 keys' scales ks multiply the sums, and I4's offset of 8 comes off
// as 8 x the sum of the query (qsum). With one query row a block this beats transposing
// the block (D / 16 transposes of 64 shuffles against GQ reductions of 30: 256 against
// 60 for D = 64 and GQ = 2, 512 against 120 for D = 128 and GQ = 4; only small heads
// with many query heads a KV head, D = 32 and GQ = 8, shuffle more). f32 keys go head by
// head (16 sums in registers); other formats key by key, each key's vectors converted
// once for the GQ heads.
template <int KF, int GQ, int D>
inline void block_scores_rows(const float (*qs)[D], const float* qsum, const u8* const* kp, const float* ks,
                              int nb, vf* sc) {
  constexpr int DV = D / 16;
  if constexpr (KF == F32) {
    for (int g = 0; g < GQ; ++g) {
      vf q[DV], a[kKeyBlock];
      for (int v = 0; v < DV; ++v) q[v] = vload(qs[g] + v * 16);
      for (int j = 0; j < kKeyBlock; ++j) a[j] = vf{};
      for (int j = 0; j < nb; ++j)
        for (int v = 0; v < DV; ++v) a[j] += q[v] * vload((const float*)kp[j] + v * 16);
      sc[g] = hsum16(a);
    }
  } else {
    vf a[GQ][kKeyBlock];
    for (int j = 0; j < nb; ++j) {
      vf k[DV];
      for (int v = 0; v < DV; ++v) k[v] = kv_vec<KF>(kp[j], v);
      for (int g = 0; g < GQ; ++g) {
        vf s = vload(qs[g]) * k[0];
        for (int v = 1; v < DV; ++v) s += vload(qs[g] + v * 16) * k[v];
        a[g][j] = s;
      }
    }
    for (int g = 0; g < GQ; ++g) {
      for (int j = nb; j < kKeyBlock; ++j) a[g][j] = vf{};
      sc[g] = hsum16(a[g]);
      if constexpr (KF == I4) sc[g] -= 8.0f * qsum[g];
      if constexpr (kv_scaled(KF)) sc[g] *= vload(ks);
    }
  }
}

// One query row's scores sc (lanes below vis visible) into its online softmax; V rows
// vrow[j] in format KF (prefill passes f32 rows) with, for I8 / I4, scales vs (folded
// into the probabilities; I4's offset of 8 comes off as 8 x their sum). acc, m, l: the
// row's running output, max and sum per head.
template <int KF, int GQ, int D>
inline void attend_scores(const vf* sc_in, const u8* const* vrow, const float* vs, int vis, vf (*acc)[D / 16],
                          float* m, float* l) {
  static_assert(D % 16 == 0, "head_dim is a multiple of 16");
  constexpr int DV = D / 16;
  const vi keep = vlanes_below(vis);
  float pl[GQ][kKeyBlock], psum[GQ];
  for (int g = 0; g < GQ; ++g) {
    const vf sc = sc_in[g];
    // Invisible lanes to a very negative score: they neither raise the max nor (masked
    // after the exp) add to the sum.
    const float mb = vmax_lanes((vf)(((vi)sc & keep) | ((vi)vsplat(-3.0e38f) & ~keep)));
    const float mn = mb > m[g] ? mb : m[g];
    const vf p = (vf)((vi)vexp_neg(sc - mn) & keep);
    const float alpha = __builtin_expf(m[g] - mn);
    l[g] = l[g] * alpha + vsum(p);
    for (int v = 0; v < DV; ++v) acc[g][v] *= alpha;
    if constexpr (kv_scaled(KF)) {
      const vf pw = p * vload(vs);
      vstore(pl[g], pw);
      if constexpr (KF == I4) psum[g] = vsum(pw);
    } else {
      vstore(pl[g], p);
    }
    m[g] = mn;
  }
  // P V: the running outputs in registers when they fit (acc may alias the float
  // arrays as far as the compiler knows), else one head at a time; then a converted
  // format's V rows are converted once into vc first, not once per head.
  constexpr int GB = GQ * DV <= 16 ? GQ : 1;
  constexpr bool CONV = KF != F32 && GB < GQ;
  float vc[CONV ? kKeyBlock : 1][CONV ? D : 16];
  if constexpr (CONV)
    for (int j = 0; j < vis; ++j)
      for (int v = 0; v < DV; ++v) vstore(vc[j] + v * 16, kv_vec<KF>(vrow[j], v));
  for (int g0 = 0; g0 < GQ; g0 += GB) {
    vf a[GB][DV];
    for (int g = 0; g < GB; ++g)
      for (int v = 0; v < DV; ++v) a[g][v] = acc[g0 + g][v];
    for (int j = 0; j < vis; ++j)
      for (int v = 0; v < DV; ++v) {
        vf x;
        if constexpr (CONV) x = vload(vc[j] + v * 16);
        else x = kv_vec<KF>(vrow[j], v);
        for (int g = 0; g < GB; ++g) a[g][v] += vsplat(pl[g0 + g][j]) * x;
      }
    for (int g = 0; g < GB; ++g)
      for (int v = 0; v < DV; ++v) {
        if constexpr (KF == I4) a[g][v] -= 8.0f * psum[g0 + g];
        acc[g0 + g][v] = a[g][v];
      }
  }
}

// One query row over a transposed block's first vis keys (prefill's tiles, f32 rows).
template <int GQ, int D>
inline void attend_block(const float (*qs)[D], const vf* kt, const u8* const* vrow, int vis, vf (*acc)[D / 16],
                         float* m, float* l) {
  vf sc[GQ];
  block_scores_t<GQ, D>(qs, kt, sc);
  attend_scores<F32, GQ, D>(sc, vrow, nullptr, vis, acc, m, l);
}

// One query row over keys t0 .. t1 - 1 of its cache, a block at a time (decode).
template <int KF, int LAY, int L, int KVH, int TCAP, int NB, int SLOTS, int GQ, int D>
inline void attend_range(const LatheCtx* c, const LatheStep* st, int layer, int slot, int h, int t0, int t1,
                         const float (*qs)[D], vf (*acc)[D / 16], float* m, float* l) {
  const u8 *kp[kKeyBlock], *vp[kKeyBlock];
  float ks[kKeyBlock], vs[kKeyBlock], qsum[GQ];
  if constexpr (KF == I4)
    for (int g = 0; g < GQ; ++g) {
      vf s = vload(qs[g]);
      for (int v = 1; v < D / 16; ++v) s += vload(qs[g] + v * 16);
      qsum[g] = vsum(s);
    }
  for (int k0 = t0; k0 < t1; k0 += kKeyBlock) {
    const int nb = t1 - k0 < kKeyBlock ? t1 - k0 : kKeyBlock;
    kv_block_ptrs<KF, LAY, L, KVH, TCAP, NB, SLOTS, D>(c, st, layer, slot, h, k0, nb, kp, vp, ks, vs);
    vf sc[GQ];
    block_scores_rows<KF, GQ, D>(qs, qsum, kp, ks, nb, sc);
    attend_scores<KF, GQ, D>(sc, vp, vs, nb, acc, m, l);
  }
}

// Causal attention of the step's new rows over their sequences' caches: per
// (sequence, kv head, tile of query rows), each key block is read and transposed once
// for the tile and all H/KVH query heads of the group. Decode (a tile of one row) reads
// the blocks' rows instead (attend_range).
template <int KF, int LAY, int L, int KVH, int TCAP, int NB, int SLOTS, int H, int D, int QT>
void attention_kernel(const LatheCtx* c, const LatheStep* st, int layer, const float* q, float* o, float scale) {
  constexpr int GQ = H / KVH, KB = kKeyBlock, DV = D / 16;
  i64 items = 0;
  for (int s = 0; s < st->n_seq; ++s) items += KVH * ((st->seq[s].len + QT - 1) / QT);
  par(c, items, 1, [&](i64 b, i64 e, int) {
    // The block buffers serve prefill's tiles only (decode reads the cache in place).
    float qs[QT][GQ][D], m[QT][GQ], l[QT][GQ], kb[QT > 1 ? KB : 1][D], vb[QT > 1 ? KB : 1][D];
    vf acc[QT][GQ][DV], kt[QT > 1 ? D : 1];
    for (i64 it = b; it < e; ++it) {
      // Decode the item: (sequence, kv head, query tile).
      i64 rest = it;
      int s = 0;
      for (;; ++s) {
        i64 n = KVH * ((st->seq[s].len + QT - 1) / QT);
        if (rest < n) break;
        rest -= n;
      }
      const LatheSeq sq = st->seq[s];
      const int tiles = (sq.len + QT - 1) / QT, h = int(rest / tiles), tile = int(rest % tiles);
      const int i0 = tile * QT, rows = sq.len - i0 < QT ? sq.len - i0 : QT;
      for (int r = 0; r < rows; ++r)
        for (int g = 0; g < GQ; ++g) {
          const float* qp = q + (i64)(sq.row0 + i0 + r) * (H * D) + (h * GQ + g) * D;
          for (int i = 0; i < D; ++i) qs[r][g][i] = qp[i] * scale;
          for (int v = 0; v < DV; ++v) acc[r][g][v] = vf{};
          m[r][g] = -3.0e38f;
          l[r][g] = 0;
        }
      const int last = sq.past + i0 + rows - 1;  // the tile's last row sees keys 0..last
      if constexpr (QT == 1) {  // decode: one row, no block shared to transpose for
        attend_range<KF, LAY, L, KVH, TCAP, NB, SLOTS, GQ, D>(c, st, layer, sq.slot, h, 0, last + 1, qs[0], acc[0],
                                                             m[0], l[0]);
      } else {
        for (int t0 = 0; t0 <= last; t0 += KB) {
          const int nb = last + 1 - t0 < KB ? last + 1 - t0 : KB;
          const u8 *krow[KB], *vrow[KB];
          load_kv_block<KF, LAY, L, KVH, TCAP, NB, SLOTS, D>(c, st, layer, sq.slot, h, t0, nb, kb, vb, krow, vrow, kt);
          for (int r = 0; r < rows; ++r) {
            // Keys t0 .. t0 + vis - 1 of this block are visible to row r (causal).
            const int lim = sq.past + i0 + r - t0 + 1, vis = lim < nb ? lim : nb;
            if (vis > 0) attend_block<GQ, D>(qs[r], kt, vrow, vis, acc[r], m[r], l[r]);
          }
        }
      }
      for (int r = 0; r < rows; ++r)
        for (int g = 0; g < GQ; ++g) {
          float* op = o + (i64)(sq.row0 + i0 + r) * (H * D) + (h * GQ + g) * D;
          const float inv = 1.0f / l[r][g];
          for (int v = 0; v < DV; ++v) vstore(op + v * 16, acc[r][g][v] * inv);
        }
    }
  });
}

// Decode attention split over the context (flash-decoding; the `split` knob of
// `lathe tune`): each (sequence, kv head) reads its cached positions in SPLIT
// contiguous parts on different threads, each part keeps its own running max, sum and
// output in `shared`, and a second pass combines the parts. One new row per sequence.
template <int KF, int LAY, int L, int KVH, int TCAP, int NB, int SLOTS, int H, int D, int SPLIT>
void attention_split_kernel(const LatheCtx* c, const LatheStep* st, int layer, const float* q, float* o,
                            float scale) {
  constexpr int GQ = H / KVH;
  constexpr int PART = GQ * (D + 2);  // per part: [GQ][D] output, then [GQ] max, [GQ] sum
  float* parts = c->shared;           // [n_seq][KVH][SPLIT][PART]
  par(c, (i64)st->n_seq * KVH * SPLIT, 1, [&](i64 b, i64 e, int) {
    constexpr int DV = D / 16;
    float qs[GQ][D];
    vf acc[GQ][DV];
    for (i64 it = b; it < e; ++it) {
      const int s = int(it / (KVH * SPLIT)), h = int(it / SPLIT % KVH), part = int(it % SPLIT);
      const LatheSeq sq = st->seq[s];
      const int T = sq.past + 1, per = (T + SPLIT - 1) / SPLIT;
      const int t0 = part * per, t1 = t0 + per < T ? t0 + per : T;
      float* out = parts + it * PART;
      float* m = out + GQ * D;
      float* l = m + GQ;
      for (int g = 0; g < GQ; ++g) {
        const float* qp = q + (i64)sq.row0 * (H * D) + (h * GQ + g) * D;
        for (int i = 0; i < D; ++i) qs[g][i] = qp[i] * scale;
        for (int v = 0; v < DV; ++v) acc[g][v] = vf{};
        m[g] = -3.0e38f;
        l[g] = 0;
      }
      attend_range<KF, LAY, L, KVH, TCAP, NB, SLOTS, GQ, D>(c, st, layer, sq.slot, h, t0, t1, qs, acc, m, l);
      for (int g = 0; g < GQ; ++g)
        for (int v = 0; v < DV; ++v) vstore(out + g * D + v * 16, acc[g][v]);
    }
  });
  par(c, (i64)st->n_seq * KVH, 1, [&](i64 b, i64 e, int) {
    for (i64 it = b; it < e; ++it) {
      const int s = int(it / KVH), h = int(it % KVH);
      const LatheSeq sq = st->seq[s];
      for (int g = 0; g < GQ; ++g) {
        float mx = -3.0e38f;
        for (int p = 0; p < SPLIT; ++p) {
          const float* part = parts + (it * SPLIT + p) * PART;
          if (part[GQ * D + GQ + g] > 0 && part[GQ * D + g] > mx) mx = part[GQ * D + g];
        }
        float sum = 0, out[D];
        for (int i = 0; i < D; ++i) out[i] = 0;
        for (int p = 0; p < SPLIT; ++p) {
          const float* part = parts + (it * SPLIT + p) * PART;
          if (part[GQ * D + GQ + g] <= 0) continue;  // an empty part
          float w = __builtin_expf(part[GQ * D + g] - mx);
          sum += part[GQ * D + GQ + g] * w;
          for (int i = 0; i < D; ++i) out[i] += part[g * D + i] * w;
        }
        float* op = o + (i64)sq.row0 * (H * D) + (h * GQ + g) * D;
        for (int i = 0; i < D; ++i) op[i] = out[i] / sum;
      }
    }
  });
}

// RoPE on Q and K of each row, K and V written to the cache (quantized for I8/I4).
template <int KF, int LAY, int L, int KVH, int TCAP, int NB, int SLOTS, int H, int D>
void rope_kvwrite_kernel(const LatheCtx* c, const LatheStep* st, int layer, const float* q, const float* k,
                         const float* v, float* q_out, const double* freq) {
  par(c, st->n_rows, 1, [&](i64 b, i64 e, int) {
    float cs[D / 2], sn[D / 2], tmp[D];
    for (i64 r = b; r < e; ++r) {
      const int pos = st->row_pos[r], slot = st->seq[st->row_seq[r]].slot;
      rope_table<D>(pos, freq, cs, sn);
      for (int h = 0; h < H; ++h) rope_rotate<D>(q + r * (H * D) + h * D, cs, sn, q_out + r * (H * D) + h * D);
      for (int h = 0; h < KVH; ++h) {
        rope_rotate<D>(k + r * (KVH * D) + h * D, cs, sn, tmp);
        kv_store<KF, D>(c, kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, 0, slot, pos, h), tmp);
        kv_store<KF, D>(c, kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, 1, slot, pos, h), v + r * (KVH * D) + h * D);
      }
    }
  });
}

// ---------------------------------------------------------------- unfused ops
template <int H, int D>
void rope_kernel(const LatheCtx* c, const LatheStep* st, const float* x, float* y, const double* freq) {
  par(c, st->n_rows, 1, [&](i64 b, i64 e, int) {
    float cs[D / 2], sn[D / 2];
    for (i64 r = b; r < e; ++r) {
      rope_table<D>(st->row_pos[r], freq, cs, sn);
      for (int h = 0; h < H; ++h) rope_rotate<D>(x + r * (H * D) + h * D, cs, sn, y + r * (H * D) + h * D);
    }
  });
}

template <int KF, int LAY, int L, int KVH, int TCAP, int NB, int SLOTS, int D>
void kv_write_kernel(const LatheCtx* c, const LatheStep* st, int layer, const float* k, const float* v) {
  par(c, st->n_rows, 1, [&](i64 b, i64 e, int) {
    for (i64 r = b; r < e; ++r) {
      const int pos = st->row_pos[r], slot = st->seq[st->row_seq[r]].slot;
      for (int h = 0; h < KVH; ++h) {
        kv_store<KF, D>(c, kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, 0, slot, pos, h), k + r * (KVH * D) + h * D);
        kv_store<KF, D>(c, kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, 1, slot, pos, h), v + r * (KVH * D) + h * D);
      }
    }
  });
}

// K and V of every cached position as [seq][kv head][TP][D] floats (TP = plan's T).
template <int KF, int LAY, int L, int KVH, int TCAP, int NB, int SLOTS, int D, int TP>
void kv_read_kernel(const LatheCtx* c, const LatheStep* st, int layer, float* ko, float* vo) {
  par(c, (i64)st->n_seq * KVH, 1, [&](i64 b, i64 e, int) {
    for (i64 it = b; it < e; ++it) {
      const int s = int(it / KVH), h = int(it % KVH);
      const LatheSeq sq = st->seq[s];
      for (int t = 0; t < sq.past + sq.len; ++t) {
        const i64 o = (((i64)s * KVH + h) * TP + t) * D;
        kv_load<KF, D>(c, kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, 0, sq.slot, t, h), ko + o);
        kv_load<KF, D>(c, kv_index<LAY, L, KVH, TCAP, NB, SLOTS>(st, layer, 1, sq.slot, t, h), vo + o);
      }
    }
  });
}

// scores[s][h][i][t] = scale q_i . k_t for every cached t (the mask is a separate op).
template <int H, int KVH, int D, int SP, int TP>
void qk_kernel(const LatheCtx* c, const LatheStep* st, const float* q, const float* k, float* s, float scale) {
  par(c, (i64)st->n_seq * H, 1, [&](i64 b, i64 e, int) {
    for (i64 it = b; it < e; ++it) {
      const int sq_i = int(it / H), h = int(it % H);
      const LatheSeq sq = st->seq[sq_i];
      for (int i = 0; i < sq.len; ++i) {
        const float* qp = q + (i64)(sq.row0 + i) * (H * D) + h * D;
        float* out = s + (((i64)sq_i * H + h) * SP + i) * TP;
        for (int t = 0; t < sq.past + sq.len; ++t) {
          const float* kp = k + (((i64)sq_i * KVH + h / (H / KVH)) * TP + t) * D;
          float dot = 0;
          for (int d = 0; d < D; ++d) dot += qp[d] * kp[d];
          out[t] = dot * scale;
        }
      }
    }
  });
}

template <int H, int SP, int TP>
void mask_kernel(const LatheCtx* c, const LatheStep* st, const float* in, float* out) {
  par(c, (i64)st->n_seq * H, 1, [&](i64 b, i64 e, int) {
    for (i64 it = b; it < e; ++it) {
      const LatheSeq sq = st->seq[it / H];
      for (int i = 0; i < sq.len; ++i) {
        const i64 o = (it * SP + i) * TP;
        for (int t = 0; t < sq.past + sq.len; ++t) out[o + t] = t <= sq.past + i ? in[o + t] : -__builtin_inff();
      }
    }
  });
}

template <int H, int SP, int TP>
void softmax_kernel(const LatheCtx* c, const LatheStep* st, const float* in, float* out) {
  par(c, (i64)st->n_seq * H, 1, [&](i64 b, i64 e, int) {
    for (i64 it = b; it < e; ++it) {
      const LatheSeq sq = st->seq[it / H];
      const int T = sq.past + sq.len;
      for (int i = 0; i < sq.len; ++i) {
        const i64 o = (it * SP + i) * TP;
        float mx = -3.0e38f, sum = 0;
        for (int t = 0; t < T; ++t) mx = in[o + t] > mx ? in[o + t] : mx;
        for (int t = 0; t < T; ++t) {
          out[o + t] = __builtin_expf(in[o + t] - mx);
          sum += out[o + t];
        }
        for (int t = 0; t < T; ++t) out[o + t] /= sum;
      }
    }
  });
}

template <int H, int KVH, int D, int SP, int TP>
void pv_kernel(const LatheCtx* c, const LatheStep* st, const float* p, const float* v, float* o) {
  par(c, (i64)st->n_seq * H, 1, [&](i64 b, i64 e, int) {
    for (i64 it = b; it < e; ++it) {
      const int sq_i = int(it / H), h = int(it % H);
      const LatheSeq sq = st->seq[sq_i];
      for (int i = 0; i < sq.len; ++i) {
        float acc[D];
        for (int d = 0; d < D; ++d) acc[d] = 0;
        const float* pp = p + (((i64)sq_i * H + h) * SP + i) * TP;
        for (int t = 0; t < sq.past + sq.len; ++t) {
          const float* vp = v + (((i64)sq_i * KVH + h / (H / KVH)) * TP + t) * D;
          for (int d = 0; d < D; ++d) acc[d] += pp[t] * vp[d];
        }
        float* op = o + (i64)(sq.row0 + i) * (H * D) + h * D;
        for (int d = 0; d < D; ++d) op[d] = acc[d];
      }
    }
  });
}

template <int FMT, int K, int G>
void embedding_kernel(const LatheCtx* c, const LatheStep* st, const int* tokens, const void* w, const u16* s,
                      float* out) {
  par(c, st->n_rows, 4, [&](i64 b, i64 e, int) {
    for (i64 r = b; r < e; ++r) {
      float rs = row_scale<FMT, G>(s, tokens[r]);
      for (int kb = 0; kb < K / 32; ++kb) wblock<FMT, K, G>(w, s, tokens[r], kb, out + r * K + kb * 32);
      for (int k = 0; k < K; ++k) out[r * K + k] *= rs;
    }
  });
}

template <int K>
void rms_norm_kernel(const LatheCtx* c, const LatheStep* st, const float* x, const float* w, float* y, float eps) {
  par(c, st->n_rows, 4, [&](i64 b, i64 e, int) {
    for (i64 r = b; r < e; ++r) rms_norm_row<K>(x + r * K, w, eps, y + r * K);
  });
}

// op: 0 silu(a), 1 a * b, 2 a + b over rows x W elements.
template <int OP, i64 W>
void elementwise_kernel(const LatheCtx* c, const LatheStep* st, const float* a, const float* bb, float* y) {
  par(c, st->n_rows, 4, [&](i64 b, i64 e, int) {
    if constexpr (OP == 0) {
      silu_mul(a + b * W, nullptr, y + b * W, (e - b) * W);
      return;
    }
    for (i64 i = b * W; i < e * W; ++i) {
      if constexpr (OP == 1) y[i] = a[i] * bb[i];
      else y[i] = a[i] + bb[i];
    }
  });
}

// Router: logits = h . Wr^T over experts; top-k; softmax over the chosen logits.
template <int FMT, int K, int G, int E, int TOPK>
void router_kernel(const LatheCtx* c, const LatheStep* st, const float* h, const void* w, const u16* s, int* ids,
                   float* gates) {
  par(c, st->n_rows, 1, [&](i64 b, i64 e, int) {
    float logits[E];
    for (i64 r = b; r < e; ++r) {
      for (int x = 0; x < E; ++x) gemv_row<FMT, K, G>(w, s, x, h + r * K, K, 1, &logits[x]);
      float chosen[TOPK];
      for (int j = 0; j < TOPK; ++j) {
        int best = -1;
        for (int x = 0; x < E; ++x) {
          bool taken = false;
          for (int q = 0; q < j; ++q) taken |= ids[r * TOPK + q] == x;
          if (!taken && (best < 0 || logits[x] > logits[best])) best = x;
        }
        ids[r * TOPK + j] = best;
        chosen[j] = logits[best];
      }
      float mx = chosen[0], sum = 0;
      for (int j = 0; j < TOPK; ++j) sum += __builtin_expf(chosen[j] - mx);
      for (int j = 0; j < TOPK; ++j) gates[r * TOPK + j] = __builtin_expf(chosen[j] - mx) / sum;
    }
  });
}

template <int K, int TOPK>
void dispatch_kernel(const LatheCtx* c, const LatheStep* st, const float* h, float* out) {
  par(c, st->n_rows, 4, [&](i64 b, i64 e, int) {
    for (i64 r = b; r < e; ++r)
      for (int j = 0; j < TOPK; ++j)
        for (int k = 0; k < K; ++k) out[(r * TOPK + j) * K + k] = h[r * K + k];
  });
}

template <int N, int TOPK>
void combine_kernel(const LatheCtx* c, const LatheStep* st, const float* y, const float* gates, float* out) {
  par(c, st->n_rows, 4, [&](i64 b, i64 e, int) {
    for (i64 r = b; r < e; ++r)
      for (int n = 0; n < N; ++n) {
        float acc = 0;
        for (int j = 0; j < TOPK; ++j) acc += gates[r * TOPK + j] * y[(r * TOPK + j) * N + n];
        out[r * N + n] = acc;
      }
  });
}

// Greedy sampling: each row's first index of its largest logit, as the scan
// `if (l[v] > l[best]) best = v` from best = 0 finds it (a NaN never wins; a NaN at
// index 0 is kept). Rows are cut into chunks of kArgmaxChunk logits that the threads take
// (a batch-1 row of a 128k vocabulary is 512 KB); each chunk's maximum and first index go
// to `shared` (argmax_shared_floats), and each row then takes the first chunk holding its
// maximum.
constexpr int kArgmaxChunk = 4096;
constexpr i64 argmax_shared_floats(i64 V, i64 rows) { return rows * ((V + kArgmaxChunk - 1) / kArgmaxChunk) * 2; }

// The maximum of l[v0, v1) with NaN read as -inf, and its first index.
inline void argmax_chunk(const float* l, int v0, int v1, float& best, int& at) {
  const float ninf = -__builtin_inff();
  auto clean = [&](float x) { return x != x ? ninf : x; };
  best = clean(l[v0]);
  at = v0;
  int v = v0;
  if (v1 - v0 >= 32) {
    // 16 lanes, each keeping its own first maximum; then the lanes' maximum and the
    // smallest index among the lanes that hold it.
    const vi iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    auto load = [&](int i) {
      const vf x = vload(l + i);
      const vi nan = x != x;
      return (vf)(((vi)x & ~nan) | ((vi)vsplat(ninf) & nan));
    };
    vf vb = load(v0);
    vi vi_at = iota + v0;
    for (v = v0 + 16; v + 16 <= v1; v += 16) {
      const vf x = load(v);
      const vi gt = x > vb;
      vb = (vf)(((vi)x & gt) | ((vi)vb & ~gt));
      vi_at = ((iota + v) & gt) | (vi_at & ~gt);
    }
    best = vmax_lanes(vb);
    at = v1;
    for (int j = 0; j < 16; ++j)
      if (vb[j] == best && vi_at[j] < at) at = vi_at[j];
  } else {
    v = v0 + 1;
  }
  for (; v < v1; ++v)
    if (clean(l[v]) > best) best = clean(l[v]), at = v;
}

template <int V>
void argmax_kernel(const LatheCtx* c, const LatheStep* st, const float* logits, int* tokens) {
  constexpr int NC = (V + kArgmaxChunk - 1) / kArgmaxChunk;
  float* part = c->shared;  // [n_seq][NC][2]: the chunk's maximum, its index as int bits
  par(c, (i64)st->n_seq * NC, 1, [&](i64 b, i64 e, int) {
    for (i64 it = b; it < e; ++it) {
      const int s = int(it / NC), ch = int(it % NC);
      const int v0 = ch * kArgmaxChunk, v1 = v0 + kArgmaxChunk < V ? v0 + kArgmaxChunk : V;
      float best;
      int at;
      argmax_chunk(logits + (i64)s * V, v0, v1, best, at);
      part[it * 2] = best;
      __builtin_memcpy(part + it * 2 + 1, &at, 4);
    }
  });
  for (int s = 0; s < st->n_seq; ++s) {
    const float* l = logits + (i64)s * V;
    const float* p = part + (i64)s * NC * 2;
    float best = p[0];
    int at;
    __builtin_memcpy(&at, p + 1, 4);
    for (int ch = 1; ch < NC; ++ch)
      if (p[ch * 2] > best) best = p[ch * 2], __builtin_memcpy(&at, p + ch * 2 + 1, 4);
    tokens[s] = l[0] != l[0] ? 0 : at;
  }
}

}  // namespace lk

#endif
