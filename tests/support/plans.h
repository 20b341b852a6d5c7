// Test helpers: build and lower plans the way the CLI does.
#pragma once

#include <string>

#include "frontend/builder.h"
#include "frontend/specs.h"
#include "passes/pipeline.h"
#include "simulator/simulate.h"

namespace lathe::testing {

struct Built {
  ModelSpec model;
  Target target;
  Workload workload;
  Graph prefill, decode;
};

inline Built build_plan_graphs(const std::string& model, const std::string& hw, Workload w, const PlanOptions& o = {}) {
  Built b;
  b.model = load_model(model);
  b.target = load_target(hw);
  b.workload = w;
  b.prefill = build_graph(b.model, build_options(b.model, b.target, o, w, Phase::prefill));
  b.decode = build_graph(b.model, build_options(b.model, b.target, o, w, Phase::decode));
  return b;
}

inline Lowered lower_plan(const Built& b, const PlanOptions& o) {
  LowerHooks h;
  h.record = false;
  return lower(b.prefill, b.decode, o, b.target, b.workload, h);
}

inline PlanOptions no_passes() {
  PlanOptions o;
  o.passes = "none";
  return o;
}

}  // namespace lathe::testing
