// Measures a GPU's two ceilings for the CUDA backend (the method of
// ../shared device notes: measure once, use as the roofline): device-to-device copy
// bandwidth, counting bytes read plus bytes written, and the cuBLAS bf16 / f16 GEMM
// rate on random data (8192^3, f32 accumulate). Medians over timed repetitions with
// device events, after warm-up.
#pragma once

#include <string>

#include "ir/target.h"
#include "runtime/cuda/cuda_api.h"

namespace lathe {

struct CudaProbeResult {
  CudaDeviceInfo device;
  double copy_gbs = 0;          // (read + write) bytes / s, 1e9
  double gemm_tflops_bf16 = 0;  // cuBLAS, median
  double gemm_tflops_f16 = 0;
  double copy_mb = 0;
  int gemm_n = 0;
};

// Throws lathe::Error ("no CUDA device ...") without a device.
CudaProbeResult probe_cuda(int device = 0, double buffer_mb = 2048, int reps = 20);

// A hardware spec (TOML) for the device: the datasheet spec `base` with the measured
// copy bandwidth and GEMM rate as efficiency.memory and efficiency.gemm (measured over
// datasheet), so predictions use the measured ceilings.
std::string cuda_probe_to_toml(const CudaProbeResult& p, const Target& base, const std::string& name);

}  // namespace lathe
