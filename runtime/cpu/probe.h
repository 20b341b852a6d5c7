// Measures this machine's ceilings for the CPU backend: streaming read bandwidth,
// f32 FMA throughput (one core and all cores, with kernels JIT-compiled for the
// host's vector ISA), 8-bit dot-product throughput where the host has VNNI and the thread pool's per-loop overhead.
#pragma once

#include <string>
#include <vector>

#include "runtime/cpu/jit.h"

namespace lathe {

struct ProbeResult {
  int threads = 0;
  double read_gbs = 0;             // all threads, GB/s (1e9)
  double read_gbs_one = 0;         // one thread
  double fma_gflops_one = 0;       // one thread
  double fma_gflops_all = 0;       // all threads
  double int8_gops_all = 0;        // 8-bit dot products (VNNI), all threads; 0 = no VNNI
  double int_gemm_gops = 0;        // the int4 prefill GEMM (int8 dot products), all threads, K 2048
  double int_gemm_gops_short = 0;  // the same at K 512
  double int_dot_efficiency = 0;   // long-K int GEMM / int8_gops_all (fit; 0: not measured)
  double int_dot_half_k = 0;       // K at which the int GEMM reaches half of that (0: flat)
  double int_gemm_gops_rows = 0;   // the int4 GEMM at 32 rows (K 2048)
  double int_dot_half_rows = 0;    // rows at which it reaches half (0: flat)
  double int8_gemm_gops = 0, int8_gemm_gops_short = 0, int8_gemm_gops_rows = 0;  // the same with int8 weights
  double int8_dot_efficiency = 0, int8_dot_half_k = 0, int8_dot_half_rows = 0;
  // The integer GEMVs of decode at 8 rows, weights in cache, all threads, at K 2048 and
  // 512; the long-K limit of the 8-bit dot peak and the K at which they reach half of it
  // (fit_two_fixed_costs without the rows term; 0: not measured, or flat).
  double int_gemv_gops = 0, int8_gemv_gops = 0, int_gemv_gops_short = 0, int8_gemv_gops_short = 0;
  double int_dot_gemv_efficiency = 0, int8_dot_gemv_efficiency = 0;
  double int_dot_gemv_half_k = 0, int8_dot_gemv_half_k = 0;
  double loop_overhead_us = 0;     // parallel_for round trip with an empty body
  double gemm_gflops = 0;          // sgemm through the kernels' BLAS path, all threads, 256 rows
  double gemm_gflops_small = 0;    // the same at 32 rows
  double gemm_efficiency = 0;      // large-M sgemm / fma_gflops_all (fit of the two points)
  double gemm_half_rows = 0;       // rows at which sgemm reaches half of that (0: flat)
  double gemv_gflops = 0;          // the generated f32 GEMV at 8 rows, weights in cache, all threads
  double gemv_efficiency = 0;      // gemv_gflops / fma_gflops_all (0: not measured)
  // The flash-attention kernel, all threads, FLOPs as the simulator counts them, over a
  // 512-token prompt: 16 query heads on 2 KV heads at head_dim 128, the same at 64, and
  // 2 on 2 at 128; the fit of the three (fit_two_fixed_costs; 0: not measured).
  double attention_gflops = 0, attention_gflops_short = 0, attention_gflops_group1 = 0;
  double attention_efficiency = 0, attention_half_dim = 0, attention_half_group = 0;
  double memory_gb = 0;            // MemTotal
  double l3_mb = 0;
  double clock_mhz = 0;
  std::string cpu_model, isa;
};

// `buffer_mb` sizes the streaming buffer (well above the last-level cache).
ProbeResult probe_machine(CpuJit& jit, int threads, double buffer_mb = 512, double seconds_per_test = 0.5);

// The CPU's model name from /proc/cpuinfo ("" when unknown).
std::string cpu_model_name();

// Whether this CPU has 8-bit dot products (AVX512-VNNI with AVX512VL, or AVX-VNNI): the
// CPU backend's kernels then multiply int8 and int4 weights with dot products (the
// path simulator/cost.cpp costs when a CPU target has an int8 peak). From the flags in
// /proc/cpuinfo; false where they cannot be read.
bool cpu_has_int8_dot();

// The integer GEMMs pay two fixed costs besides their dot-product steps, which add in
// time: 1 / eff(M, K) = 1 / eff + c_k / K + c_m / M (eff of `peak`). Rates at
// (m_a, k_a), (m_a, k_b) and (m_c, k_a) give eff and the halves half_k = c_k x eff and
// half_rows = c_m x eff, as simulator/cost.cpp uses them; a pair that does not show its
// cost (the shorter run not slower) leaves that half 0. An eff above `cap` is taken as
// the cap, with both halves scaled so that the model still meets the rate at point a.
void fit_two_fixed_costs(double peak, double rate_a, double rate_b, double rate_c, double m_a, double k_a,
                         double k_b, double m_c, double& eff, double& half_k, double& half_rows, double cap = 1.0);

// A hardware spec (TOML text) for this machine from the measurements.
// Figures that contradict each other (all threads slower than one, a GEMV above the FMA
// peak, a long-K integer GEMV far slower than a short one): a host busy during the
// measurement. Each is one sentence; empty when the figures agree. probe_to_toml writes
// them into the spec's header, and lathe probe prints them.
std::vector<std::string> probe_warnings(const ProbeResult& p);
std::string probe_to_toml(const ProbeResult& p, const std::string& name);

}  // namespace lathe
