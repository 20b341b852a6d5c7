// The figures a profiler (Nsight Compute, perf) shows per kernel, derived from the
// simulated costs: achieved FLOP/s and bandwidth over the kernel's busy time (launch
// gaps excluded, as a profiler's kernel duration does), utilization of the compute
// peak the kernel runs on and of DRAM bandwidth, and an estimated L2 hit rate.
//
// The L2 estimate is the one the cost model implies. It charges DRAM only for each
// kernel's unique bytes, so every repeated read of a tile must hit on chip: a GEMM
// tiled TM x TN reads its activations once per column tile and its weights once per
// row tile (16/32/64-row tiles for small M, as costed); flash attention reads the K/V
// of a (sequence, kv head) once per 128-query block of each query head, under the
// causal mask. hit = 1 - unique bytes / requested bytes. Only GEMMs and prefill
// attention on GPUs have one; other kernels stream their data once (no estimate).
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"
#include "ir/target.h"
#include "simulator/simulate.h"

namespace lathe {

struct KernelProfile {
  double achieved_flops_per_s = 0;
  double achieved_bytes_per_s = 0;
  double compute_utilization = 0;    // of the peak its FLOPs run at (matrix peak of the
                                     // operand dtype; fp32 for scalar kernels)
  double bandwidth_utilization = 0;  // of DRAM bandwidth (collectives: of the link)
  std::optional<double> l2_hit_rate;
};

std::optional<double> l2_hit_rate(const Graph& g, const Node& n, const Target& t, const Bindings& b,
                                  const NodeCost& c);

// One profile per row of r.ops (prefill rows at the prompt, decode rows over all
// steps, L2 at the mean decode context, as simulate() reports them).
std::vector<KernelProfile> profile_ops(const SimResult& r, const Graph& prefill,
                                       const Graph& decode, const Target& t);

}  // namespace lathe
