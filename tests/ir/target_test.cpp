#include "ir/target.h"

#include <gtest/gtest.h>

#include "frontend/specs.h"

namespace lathe {
namespace {

TEST(Target, OverridesByKey) {
  Target t = load_target("a100-80g");
  EXPECT_EQ(apply_override(t, "hbm_bandwidth_gbs=6000"), "");
  EXPECT_DOUBLE_EQ(t.hbm_bandwidth_gbs, 6000);
  EXPECT_EQ(apply_override(t, "hbm_bandwidth_gbs=x1.5"), "");
  EXPECT_DOUBLE_EQ(t.hbm_bandwidth_gbs, 9000);
  EXPECT_EQ(apply_override(t, "peak_tflops.bf16=500"), "");
  EXPECT_DOUBLE_EQ(t.peak_bf16, 500);
  EXPECT_EQ(apply_override(t, "efficiency.gemm=0.5"), "");
  EXPECT_DOUBLE_EQ(t.eff.gemm, 0.5);
  EXPECT_NE(apply_override(t, "bandwidth=1").find("valid keys"), std::string::npos);
  EXPECT_NE(apply_override(t, "hbm_bandwidth_gbs=fast").find("not a number"), std::string::npos);
  EXPECT_NE(apply_override(t, "hbm_bandwidth_gbs"), "");
  EXPECT_NE(apply_override(t, "efficiency.gemm=7"), "");
  EXPECT_NE(apply_override(t, "efficiency.gemm=0").find("efficiency.gemm lies in [0.001, 1.5]"), std::string::npos);
  EXPECT_EQ(apply_override(t, "efficiency.dequant=3"), "");  // a relative speed, up to 16
  EXPECT_NE(apply_override(t, "gemm_tile_m=0").find("gemm_tile_m lies in [1, 4096]"), std::string::npos);
  EXPECT_NE(apply_override(t, "roofline_exponent=0.5").find("roofline_exponent lies in [1, 1000]"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(t.gemm_tile_m, 128);  // a rejected override changes nothing
  // 0 means "the GEMMs' factor" for the integer GEMV efficiencies; tiny values do not.
  EXPECT_EQ(apply_override(t, "efficiency.int8_dot_gemv=0.1"), "");
  EXPECT_EQ(apply_override(t, "efficiency.int8_dot_gemv=0"), "");
  EXPECT_EQ(t.eff.int8_dot_gemv, 0);
  EXPECT_NE(apply_override(t, "efficiency.int_dot_gemv=1e-6").find("lies in 0 or [0.001, 1.5]"), std::string::npos);
  // memory_gb, the bandwidth and the fp32 peak cannot be 0 (target_problem), so their
  // range does not offer it.
  EXPECT_NE(apply_override(t, "memory_gb=1e-6").find("memory_gb lies in [0.001, 1e+12]"), std::string::npos);
  EXPECT_NE(apply_override(t, "memory_gb=0").find("memory_gb lies in [0.001, 1e+12]"), std::string::npos);
  EXPECT_EQ(apply_override(t, "nvlink_gbs=0"), "");  // no NVLink
  // Switches are 0 or 1: a fraction was read as on.
  EXPECT_NE(apply_override(t, "nvlink_switch=0.001").find("nvlink_switch is 0 or 1"), std::string::npos);
  EXPECT_NE(apply_override(t, "unified_memory=7").find("unified_memory is 0 or 1"), std::string::npos);
  EXPECT_EQ(apply_override(t, "unified_memory=1"), "");
  EXPECT_EQ(apply_override(t, "nvlink_switch=0"), "");
  // x0.5 on an unset GEMV factor halves the GEMMs' factor it stands for.
  EXPECT_EQ(apply_override(t, "efficiency.int8_dot_gemv=x0.5"), "");
  EXPECT_DOUBLE_EQ(t.eff.int8_dot_gemv, 0.5 * t.eff.int8_dot);
}

TEST(Target, Fp8SupportFollowsArchitecture) {
  EXPECT_FALSE(load_target("a100-80g").supports(DType::fp8_e4m3));
  EXPECT_TRUE(load_target("h100-sxm").supports(DType::fp8_e4m3));
  EXPECT_TRUE(load_target("l4").supports(DType::fp8_e4m3));
  EXPECT_FALSE(load_target("cpu-host").supports(DType::fp8_e4m3));
}

// Overrides can make a target unusable; the checks name why, and a zero 16-bit peak
// means the target lacks that format.
TEST(Target, ProblemsAfterOverrides) {
  Target t = load_target("a100-80g");
  EXPECT_EQ(target_problem(t), "");
  EXPECT_NE(apply_override(t, "peak_tflops.bf16=1e-300").find("lies in 0 or [0.001,"), std::string::npos);
  EXPECT_EQ(apply_override(t, "peak_tflops.bf16=0"), "");
  EXPECT_FALSE(t.supports(DType::bf16));
  EXPECT_TRUE(t.supports(DType::f16));
  EXPECT_EQ(unsupported_reason(t, DType::bf16), " (peak_tflops.bf16 is 0)");
  EXPECT_EQ(target_problem(t), "");  // fp16 remains
  EXPECT_EQ(apply_override(t, "peak_tflops.fp16=0"), "");
  EXPECT_NE(target_problem(t).find("fp16 or bf16"), std::string::npos);
  Target u = load_target("a100-80g");
  EXPECT_NE(apply_override(u, "sm_count=0.5").find("sm_count must be a whole number"), std::string::npos);
  EXPECT_EQ(apply_override(u, "sm_count=x1.1"), "");  // 118.8 SMs round to 119
  EXPECT_EQ(u.sm_count, 119);
  // A factor rounds to whole SMs; one that leaves none is an error (x0 ran on one SM).
  EXPECT_NE(apply_override(u, "sm_count=x0.001").find("leaves fewer than one SM (sm_count is 119)"),
            std::string::npos);
  EXPECT_NE(apply_override(u, "sm_count=x0").find("leaves fewer than one SM"), std::string::npos);
  EXPECT_EQ(u.sm_count, 119);
  EXPECT_EQ(apply_override(u, "sm_count=x0.005"), "");  // 0.595 rounds to 1
  EXPECT_EQ(u.sm_count, 1);
  u.sm_count = 0.5;  // set directly, not through an override
  EXPECT_NE(target_problem(u).find("sm_count must be a whole number"), std::string::npos);
  // SMs and the clock scale every peak (what-if sm_count=x2 left the peaks and made
  // GEMMs slower; clock_mhz changed nothing); a peak set after them wins.
  Target w = load_target("h100-sxm");
  const Target w0 = w;
  EXPECT_EQ(apply_override(w, "sm_count=x2"), "");
  EXPECT_EQ(w.sm_count, 2 * w0.sm_count);
  EXPECT_DOUBLE_EQ(w.peak_bf16, 2 * w0.peak_bf16);
  EXPECT_DOUBLE_EQ(w.peak_fp8, 2 * w0.peak_fp8);
  EXPECT_DOUBLE_EQ(w.peak_fp32, 2 * w0.peak_fp32);
  EXPECT_EQ(w.hbm_bandwidth_gbs, w0.hbm_bandwidth_gbs);
  EXPECT_EQ(apply_override(w, "clock_mhz=x0.5"), "");
  EXPECT_DOUBLE_EQ(w.peak_bf16, w0.peak_bf16);
  EXPECT_EQ(apply_override(w, "peak_tflops.bf16=100"), "");
  EXPECT_EQ(w.peak_bf16, 100);
  EXPECT_EQ(apply_override(w, "clock_mhz=0"), "");  // "not known": the peaks stay
  EXPECT_EQ(w.peak_bf16, 100);
  EXPECT_EQ(apply_override(w, "clock_mhz=1000"), "");  // from 0: nothing to scale from
  EXPECT_EQ(w.peak_bf16, 100);
  EXPECT_NE(apply_override(w, "clock_mhz=1e-9").find("scales peak_tflops.fp32 to"), std::string::npos);
  EXPECT_EQ(w.clock_mhz, 1000);  // refused whole
  Target v = load_target("a100-80g");
  EXPECT_EQ(tp_problem(v, 2), "");
  EXPECT_EQ(apply_override(v, "nvlink_gbs=0"), "");
  EXPECT_EQ(tp_problem(v, 2), "");  // PCIe remains
  EXPECT_EQ(apply_override(v, "pcie_gbs=0"), "");
  EXPECT_NE(tp_problem(v, 2).find("needs a link"), std::string::npos);
  EXPECT_EQ(tp_problem(v, 1), "");
}

}  // namespace
}  // namespace lathe
