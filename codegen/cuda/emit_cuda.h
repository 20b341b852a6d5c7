// codegen/cuda: one CUDA kernel per lowered node for NVRTC, specialized by the node's
// constants (activation type, weight format and group, dims, KV layout and dtype,
// tile sizes) as template arguments of the building blocks in cuda_prelude.cuh.
// GEMM-family nodes get two entry points, a warp-per-row GEMV for decode (up to 8
// rows) and a tensor-core tiled GEMM for prefill, and lm_head a tensor-core GEMV for
// 2-8 sequences; the runtime launches the one that fits the step (cuda_step_entry), so
// each node is still one kernel launch. Dense GEMMs (not f32 weights, not lm_head) also
// describe a cuBLAS route (CudaBlasPlan): a dequantization entry when the weights are not
// in the activation dtype, an RMSNorm entry, the library GEMMs, a SiLU x up entry; timed
// as one node. The runtime takes it over the tiled GEMM whenever cuBLAS loads, and over
// the GEMV for decode steps of 2-8 rows (cuda_batched_min_rows).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace lathe {

// Steps of at most this many rows (sequences for lm_head) run a GEMM-family node's
// GEMV entry; MoE experts' GEMV entry takes at most kCudaExpertGemvPairs token-expert
// pairs.
constexpr int kCudaGemvRows = 8;
constexpr int kCudaExpertGemvPairs = 16;

// Elements of a weight row per 16-byte load (the prelude's WChunk<FMT>::E).
int cuda_chunk_elems(DType weight_dtype);
// 16-byte weight loads a GEMV lane keeps in flight when untuned: the rule in the
// prelude's warp_gemv (4 when a row is at least 128 loads of at most 8 elements, else
// 1; keep the two in step).
int cuda_gemv_default_loads(DType weight_dtype, int64_t K);
// Decode attention's context splits when untuned: enough blocks to fill a GPU at
// batch 1 (kv heads x splits), at least 64 positions each.
int64_t cuda_decode_default_splits(int64_t kv_capacity);

// The fewest rows (sequences for lm_head), up to kCudaGemvRows, from which a dense
// GEMM-family node leaves its warp-per-row GEMV: a matmul with a cuBLAS route
// (CudaBlasPlan) goes to cuBLAS as in prefill, lm_head (no cuBLAS route) to its
// tensor-core GEMV entry (output width a multiple of 16). 2 for weights in the
// activation dtype, 5 for decoded ones (int8, int4, fp8, 16-bit weights of the other
// type, which cuBLAS gets through the dequantized copy); 0 for f32 weights, expert GEMMs
// and shapes without either. Measured on an H200 (llama-3-8b decode step,
// docs/performance.md): bf16 at batch 2 6.70 ms against 8.43 on the GEMV, at batch 8
// 7.21 against 22.95; int4:g128 at batch 8 19.7 against 29.4, but 19.3 ms already at
// batch 2 (the copy is rewritten every step), where the GEMV makes one pass.
int cuda_batched_min_rows(const Graph& g, const Node& n);

// How the runtime sizes the grid of an entry point for a step.
enum class CudaGrid : uint8_t {
  warps,          // ceil(p0 / (block / 32)): one warp per output row (GEMV)
  gemm_tiles,     // (p0 column tiles, ceil(rows / 64)); p1 = 1: rows are sequences (lm_head)
  expert_tiles,   // (p0 column tiles, ceil(rows x top_k (p2) / 64), experts = p1)
  rows,           // one block per new token
  seq_x,          // n_seq x p0 blocks (p0 = heads or kv heads)
  flash,          // n_seq x p0 heads x ceil(max_len / p1) (p1 = query rows per block)
  rows_x,         // new tokens x p0 blocks (p0 groups of heads per row)
  decode_splits,  // n_seq x p0 kv heads x p1 splits
  elements,       // ceil(rows x p0 / block) blocks, capped at 65535
  seqs,           // one block per sequence
};

struct CudaEntry {
  std::string symbol;
  CudaGrid grid = CudaGrid::rows;
  int block = 128;
  int64_t p0 = 0, p1 = 0, p2 = 0;  // grid parameters (expert_tiles: p2 = top_k)
  int64_t max_rows = -1;  // GEMV entries: used when rows <= max_rows (else the next entry)
};

// Prefill of a dense GEMM node: cuBLAS GEMMs (one per weight) with the node's prologue
// and epilogue as kernels of their own around them. Weights in another format than the
// activation dtype (int8, int4, fp8, or 16-bit weights of the other type) are first
// decoded into a copy in the activation dtype by a dequantization entry. Buffer
// indices are into the kernel's buffer array; offsets are bytes into the device scratch.
struct CudaBlasPlan {
  int nw = 0;  // GEMMs; 0: no cuBLAS route
  bool on() const { return nw > 0; }
  int64_t K = 0, n[4] = {0, 0, 0, 0};
  int x = -1, w[4] = {-1, -1, -1, -1}, out[4] = {-1, -1, -1, -1}, residual = -1;
  int epilogue = 0;                      // 0 none, 1 residual (beta = 1 over a copy), 2 silu_mul
  int norm_entry = -1, silu_entry = -1;  // entry points run before / after the GEMMs
  int dequant_entry = -1;                // decodes every weight into scratch (wd_offset) first
  int64_t xn_offset = -1, t1_offset = -1, t2_offset = -1;
  int64_t wd_offset[4] = {-1, -1, -1, -1};
};

struct CudaKernel {
  NodeId node = kNone;
  std::string node_name, label;
  std::string body;    // the __global__ functions (what --emit cuda shows after the prelude)
  std::string source;  // complete translation unit for NVRTC
  std::vector<CudaEntry> entries;
  int64_t layer = 0;
  int64_t scratch_bytes = 0;  // device scratch the kernel needs, zeroed before launch
  int64_t counters = 0;       // zeroed counters for "last block" combines
  bool fp8 = false;
  std::vector<std::string> bufs;
  CudaBlasPlan blas;  // prefill rows beyond the GEMV entry's go to cuBLAS when on
  int gemv_mma_entry = -1;   // lm_head's tensor-core GEMV, for batched_min_rows .. kCudaGemvRows
  int batched_min_rows = 0;  // cuda_batched_min_rows
};

// How a kernel runs a step of `rows` new rows over `n_seq` sequences: the index of the
// entry point to launch, or kCudaBlasRoute for its cuBLAS route (k.blas; `blas`: the
// library loaded). GEMM-family kernels: the warp-per-row GEMV up to its max_rows (rows
// counted as sequences for lm_head), except from batched_min_rows on, where lm_head
// takes its tensor-core GEMV and a matmul its cuBLAS route; beyond max_rows the tiled
// GEMM, or the cuBLAS route. MoE experts: their GEMV up to its max_rows (token-expert
// pairs), else the tiled entry. Other kernels: their one entry.
constexpr int kCudaBlasRoute = -1;
int cuda_step_entry(const CudaKernel& k, int64_t rows, int64_t n_seq, bool blas);

std::string_view cuda_prelude_text();

// Emits the kernel of one node. Throws lathe::Error for nodes the CUDA backend cannot
// run (f32 activations, tensor-parallel collectives, dims that are not multiples of 32)
// and for tuning parameters (tune_cuda_*, codegen/tuning.h) outside their values.
CudaKernel emit_cuda_kernel(const Graph& g, NodeId id);
std::vector<CudaKernel> emit_cuda_kernels(const Graph& g);

// The NVRTC architecture for a target's compute capability (80 for sm_80, 90 for
// sm_90, ...). Throws lathe::Error for CPU targets and GPUs older than sm_80.
int cuda_arch_for(int compute_capability);

}  // namespace lathe
