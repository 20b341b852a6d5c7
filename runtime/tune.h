// Kernel tuning on a real backend (`lathe tune`): times candidate parameters of a
// plan's tunable kernels (codegen/tuning.h) on this machine's CPU or GPU and keeps the
// fastest per (kernel kind, shape).
//
// 1. Group the plan's tunable nodes by key; each kind has a short candidate list, the
//    default first.
// 2. Round r opens a session in which every key takes its r-th candidate (all keys
//    at once: kernels are timed one by one, so keys do not disturb each other),
//    runs prefill and decode steps `reps` times and keeps, per key, the fastest rep's
//    time per call. Kernel caches (the CPU JIT's, NVRTC's) make a round compile only
//    new variants. The defaults are timed again in a last round, and each key keeps
//    the faster of its two default times (a first round slowed by a cold start or a
//    busy machine would otherwise hand the candidates wins they did not earn).
// 3. A candidate replaces the default only when it is faster by more than `margin`.
// 4. When some key was tuned, the default and the tuned plan run alternately (at
//    least 3 times, without per-kernel timing; one after the other when two sessions
//    do not fit, e.g. two copies of a large model's weights on one GPU); the median
//    prefill and decode times give the end-to-end gain. Winners that do not win together
//    (the tuned plan slower by more than `margin` over a prefill and its decode steps)
//    are discarded: per-kernel timings missed an interaction, or the machine's state
//    changed between the rounds.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/plan.h"
#include "codegen/tuning.h"
#include "runtime/cpu/session.h"  // StepResult, KernelTiming
#include "runtime/weights.h"

namespace lathe {

class CpuJit;

struct TuneOptions {
  int threads = 0;       // CPU: 0 = all hardware threads
  int reps = 3;          // repetitions of each measurement
  int decode_steps = 8;  // decode steps per repetition
  double margin = 0.03;  // a candidate must beat the default by this fraction
  // Called after each session's measurements with the sessions done and the total
  // expected (the rounds, the defaults' second round, the two of the end-to-end
  // comparison).
  std::function<void(int done, int total)> progress;
};

struct TuneResult {
  TuningFile file;               // entries: the keys whose best candidate beat the default
  std::vector<TuningEntry> all;  // every key, tuned or not
  // The winners, when the tuned plan then ran slower as a whole than the default (prefill
  // plus the decode steps, by more than the margin): the file keeps the defaults.
  std::vector<TuningEntry> discarded;
  // Median prefill step and decode step, default and tuned plan (0 when no key was tuned).
  double prefill_default_s = 0, prefill_tuned_s = 0;
  double decode_default_s = 0, decode_tuned_s = 0;
  int sessions = 0, kernels_compiled = 0;
  double compile_s = 0;
};

// What the tuner needs of a backend's session.
class TuneSession {
 public:
  virtual ~TuneSession() = default;
  virtual StepResult prefill(const std::vector<std::vector<int32_t>>& prompts) = 0;
  virtual StepResult decode(const std::vector<int32_t>& tokens) = 0;
  virtual const std::vector<KernelTiming>& timings() const = 0;
  virtual void reset_timings() = 0;
};

struct TuneBackend {
  std::string name;     // "cpu" or "cuda": the tuning keys and parameters used
  std::string machine;  // recorded in the tuning file
  // A session of `plan`; `time_kernels`: per-kernel timings (the rounds) or not (the
  // end-to-end comparison).
  std::function<std::unique_ptr<TuneSession>(const Plan& plan, bool time_kernels)> open;
  // Kernels compiled and seconds spent compiling so far (for the report).
  std::function<std::pair<int, double>()> compile_stats;
};

TuneResult tune_plan(const Plan& plan, const TuneBackend& backend, const TuneOptions& o);

// The CPU backend (the plan's kernels through the JIT, `o.threads` workers).
TuneResult tune_cpu(const Plan& plan, const WeightStore& weights, CpuJit& jit,
                    const TuneOptions& o);
// The CUDA backend (device 0; NVRTC results cached in `cache_dir`, "" = default).
// Throws lathe::Error "no CUDA device ..." without a GPU, before any work.
TuneResult tune_cuda(const Plan& plan, const WeightStore& weights, const std::string& cache_dir,
                     const TuneOptions& o);

// The plan with a tuning file applied to both graphs (for the file's backend);
// returns nodes changed.
int apply_tuning(Plan& plan, const TuningFile& t);

}  // namespace lathe
