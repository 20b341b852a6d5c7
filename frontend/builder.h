// Graph builders: the unfused IR of a Llama-style decoder (dense or MoE) for one
// phase. Shapes stay symbolic in B (batch), S (new tokens) and T (context); the
// workload's concrete values are recorded as graph attributes B, S, T so passes
// and the memory planner can bind them.
//
// With tensor parallelism the graph is one device's share: heads, KV heads, FFN and
// vocabulary are split over `tp` ranks and all-reduce / all-gather nodes join them.
// Weights are stored in the model's dtype and the KV cache in the activation dtype;
// the quantize-weights and quantize-kv passes change them to the plan's formats.
#pragma once

#include "ir/graph.h"
#include "ir/model.h"
#include "ir/plan_options.h"
#include "ir/target.h"

namespace lathe {

struct BuildOptions {
  Phase phase = Phase::decode;
  int64_t tp = 1;
  DType act = DType::f32;
  Workload workload;
};

// The activation dtype a plan uses on a target: the option when given, else f32 on
// CPUs and the model's dtype on GPUs.
DType activation_dtype(const ModelSpec& m, const Target& t, const PlanOptions& o);
BuildOptions build_options(const ModelSpec& m, const Target& t, const PlanOptions& o, const Workload& w,
                           Phase phase);

// Builds the unfused graph. Throws lathe::Error when the model cannot be split over
// tp ranks.
Graph build_graph(const ModelSpec& m, const BuildOptions& o);

}  // namespace lathe
