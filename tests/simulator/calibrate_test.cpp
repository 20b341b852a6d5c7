#include "simulator/calibrate.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ir/assert.h"
#include "simulator/cost.h"
#include "support/plans.h"

namespace lathe {
namespace {

using testing::build_plan_graphs;
using testing::lower_plan;

struct Plans {
  std::vector<Lowered> lowered;
  std::vector<MeasuredRun> runs;
};

// Synthetic runs "measured" on a known target: every kernel's time is exactly what
// `truth` predicts for each call (prefill once, decode steps at P+1..P+steps), as
// the runtime sums them.
Plans synthetic_runs(const Target& truth) {
  Plans p;
  struct Shape {
    const char* weights;
    Workload w;
  };
  const Shape shapes[] = {{"f32", {1, 32, 9}},  {"int8", {1, 96, 9}},     {"int4:g32", {2, 64, 9}},
                          {"f32", {2, 128, 9}}, {"int8", {2, 32, 9}},     {"int4:g32", {1, 128, 9}},
                          {"f32", {1, 64, 9}},  {"int8:g32", {1, 64, 9}}, {"int4:g32", {1, 48, 9}}};
  p.lowered.reserve(std::size(shapes));
  for (const Shape& s : shapes) {
    PlanOptions o;
    o.weights = parse_weight_format(s.weights);
    auto b = build_plan_graphs("small", "cpu-host", s.w, o);
    p.lowered.push_back(lower_plan(b, o));
    const Lowered& l = p.lowered.back();
    MeasuredRun r;
    r.label = std::string(s.weights) + " p" + std::to_string(s.w.prompt);
    r.prefill = &l.prefill;
    r.decode = &l.decode;
    r.batch = s.w.batch;
    r.prompt = s.w.prompt;
    r.decode_steps = s.w.gen - 1;
    for (NodeId id : l.prefill.topo_order())
      r.prefill_kernels.push_back(
          {id,
           cost_node(l.prefill, l.prefill.node(id), truth, {r.batch, r.prompt, r.prompt}).time_s});
    for (NodeId id : l.decode.topo_order()) {
      double t = 0;
      for (int64_t i = 1; i <= r.decode_steps; ++i)
        t += cost_node(l.decode, l.decode.node(id), truth, {r.batch, 1, r.prompt + i}).time_s;
      r.decode_kernels.push_back({id, t});
    }
    p.runs.push_back(r);
  }
  return p;
}

TEST(Calibrate, RecoversAKnownTargetFromSyntheticRuns) {
  Target truth = load_target("cpu-host");
  truth.eff.gemm = 0.21;
  truth.eff.memory = 0.55;
  truth.eff.elementwise = 0.3;
  truth.eff.dequant = 0.6;
  truth.launch_overhead_us = 6.0;
  Plans p = synthetic_runs(truth);
  std::vector<MeasuredRun> train(p.runs.begin(), p.runs.begin() + 6),
      test(p.runs.begin() + 6, p.runs.end());
  Target start =
      load_target("cpu-host");  // gemm 0.70, memory 0.75, elementwise 0.5, dequant 1, launch 2 us
  CalibrationResult r = calibrate(start, train, test);
  // The start is far off; the fit predicts the held-out runs almost exactly.
  EXPECT_GT(r.test_before, 0.2);
  EXPECT_LT(r.test_after, 0.01);
  EXPECT_LT(r.train_after, 0.01);
  ASSERT_EQ(r.test.size(), 6u);  // 3 held-out runs x 2 phases
  for (const PhaseError& e : r.test)
    EXPECT_NEAR(e.after_s, e.measured_s, 0.02 * e.measured_s) << e.run << " " << e.phase;
  // The factors the kernels depend on come back.
  EXPECT_NEAR(r.fitted.eff.gemm, truth.eff.gemm, 0.05 * truth.eff.gemm);
  EXPECT_NEAR(r.fitted.eff.memory, truth.eff.memory, 0.05 * truth.eff.memory);
  EXPECT_NEAR(r.fitted.launch_overhead_us, truth.launch_overhead_us, 0.5);
  for (const FittedFactor& f : r.factors) {
    if (!f.used) {
      EXPECT_EQ(f.before, f.after) << f.key << " has no kernel to fit it and must keep its value";
    }
    EXPECT_FALSE(f.at_bound) << f.key << " = " << f.after;
  }
}

// A factor the runs push past its search range ends at the range's end and is flagged
// (the spec was written with launch overhead at 200 us and nothing said so).
TEST(Calibrate, FlagsAFactorFittedToTheEndOfItsRange) {
  Target truth = load_target("cpu-host");
  truth.launch_overhead_us = 600;  // past the fitted range's 200
  Plans p = synthetic_runs(truth);
  CalibrationResult r = calibrate(load_target("cpu-host"), p.runs, {});
  bool flagged = false;
  for (const FittedFactor& f : r.factors)
    if (f.key == std::string("launch_overhead_us")) {
      EXPECT_DOUBLE_EQ(f.after, 200.0);
      flagged = f.at_bound;
    }
  EXPECT_TRUE(flagged);
}

// The CPU model's size dependences are fitted too: sgemm's efficiency falling at few
// rows (gemm_half_rows) and the integer GEMMs' at short reductions (*_half_k), on a
// host with 8-bit dot products.
TEST(Calibrate, FitsTheCpuSizeDependences) {
  Target truth = load_target("cpu-host");
  truth.peak_int8 = 0.9;
  truth.eff.gemm = 0.8;
  truth.gemm_half_rows = 40;
  truth.eff.int_dot = 0.4;
  truth.int_dot_half_k = 300;
  truth.eff.int8_dot = 0.3;
  truth.int8_dot_half_k = 500;
  truth.eff.memory = 0.6;
  Plans p = synthetic_runs(truth);
  std::vector<MeasuredRun> train(p.runs.begin(), p.runs.begin() + 6),
      test(p.runs.begin() + 6, p.runs.end());
  Target start = load_target("cpu-host");
  start.peak_int8 = truth.peak_int8;  // a peak is measured, not fitted
  ASSERT_EQ(start.gemm_half_rows, 0.0);
  CalibrationResult r = calibrate(start, train, test);
  EXPECT_LT(r.train_after, 0.01);
  EXPECT_LT(r.test_after, 0.02);
  EXPECT_NEAR(r.fitted.gemm_half_rows, truth.gemm_half_rows, 0.15 * truth.gemm_half_rows);
  EXPECT_NEAR(r.fitted.eff.gemm, truth.eff.gemm, 0.1 * truth.eff.gemm);
  // `small` reduces over K = 512 and 1536 only, so an integer GEMM's factor and its
  // half-K trade off; what must come back is the efficiency at those lengths.
  auto at_k = [](double e, double half, double K) { return e * K / (K + half); };
  for (double K : {512.0, 1536.0}) {
    EXPECT_NEAR(at_k(r.fitted.eff.int_dot, r.fitted.int_dot_half_k, K), at_k(0.4, 300, K), 0.08 * at_k(0.4, 300, K))
        << "int4 at K " << K;
    EXPECT_NEAR(at_k(r.fitted.eff.int8_dot, r.fitted.int8_dot_half_k, K), at_k(0.3, 500, K), 0.08 * at_k(0.3, 500, K))
        << "int8 at K " << K;
  }
  bool fitted_half_rows = false;
  for (const FittedFactor& f : r.factors) fitted_half_rows |= f.key == std::string("gemm_half_rows") && f.used;
  EXPECT_TRUE(fitted_half_rows);
}

TEST(Calibrate, PhasePredictionSumsTheKernels) {
  Target t = load_target("cpu-host");
  Plans p = synthetic_runs(t);
  for (const MeasuredRun& r : p.runs) {
    double pre = 0, dec = 0;
    for (const MeasuredKernel& k : r.prefill_kernels) pre += k.measured_s;
    for (const MeasuredKernel& k : r.decode_kernels) dec += k.measured_s;
    EXPECT_NEAR(predict_phase(r, Phase::prefill, t), pre, 1e-12 * pre);
    EXPECT_NEAR(predict_phase(r, Phase::decode, t), dec, 1e-12 * dec);
  }
}

TEST(Calibrate, NoTrainingRunsIsAnError) {
  EXPECT_THROW(calibrate(load_target("cpu-host"), {}, {}), Error);
}

// A factor that starts at the bottom of its fitted range (as an earlier calibration
// can leave it) is still found to matter and is fitted; it was probed only downwards,
// found "unused" and kept.
TEST(Calibrate, FitsAFactorThatStartsAtItsBound) {
  Target truth = load_target("cpu-host");
  truth.eff.elementwise = 0.2;
  Plans p = synthetic_runs(truth);
  Target start = load_target("cpu-host");
  start.eff.elementwise = 0.005;  // the fitted range's lower bound
  CalibrationResult r = calibrate(start, p.runs, {});
  bool fitted = false;
  for (const FittedFactor& f : r.factors) fitted |= f.key == std::string("efficiency.elementwise") && f.used;
  EXPECT_TRUE(fitted);
  EXPECT_NEAR(r.fitted.eff.elementwise, 0.2, 0.02);
  EXPECT_LT(r.train_after, 0.01);
}

// Runs whose measured times are all 0 have nothing to fit (it wrote a spec claiming
// 0% error before and after).
TEST(Calibrate, AllZeroTimesAreAnError) {
  Plans p = synthetic_runs(load_target("cpu-host"));
  for (MeasuredRun& r : p.runs) {
    r.prefill_s = r.decode_s = 0;
    for (MeasuredKernel& k : r.prefill_kernels) k.measured_s = 0;
    for (MeasuredKernel& k : r.decode_kernels) k.measured_s = 0;
  }
  EXPECT_THROW(calibrate(load_target("cpu-host"), p.runs, {}), Error);
}

}  // namespace
}  // namespace lathe
