// Golden files of emitted kernels: the CUDA (and CPU) source of every node of the
// tiny dense and MoE plans, in launch order, with each kernel's entry points and
// grid rules. A change to an emitter or to the passes feeding it shows up as a
// reviewable diff (LATHE_UPDATE_GOLDEN=1 rewrites the files). Identical layers share
// one kernel; later layers name the symbol instead of repeating the body.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "codegen/cpu/emit_cpu.h"
#include "codegen/cuda/emit_cuda.h"
#include "frontend/specs.h"
#include "ir/assert.h"
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
             std::to_string(b.t1_offset) + "," + std::to_string(b.t2_offset);
      if (b.dequant_entry >= 0) {
        out += " dequant entry " + std::to_string(b.dequant_entry) + " weight copies at";
        for (int i = 0; i < b.nw; ++i) out += " " + std::to_string(b.wd_offset[i]);
      }
      out += "\n";
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
// entry and a SiLU x up entry around the library GEMMs) with no dequantization entry;
// the int8 plans above add one that decodes the weights into scratch first.
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

// RoPE scaling: every RoPE kernel (fused with the KV write or not) of a scaled model
// holds the model's divisor table (CUDA) or its frequencies with the divisors applied
// (CPU) and passes it to the rotation; no other kernel does;
// a malformed table in a plan is an error that names the attribute.
TEST(EmitRopeScaling, KernelsCarryTheDivisorTable) {
  const std::string fixture = std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/rope-llama3.toml";
  const ModelSpec m = load_model(fixture);
  ASSERT_TRUE(m.rope_scaling.has_value());
  const std::vector<double> div = rope_divisors(*m.rope_scaling, m.rope_theta, m.head_dim);
  const std::string half = "[" + std::to_string(m.head_dim / 2) + "] = {";
  // CUDA kernels carry the divisors, CPU kernels the frequencies with the divisors in.
  const std::string cuda_table = "static const double rope_div" + half + rope_table_text(div) + "};";
  std::vector<double> freq;  // theta^(-2i / head_dim) / divisor i, computed here, not by lathe
  for (size_t i = 0; i < div.size(); ++i) freq.push_back(std::pow(m.rope_theta, -2.0 * double(i) / m.head_dim) / div[i]);
  const std::string cpu_table = "static const double rope_freq" + half + rope_table_text(freq) + "};";
  for (bool fused : {true, false}) {
    for (bool gpu : {true, false}) {
      PlanOptions o;
      if (!fused) o.pass_enabled["fuse-rope-kvwrite"] = false;
      if (gpu) o.act_dtype = DType::bf16;
      auto b = testing::build_plan_graphs(fixture, gpu ? "h100-sxm" : "cpu-host", {2, 16, 8}, o);
      Lowered l = testing::lower_plan(b, o);
      for (const Graph* g : {&l.prefill, &l.decode}) {
        int rope_kernels = 0;
        auto check = [&](const std::string& name, const std::string& label, const std::string& body) {
          bool rope = label.find("rope") != std::string::npos;
          rope_kernels += rope;
          EXPECT_EQ(body.find(gpu ? cuda_table : cpu_table) != std::string::npos, rope) << name << "\n" << body;
          EXPECT_EQ(body.find(gpu ? ", rope_div);" : ", rope_freq);") != std::string::npos, rope) << name << "\n" << body;
        };
        if (gpu)
          for (const CudaKernel& k : emit_cuda_kernels(*g)) check(k.node_name, k.label, k.body);
        else
          for (const CpuKernel& k : emit_cpu_kernels(*g)) check(k.node_name, k.label, k.body);
        EXPECT_EQ(rope_kernels, m.layers * (fused ? 1 : 2)) << (gpu ? "cuda " : "cpu ") << (fused ? "fused" : "unfused");
      }
      // A plan whose table was edited by hand.
      Graph bad = l.decode;
      for (NodeId id : bad.topo_order())
        if (bad.node(id).attrs.has("rope_divisors")) bad.node_mut(id).attrs.set("rope_divisors", std::string("1,2,x"));
      try {
        if (gpu) emit_cuda_kernels(bad);
        else emit_cpu_kernels(bad);
        ADD_FAILURE() << "a malformed rope_divisors attribute was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("rope_divisors: 'x' is not a positive number"), std::string::npos)
            << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace lathe
