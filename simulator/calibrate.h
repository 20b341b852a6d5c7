// Calibration: fit a target's efficiency factors to measured runs, kernel class by
// kernel class (DESIGN.md: one node = one kernel = one cost row = one timing).
//
// A measured run is a plan's lowered graphs, the shape of the run (batch, prompt,
// decode steps) and the measured time of every kernel, summed over its calls (what
// `lathe run --per-op --format json` records). A kernel's prediction is summed the
// way the runtime predicts it: prefill once at {B, P, P}, decode step i at
// {B, 1, P + i} for i = 1..steps.
//
// Method:
// 1. Identical kernels (simulator/node_groups.h) are pooled: their measured times add.
// 2. Loss on the training runs, in log space so that fast and slow kernels count
//    alike: for every (run, phase), log(predicted / measured)^2, plus for every kernel
//    group its share of the phase's measured time x log(predicted / measured)^2.
// 3. The fitted parameters are the Efficiency factors (gemm, attention, memory,
//    elementwise, dequant, scalar, the integer dot-product ones), launch_overhead_us,
//    the CPU cost model's size terms and the roofline exponent. Coordinate descent:
//    each parameter in turn on a grid over its range (log-spaced for the factors),
//    then a golden-section refinement around the best grid point, each round followed
//    by a pattern move; rounds until the loss stops falling (at most 100). A parameter
//    no training kernel depends on keeps its value. The loss is in log space, so the
//    mean relative error reported can rise where the log error falls (noisy runs).
// 4. Errors before and after are reported per (run, phase) on the training and the
//    held-out runs.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/target.h"

namespace lathe {

struct MeasuredKernel {
  NodeId node = kNone;
  double measured_s = 0;  // summed over the kernel's calls in the run
};

struct MeasuredRun {
  std::string label;
  const Graph* prefill = nullptr;  // lowered graphs of the run's plan (not owned)
  const Graph* decode = nullptr;
  int64_t batch = 1, prompt = 1, decode_steps = 0;
  std::vector<MeasuredKernel> prefill_kernels, decode_kernels;
  double prefill_s = 0, decode_s = 0;  // measured phase times (0: the sum of the kernels)
};

struct PhaseError {
  std::string run;
  std::string phase;  // "prefill" or "decode"
  double measured_s = 0, before_s = 0, after_s = 0;
};

struct FittedFactor {
  std::string key;  // "efficiency.gemm", "launch_overhead_us"
  double before = 0, after = 0;
  bool used = true;  // some training kernel depends on it
  // Fitted to an end of its search range that no real machine sits at (an efficiency
  // of 0.005 or 1.5, 200 us of launch overhead, the largest half-size or exponent):
  // the runs do not pin it down, or the model cannot express what they measured. The
  // natural ends (0 for the additive terms, exponent 1) are not flagged.
  bool at_bound = false;
};

struct CalibrationResult {
  Target fitted;
  std::vector<FittedFactor> factors;
  std::vector<PhaseError> train, test;
  // Mean absolute relative error per phase (|predicted - measured| / measured).
  double train_before = 0, train_after = 0, test_before = 0, test_after = 0;
  int evaluations = 0;
};

// Predicted seconds of one phase of a run on `t` (the sum of its kernels).
double predict_phase(const MeasuredRun& run, Phase phase, const Target& t);

// Fits `start`'s factors to `train`; reports errors on `train` and `test`. Throws
// lathe::Error when `train` is empty.
// `before`, when given, is the target the "before" errors are reported for (the spec
// as the user gave it, when `start` adds what the runs showed about the host).
CalibrationResult calibrate(const Target& start, const std::vector<MeasuredRun>& train,
                            const std::vector<MeasuredRun>& test, const Target* before = nullptr);

double mean_abs_error(const std::vector<PhaseError>& e, bool after);

}  // namespace lathe
