// A CUDA session: the GPU twin of CpuSession (same plans, same results API). Kernels
// are the plan's generated CUDA compiled with NVRTC for the device's architecture;
// weights, the KV cache (plan layout and dtype) and the activation arena (memory plan
// offsets) live in device memory; one stream; per-kernel timing with events; with
// `graphs`, each decode step is captured once as a CUDA graph and replayed.
#pragma once

#include <memory>
#include <vector>

#include "codegen/cuda/nvrtc.h"
#include "codegen/plan.h"
#include "runtime/cpu/session.h"  // StepResult, KernelTiming
#include "runtime/weights.h"

namespace lathe {

struct CudaSessionOptions {
  int device = 0;
  bool time_kernels = false;  // events around every kernel (no graphs)
  bool graphs = true;         // capture decode steps as CUDA graphs
  NvrtcOptions nvrtc;
};

class CudaSession {
 public:
  // Throws lathe::Error: "no CUDA device ..." without a driver or GPU; when the plan
  // does not fit in device memory (checked before allocating); when a kernel does not
  // compile.
  CudaSession(const Plan& plan, const WeightStore& weights, CudaSessionOptions o = {});
  ~CudaSession();
  CudaSession(const CudaSession&) = delete;
  CudaSession& operator=(const CudaSession&) = delete;

  StepResult prefill(const std::vector<std::vector<int32_t>>& prompts);
  StepResult decode(const std::vector<int32_t>& tokens);

  const std::vector<KernelTiming>& timings() const;
  // Zeroes the timings' sums (measured, predicted, FLOPs, bytes, calls).
  void reset_timings();
  std::string device_name() const;
  int device_arch() const;
  double compile_s() const;
  int kernels_compiled() const;
  int kernels_cached() const;
  // Registers / spills of every kernel entry (from ptxas), for reports.
  const std::vector<CudaFunctionInfo>& kernel_info() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Device bytes a plan needs (weights, KV cache, arena, kernel scratch).
double cuda_session_bytes(const Plan& plan);

// What a kernel binding points at on the device: a weight (or its scales), the step's
// token ids, the KV cache (the views kv_write / rope_kvwrite produce: attention reads
// the cache through the step, in the plan's layout), or the value's arena offset.
struct KernelBinding;  // codegen/cpu/emit_cpu.h
enum class CudaBinding { weight, tokens, kv_cache, arena };
CudaBinding cuda_binding(const Graph& g, const KernelBinding& kb);

// The device bytes of a 1-D weight (a norm gain): its values in the activation dtype
// `act` (bf16 or f16), which is how the kernels read gains, whatever the stored format.
std::vector<unsigned char> cuda_gain_payload(const WeightTensor& t, DType act);

}  // namespace lathe
