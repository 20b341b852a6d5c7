// End-to-end simulation of one request shape: prefill of the prompt, then decode of
// the generated tokens, on one device's graphs (tensor parallel graphs are per
// device), plus the memory footprint.
//
// Conventions (docs/simulator.md):
//  - prefill produces the first generated token: TTFT = prefill time;
//  - each further token is one decode step: gen - 1 steps, step i at context P + i;
//  - decode time sums every step exactly: each kernel's FLOPs and bytes are affine
//    in the context T, so the sum of max(compute(T), memory(T)) over the steps has a
//    closed form (no "N x first step");
//  - TPOT = decode time / steps; E2E = TTFT + decode time;
//  - identical layers are costed once (nodes are grouped by signature).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/plan_options.h"
#include "ir/target.h"
#include "simulator/cost.h"

namespace lathe {

struct OpRow {
  NodeId node = kNone;
  std::string name;
  std::string kernel;  // kernel label
  Phase phase = Phase::prefill;
  KernelClass cls = KernelClass::elementwise;
  Bound bound = Bound::memory;  // at the mean decode context for decode rows
  DType math = DType::f32;      // operand dtype whose matrix peak applies
  // Prefill: one pass. Decode: totals over all decode steps.
  double flops = 0, bytes = 0, time_s = 0;
  double compute_s = 0, memory_s = 0, network_s = 0, launch_s = 0;
  double step_time_s = 0;  // decode: mean per step; prefill: = time_s
};

struct PhaseSummary {
  double time_s = 0;
  double flops = 0;
  double bytes = 0;
  int kernels = 0;  // kernels per pass (per step in decode)
  int steps = 0;    // 1 for prefill; decode steps
  Bound bound = Bound::memory;
  double compute_share = 0, memory_share = 0, launch_share = 0, network_share = 0;  // of time
};

struct MemoryFootprint {
  double weights = 0;
  double kv = 0;           // at the final context for the whole batch
  double activations = 0;  // peak live activation bytes (memory plan's arena if planned)
  double total = 0;
  double capacity = 0;
  bool fits = true;
  int64_t max_batch = 0;  // largest batch that fits at this context
};

struct SimResult {
  Workload workload;
  PhaseSummary prefill, decode;
  double ttft_s = 0, tpot_s = 0, e2e_s = 0;
  double tokens_per_s = 0;          // generated tokens (whole batch) / E2E
  double decode_tokens_per_s = 0;   // batch / TPOT
  double prefill_tokens_per_s = 0;  // prompt tokens (whole batch) / prefill time
  MemoryFootprint mem;
  std::vector<OpRow> ops;  // prefill rows then decode rows, launch order
};

struct SimOptions {
  bool ideal = false;    // pure roofline
  bool per_op = true;    // fill SimResult::ops
  // Chunked prefill: above 0 and below the prompt, the prompt is prefilled in chunks of
  // this many tokens, each attending to the context cached before it and its own tokens
  // (as vLLM and SGLang do); the kernels that run once per sequence (the LM head on the
  // last row, sampling) run with the last chunk only. Activations are the largest
  // chunk's. 0: one pass over the whole prompt.
  int64_t prefill_chunk = 0;
};

// `prefill` and `decode` are the (lowered) graphs of the two phases; their B, S, T
// attributes are ignored in favour of `w`.
SimResult simulate(const Graph& prefill, const Graph& decode, const Target& t, const Workload& w,
                   const SimOptions& o = {});

// Sum over integer T in [t0, t1] of max(a0 + a1 T, b0 + b1 T, c0 + c1 T), exactly.
double sum_max_affine(double a0, double a1, double b0, double b1, double c0, double c1, int64_t t0, int64_t t1);

// Peak bytes of simultaneously live activations in launch order (no reuse across
// time, exact sizes): what an ideal planner needs.
double peak_live_bytes(const Graph& g, const Bindings& b);

// The format of the first layer's matrices (what a plan's weights are stored in; a
// tied embedding may keep the model dtype), or nullopt for a graph without layers.
std::optional<Format> layer_weight_format(const Graph& g);

}  // namespace lathe
