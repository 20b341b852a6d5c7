// Test helpers for the CPU backend: make a plan the way `lathe compile` does, run it,
// and run the reference interpreter on the unfused graphs of the same model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/plan.h"
#include "runtime/cpu/jit.h"
#include "runtime/cpu/session.h"
#include "runtime/reference.h"
#include "support/plans.h"

namespace lathe::testing {

inline Plan make_plan(const std::string& model, Workload w, const PlanOptions& o, const std::string& hw = "cpu-host") {
  auto b = build_plan_graphs(model, hw, w, o);
  Lowered l = lower_plan(b, o);
  Plan p;
  p.model = model;
  p.target = b.target;
  p.workload = w;
  p.kv_dtype = l.decode.attrs.s("kv_dtype");
  p.kv_layout = l.decode.attrs.s("kv_layout");
  p.act_dtype = l.decode.attrs.s("act_dtype");
  p.pipeline = l.pipeline;
  p.prefill = std::move(l.prefill);
  p.decode = std::move(l.decode);
  return p;
}

// One JIT for the whole test binary: kernels shared between configurations compile
// once; the disk cache lives in the build tree (fresh on every clean build).
inline CpuJit& test_jit() {
#ifdef LATHE_TEST_CACHE_DIR
  static CpuJit jit(JitOptions{LATHE_TEST_CACHE_DIR, true});
#else
  static CpuJit jit(JitOptions{"", false});
#endif
  return jit;
}

}  // namespace lathe::testing
