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

#include "ir/graph.h"
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
  double time_s = 0;
  Bound bound = Bound::memory;
  KernelClass cls = KernelClass::elementwise;
  DType math = DType::f32;  // operand dtype whose peak applies
};

struct CostOptions {
  bool ideal = false;  // pure roofline: efficiencies 1, no launch overhead
};

NodeCost cost_node(const Graph& g, const Node& n, const Target& t, const Bindings& b, const CostOptions& o = {});

// Busy time of a kernel from its compute and memory times: (c^p + m^p)^(1/p) with
// p = target.roofline_exponent; the pure max when ideal.
double overlap_time(double compute_s, double memory_s, const Target& t, const CostOptions& o);

// Human label of the kernel a node becomes ("norm_matmul_x3", "flash_attention").
std::string kernel_label(const Node& n);

// Contiguous bytes per run that a decode-attention kernel reads from the KV cache in
// a layout (one kv head of one sequence), and the resulting efficiency factor.
double kv_read_run_bytes(const KvLayout& l, int64_t context, int64_t kv_heads, int64_t head_dim, double bits);
double contiguity_efficiency(double run_bytes, const Target& t);

// Expected number of distinct experts `tokens` tokens touch when each picks top_k of
// `experts` uniformly: E x (1 - (1 - k/E)^tokens).
double expected_experts_touched(double experts, double top_k, double tokens);

}  // namespace lathe
