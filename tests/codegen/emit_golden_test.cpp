// Golden files of emitted kernels: the CUDA (and CPU) source of every node of the
// tiny dense and MoE plans, in launch order, with each kernel's entry points and
// grid rules. A change to an emitter or to the passes feeding it shows up as a
// reviewable diff (LATHE_UPDATE_GOLDEN=1 rewrites the files). Identical layers share
// one kernel; later layers name the symbol instead of repeating the body.
#include <gtest/gtest.h>

#include <set>

#include "codegen/cpu/emit_cpu.h"
#include "codegen/cuda/emit_cuda.h"
#include "support/golden.h"
#include "support/plans.h"

namespace lathe {
namespace {

PlanOptions golden_options(bool gpu) {
  PlanOptions o;
  o.weights = parse_weight_format("int8");
  o.kv_dtype = DType::int4;
  if (gpu) o.act_dtype = DType::bf16;
  return o;
}

const char* grid_name(CudaGrid g) {
  switch (g) {
    case CudaGrid::warps: return "warps";
    case CudaGrid::gemm_tiles: return "gemm_tiles";
    case CudaGrid::expert_tiles: return "expert_tiles";
    case CudaGrid::rows: return "rows";
    case CudaGrid::seq_x: return "seq_x";
    case CudaGrid::flash: return "flash";
    case CudaGrid::rows_x: return "rows_x";
    case CudaGrid::decode_splits: return "decode_splits";
    case CudaGrid::elements: return "elements";
    case CudaGrid::seqs: return "seqs";
  }
  return "?";
}

std::string cuda_listing(const Graph& g) {
  std::string out;
  std::set<std::string> seen;
  for (const CudaKernel& k : emit_cuda_kernels(g)) {
    out += "// ==== node " + k.node_name + " (" + k.label + ")";
    if (k.scratch_bytes) out += " scratch " + std::to_string(k.scratch_bytes) + " B";
    if (k.counters) out += " counters " + std::to_string(k.counters);
    out += "\n";
    for (const CudaEntry& e : k.entries)
      out += "//   entry " + e.symbol + " grid " + grid_name(e.grid) + " block " + std::to_string(e.block) + " p " +
             std::to_string(e.p0) + "," + std::to_string(e.p1) + "," + std::to_string(e.p2) +
             (e.max_rows >= 0 ? " max_rows " + std::to_string(e.max_rows) : "") + "\n";
    if (k.blas.on()) {
      const CudaBlasPlan& b = k.blas;
      out += "//   prefill via cuBLAS: " + std::to_string(b.nw) + " GEMM(s) K " + std::to_string(b.K) + " N";
      for (int i = 0; i < b.nw; ++i) out += " " + std::to_string(b.n[i]);
      out += " epilogue " + std::to_string(b.epilogue) + " norm entry " + std::to_string(b.norm_entry) +
             " silu entry " + std::to_string(b.silu_entry) + " scratch offsets " + std::to_string(b.xn_offset) + "," +
             std::to_string(b.t1_offset) + "," + std::to_string(b.t2_offset) + "\n";
    }
    if (!seen.insert(k.entries.at(0).symbol).second) continue;
    out += k.body + "\n";
  }
  return out;
}

std::string cpu_listing(const Graph& g) {
  std::string out;
  std::set<std::string> seen;
  for (const CpuKernel& k : emit_cpu_kernels(g)) {
    out += "// ==== node " + k.node_name + " (" + k.label + ") " + k.symbol + "\n";
    if (!seen.insert(k.symbol).second) continue;
    out += k.body + "\n";
  }
  return out;
}

TEST(EmitGolden, CudaKernelsOfTinyPlans) {
  for (const char* model : {"tiny", "tiny-moe"}) {
    PlanOptions o = golden_options(true);
    auto b = testing::build_plan_graphs(model, "h100-sxm", {2, 16, 8}, o);
    Lowered l = testing::lower_plan(b, o);
    testing::expect_golden("cuda/" + std::string(model) + ".decode.cu", cuda_listing(l.decode));
    testing::expect_golden("cuda/" + std::string(model) + ".prefill.cu", cuda_listing(l.prefill));
  }
}

// Weights in the activation dtype: prefill GEMMs take the cuBLAS route (an RMSNorm
// entry and a SiLU x up entry around the library GEMMs).
TEST(EmitGolden, CudaPrefillWithBf16Weights) {
  PlanOptions o = golden_options(true);
  o.weights = parse_weight_format("bf16");
  auto b = testing::build_plan_graphs("tiny", "h100-sxm", {2, 16, 8}, o);
  Lowered l = testing::lower_plan(b, o);
  testing::expect_golden("cuda/tiny.prefill.bf16-weights.cu", cuda_listing(l.prefill));
}

TEST(EmitGolden, CpuKernelsOfTinyPlans) {
  PlanOptions o = golden_options(false);
  auto b = testing::build_plan_graphs("tiny", "cpu-host", {2, 16, 8}, o);
  Lowered l = testing::lower_plan(b, o);
  testing::expect_golden("cpu/tiny.decode.cpp", cpu_listing(l.decode));
  testing::expect_golden("cpu/tiny.prefill.cpp", cpu_listing(l.prefill));
}

}  // namespace
}  // namespace lathe
