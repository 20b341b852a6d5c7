// Roofline cost of one IR node (= one kernel after lowering) on a Target.
//
//   compute = FLOPs / (peak[dtype] x compute efficiency)  (+ dequantization ALU work)
//   memory  = bytes / (bandwidth x memory efficiency)
//   time    = (compute^p + memory^p)^(1/p) + launch overhead
//
// p (target.roofline_exponent, default 2) models imperfect overlap near the ridge
// point; with --ideal p is infinite (the pure max) and efficiencies are 1.
//
// FLOPs count multiply-adds as 2. Bytes are each kernel's minimum DRAM traffic: every
// input read once and every output written once, weights at their stored bit width
// plus scales, KV in the cache dtype. Compute efficiency of GEMMs includes tile and
// wave quantization; memory efficiency of attention includes the contiguity of its
// KV reads in the chosen layout. `ideal` turns efficiencies and launch off.
#pragma once

#include <string>
#include <vector>

#include "ir/buffers.h"
#include "ir/graph.h"
#include "ir/ops.h"
#include "ir/plan_options.h"
#include "ir/target.h"

namespace lathe {

enum class Bound : uint8_t { compute, memory, launch, network };
std::string_view bound_name(Bound b);

// Kernel classes: the unit calibration fits efficiencies for.
enum class KernelClass : uint8_t { gemm, gemv, attention_prefill, attention_decode, elementwise, collective };
std::string_view kernel_class_name(KernelClass k);

struct NodeCost {
  double flops = 0;
  double bytes = 0;
  double compute_s = 0;
  double memory_s = 0;
  double network_s = 0;
  double launch_s = 0;
  double busy_s = 0;  // max(overlap_time(compute_s, memory_s), network_s)
  double time_s = 0;  // busy_s + launch_s
  Bound bound = Bound::memory;
  KernelClass cls = KernelClass::elementwise;
  DType math = DType::f32;  // operand dtype whose peak applies
};

struct CostOptions {
  bool ideal = false;  // pure roofline: efficiencies 1, no launch overhead
};

// Rows up to which the CPU backend runs a GEMM as GEMV (lk::kGemvRows in
// codegen/cpu/kernel_lib.h; emit_cpu.cpp checks that the two agree).
constexpr int kCpuGemvRows = 8;
// Activation rows of the CPU backend's integer register tiles (lk::kQRows): a GEMM on
// 8-bit dot products runs its rows four at a time, a partial last tile repeating a row.
constexpr int kCpuQTileRows = 4;

// Everything the cost of a node depends on besides the target and the bindings, read
// from the graph once: operand sizes as monomials in B, S, T (ir/buffers.h: ValueSize),
// attributes as numbers. Costing a node is cost_form() then cost_node(form, ...);
// PreparedPlan keeps the forms of its representatives and skips the first step.
struct CostForm {
  OpKind kind = OpKind::add;
  DType act = DType::f32;  // the graph's activation dtype
  KvLayout kv_layout;      // the graph's KV-cache layout
  std::vector<ValueSize> inputs, outputs;
  int64_t heads = 0, kv_heads = 0, head_dim = 0, experts = 0, tp = 1;  // attributes
  Dim hidden = Dim::c(1);  // embedding: table width; moe_router: input width
  ValueSize kv_new;        // kv_write, rope_kvwrite: S new positions of K and V, all B sequences
  ValueSize kv_context;    // kv_read, attention: one layer's context (B sequences, T positions)
  // GEMM family (matmul, lm_head, expert_matmul)
  GemmParts gemm;
  Dim k_dim = Dim::c(1);                           // reduction length: the activation's last dim
  std::vector<Dim> weight_cols;                    // N of each weight (its second-to-last dim)
  Dim top_k = Dim::c(1), num_experts = Dim::c(1);  // expert_matmul
};
CostForm cost_form(const Graph& g, const Node& n);

// The cost of a node from its form. `reads_context`, when given, is set to whether the
// result depends on the context length T (false: it is the same at every T).
NodeCost cost_node(const CostForm& f, const Target& t, const Bindings& b, const CostOptions& o = {},
                   bool* reads_context = nullptr);
// cost_node(cost_form(g, n), t, b, o).
NodeCost cost_node(const Graph& g, const Node& n, const Target& t, const Bindings& b, const CostOptions& o = {});

// Busy time of a kernel from its compute and memory times: (c^p + m^p)^(1/p) with
// p = target.roofline_exponent; the pure max when ideal.
double overlap_time(double compute_s, double memory_s, const Target& t, const CostOptions& o);

// Seconds a collective over `devices` devices takes on the target's interconnect
// (network time only; the kernel's launch is added like any other's). `bytes` is the
// buffer each device holds at the end: the one reduced (all-reduce) or gathered
// (all-gather). Specs give bidirectional link figures, so each device sends and
// receives at once at W = half of link_bytes_per_s(); every synchronization step costs
// interconnect_latency_us. Ring: an all-reduce sends 2(n-1)/n of the buffer in 2(n-1)
// steps, an all-gather (n-1)/n in n-1. On an NVSwitch fabric (nvlink_switch = 1) every
// device reaches every other directly, and runtimes take the faster of two direct
// algorithms (TensorRT-LLM's custom all-reduce, NCCL's NVLS): one-shot, each device
// reads the n-1 other buffers and reduces them itself ((n-1) buffers, one step), and
// two-shot, a direct reduce-scatter then all-gather (the ring's bytes in two steps); an
// all-gather sends (n-1)/n of the buffer in one step.
double collective_seconds(bool all_reduce, double bytes, double devices, const Target& t);

// Human label of the kernel a node becomes ("norm_matmul_x3", "flash_attention").
std::string kernel_label(const Node& n);

// Contiguous bytes per run that a decode-attention kernel reads from the KV cache in
// a layout (one kv head of one sequence), and the resulting efficiency factor.
double kv_read_run_bytes(const KvLayout& l, int64_t context, int64_t kv_heads, int64_t head_dim, double bits);
double contiguity_efficiency(double run_bytes, const Target& t);
// Positions one block of the decode graph's KV layout holds: N for paged:N, 1 for the
// contiguous layouts. A sequence holds whole blocks: `positions` rounded up to them.
int64_t kv_block_of(const Graph& decode);
inline int64_t in_whole_kv_blocks(int64_t positions, int64_t block) { return (positions + block - 1) / block * block; }

// FLOPs of causal attention of S new query rows per sequence over a context of T
// positions (the S new ones last), B sequences, `heads` query heads of head_dim: QK^T
// and PV over the visible (query, key) pairs, 4 FLOPs per pair and dimension, plus
// `waste_pairs` per query row that a blocked kernel computes past the diagonal.
double attention_flops(double B, double heads, double head_dim, double S, double T, double waste_pairs);

// Pairs' worth of work per query row that a flash-attention kernel spends besides the
// causal pairs. GPUs: half a 64-key tile through QK and PV past the diagonal. CPUs
// (16-key blocks): the FLOPs past the diagonal are only 4 pairs' worth, but the kernel's
// per-row costs that do not shrink with the context (the row's partial last block
// through the online softmax, its setup and normalization, a short prompt's few work
// items on the threads) cost 34-35 pairs' time per row on `small` at 64-128 tokens,
// measured against a probe at 512 (docs/performance.md): the same 32.
constexpr double kFlashWastePairs = 32.0;

// Expected number of distinct experts `tokens` tokens touch when each picks top_k of
// `experts` uniformly: E x (1 - (1 - k/E)^tokens).
double expected_experts_touched(double experts, double top_k, double tokens);

}  // namespace lathe
