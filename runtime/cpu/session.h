// A CPU session: executes a compiled plan for real. It JIT-compiles the plan's
// kernels, holds the weights, the KV cache (in the plan's layout and dtype) and the
// activation arena (the memory plan's offsets), and runs prefill over a batch of
// prompts and then decode steps, timing every kernel beside its prediction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/plan.h"
#include "runtime/cpu/jit.h"
#include "runtime/weights.h"

namespace lathe {

struct SessionOptions {
  int threads = 0;       // 0 = all hardware threads
  bool poison = false;   // fill activations with NaN before each step (tests)
  bool time_kernels = true;
};

struct KernelTiming {
  NodeId node = kNone;
  std::string name, label;
  Phase phase = Phase::prefill;
  int64_t calls = 0;
  double measured_s = 0;
  double predicted_s = 0;  // simulator, same bindings, plan's target
  double flops = 0, bytes = 0;  // the simulator's count of the work done, summed over calls
};

struct StepResult {
  std::vector<std::vector<float>> logits;  // [sequence][vocab] at each sequence's last new token
  std::vector<int32_t> argmax;             // the plan's sample kernel (greedy)
  double seconds = 0;                      // wall time of the step
  double predicted_s = 0;
};

class CpuSession {
 public:
  CpuSession(const Plan& plan, const WeightStore& weights, CpuJit& jit, SessionOptions o = {});
  ~CpuSession();
  CpuSession(const CpuSession&) = delete;
  CpuSession& operator=(const CpuSession&) = delete;

  // Starts one sequence per prompt (prompts may differ in length; the cache is
  // reset) and runs prefill. Throws lathe::Error when the batch exceeds the plan.
  StepResult prefill(const std::vector<std::vector<int32_t>>& prompts);
  // One decode step: one new token per live sequence.
  StepResult decode(const std::vector<int32_t>& tokens);

  const std::vector<KernelTiming>& timings() const;
  void reset_timings();
  int64_t vocab() const;
  int threads() const;
  double compile_s() const;        // JIT time spent building this session
  int kernels_compiled() const;    // distinct kernels this session compiled
  int kernels_cached() const;      // distinct kernels loaded from a cache
  double kv_bytes() const;
  double arena_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Bytes of memory available to this process (MemAvailable), or 0 when unknown.
double available_memory_bytes();

// Host memory a CPU session of this plan needs: weights in their formats, the KV
// cache, the activation arena. Throws lathe::Error when it exceeds what is available
// (checked before anything is allocated).
double cpu_session_bytes(const Plan& plan);
void check_fits_in_memory(const Plan& plan);

}  // namespace lathe
