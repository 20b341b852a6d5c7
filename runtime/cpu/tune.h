// Kernel tuning on the CPU backend (`lathe tune --backend cpu`): times candidate
// parameters of a plan's tunable kernels (codegen/tuning.h) on this machine and keeps
// the fastest per (kernel kind, shape).
//
// 1. Group the plan's tunable nodes by key; each kind has a short candidate list, the
//    default first.
// 2. Round r builds a session in which every key takes its r-th candidate (all keys
//    at once: kernels are timed one by one, so keys do not disturb each other),
//    runs prefill and decode steps `reps` times and keeps, per key, the fastest rep's
//    time per call. The JIT caches kernels, so a round compiles only new variants.
// 3. A candidate replaces the default only when it is faster by more than `margin`
//    (the shared host is noisy).
// 4. When some key was tuned, the default and the tuned plan run alternately (at
//    least 3 times); the median prefill and decode times give the end-to-end gain.
#pragma once

#include <string>
#include <vector>

#include "codegen/plan.h"
#include "codegen/tuning.h"
#include "runtime/cpu/jit.h"
#include "runtime/weights.h"

namespace lathe {

struct TuneOptions {
  int threads = 0;       // 0 = all hardware threads
  int reps = 3;          // repetitions of each measurement
  int decode_steps = 8;  // decode steps per repetition
  double margin = 0.03;  // a candidate must beat the default by this fraction
};

struct TuneResult {
  TuningFile file;               // entries: the keys whose best candidate beat the default
  std::vector<TuningEntry> all;  // every key, tuned or not
  // Median prefill step and decode step, default and tuned plan (0 when no key was tuned).
  double prefill_default_s = 0, prefill_tuned_s = 0;
  double decode_default_s = 0, decode_tuned_s = 0;
  int sessions = 0, kernels_compiled = 0;
  double compile_s = 0;
};

TuneResult tune_cpu(const Plan& plan, const WeightStore& weights, CpuJit& jit,
                    const TuneOptions& o);

// The plan with a tuning file applied to both graphs; returns nodes changed.
int apply_tuning(Plan& plan, const TuningFile& t);

}  // namespace lathe
