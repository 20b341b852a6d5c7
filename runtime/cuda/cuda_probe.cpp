#include "runtime/cuda/cuda_probe.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include "codegen/kernels_id.h"
#include "ir/assert.h"

namespace lathe {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Random 16-bit floats in [-1, 1): bf16 takes the top half of an f32, f16 is built
// from sign, exponent and mantissa directly. Never zeros (see the measuring notes:
// zeros run faster than real data).
std::vector<uint16_t> random_halves(size_t n, bool bf16, uint64_t seed) {
  std::vector<uint16_t> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    float x = float(int64_t(s >> 40) - (int64_t(1) << 23)) / float(1 << 23);  // [-1, 1)
    if (x == 0) x = 0.5f;
    if (bf16) {
      uint32_t u;
      std::memcpy(&u, &x, 4);
      v[i] = uint16_t(u >> 16);
    } else {
      // |x| < 1: f16 exponent from the f32 one, 10 mantissa bits, flush tiny to 2^-14.
      uint32_t u;
      std::memcpy(&u, &x, 4);
      int e = int((u >> 23) & 0xff) - 127 + 15;
      uint16_t sign = uint16_t((u >> 16) & 0x8000);
      v[i] = e <= 0 ? uint16_t(sign | 0x0400) : uint16_t(sign | (e << 10) | ((u >> 13) & 0x3ff));
    }
  }
  return v;
}

}  // namespace

CudaProbeResult probe_cuda(int device, double buffer_mb, int reps) {
  CudaApi api(device);
  CudaProbeResult r;
  r.device = api.device();
  CuStream s = api.stream();
  CuEvent a = api.event(), b = api.event();

  // Copy bandwidth: two buffers far above L2, filled with non-zero data.
  size_t bytes = size_t(std::min(buffer_mb, r.device.free_gb * 1e3 / 4) * 1e6) & ~size_t(4095);
  r.copy_mb = double(bytes) / 1e6;
  CuDevicePtr src = api.alloc(bytes, "probe copy source"), dst = api.alloc(bytes, "probe copy destination");
  api.memset32(src, 0x3f803f80u, bytes / 4, s);
  for (int i = 0; i < 3; ++i) api.copy_d2d(dst, src, bytes, s);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    api.record(a, s);
    api.copy_d2d(dst, src, bytes, s);
    api.record(b, s);
    api.sync(s);
    t.push_back(api.elapsed_ms(a, b) / 1e3);
  }
  r.copy_gbs = 2.0 * double(bytes) / median(t) / 1e9;
  api.free(src);
  api.free(dst);

  // GEMM: C[n, n] = A[n, n] B[n, n]^T through cuBLAS, random inputs.
  if (api.blas_available()) {
    const int n = 8192;
    r.gemm_n = n;
    const size_t elems = size_t(n) * n;
    CuDevicePtr A = api.alloc(elems * 2, "probe A"), B = api.alloc(elems * 2, "probe B"),
                C = api.alloc(elems * 2, "probe C");
    for (bool bf16 : {true, false}) {
      auto ha = random_halves(elems, bf16, 1), hb = random_halves(elems, bf16, 2);
      api.upload(A, ha.data(), elems * 2);
      api.upload(B, hb.data(), elems * 2);
      for (int i = 0; i < 3; ++i) api.gemm_nt(s, bf16, n, n, n, A, B, C, 0.0f);
      std::vector<double> g;
      for (int i = 0; i < std::max(5, reps / 2); ++i) {
        api.record(a, s);
        api.gemm_nt(s, bf16, n, n, n, A, B, C, 0.0f);
        api.record(b, s);
        api.sync(s);
        g.push_back(api.elapsed_ms(a, b) / 1e3);
      }
      (bf16 ? r.gemm_tflops_bf16 : r.gemm_tflops_f16) = 2.0 * double(n) * n * n / median(g) / 1e12;
    }
    api.free(A);
    api.free(B);
    api.free(C);
  }
  return r;
}

std::string cuda_probe_to_toml(const CudaProbeResult& p, const Target& t, const std::string& name) {
  char date[32];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::localtime(&now));
  double mem_eff = t.hbm_bandwidth_gbs > 0 ? p.copy_gbs / t.hbm_bandwidth_gbs : 0.85;
  double gemm_eff = t.peak_bf16 > 0 && p.gemm_tflops_bf16 > 0 ? p.gemm_tflops_bf16 / t.peak_bf16 : t.eff.gemm;
  char buf[4096];
  std::snprintf(buf, sizeof buf,
                "# Measured by `lathe probe --backend cuda` on %s: %s (sm_%d, %d SMs, %.1f GB).\n"
                "# Device-to-device copy %.1f GB/s (read + write, %.0f MB buffers); cuBLAS %dx%dx%d GEMM\n"
                "# bf16 %.1f TFLOP/s, f16 %.1f TFLOP/s (random data, f32 accumulate, medians).\n"
                "# Datasheet figures from %s; efficiency.memory and efficiency.gemm are the\n"
                "# measurements over them.\n"
                "[hardware]\n"
                "name = \"%s\"\n"
                "description = \"%s (measured %s)\"\n"
                "kind = \"gpu\"\n"
                "compute_capability = \"%d.%d\"\n"
                "sm_count = %d\n"
                "clock_mhz = %.0f\n"
                "memory_gb = %.1f\n"
                "hbm_bandwidth_gbs = %.1f\n"
                "l2_mb = %.1f\n"
                "smem_per_sm_kb = %.0f\n"
                "launch_overhead_us = %.2f\n"
                "nvlink_gbs = %.1f\n"
                "pcie_gbs = %.1f\n"
                "price_per_hour = %.2f\n\n"
                "[hardware.peak_tflops]\n"
                "fp32 = %.2f\ntf32 = %.2f\nfp16 = %.2f\nbf16 = %.2f\nfp8 = %.2f\nint8 = %.2f\n\n"
                "[hardware.efficiency]\n"
                "gemm = %.3f          # measured cuBLAS bf16 / datasheet\n"
                "attention = %.3f\n"
                "memory = %.3f        # measured copy bandwidth / datasheet\n"
                "elementwise = %.3f\n",
                date, p.device.name.c_str(), p.device.compute_capability, p.device.sm_count, p.device.memory_gb,
                p.copy_gbs, p.copy_mb, p.gemm_n, p.gemm_n, p.gemm_n, p.gemm_tflops_bf16, p.gemm_tflops_f16,
                t.name.c_str(), name.c_str(), p.device.name.c_str(), date, p.device.compute_capability / 10,
                p.device.compute_capability % 10, p.device.sm_count, t.clock_mhz, p.device.memory_gb,
                t.hbm_bandwidth_gbs, t.l2_mb, t.smem_per_sm_kb, t.launch_overhead_us, t.nvlink_gbs, t.pcie_gbs,
                t.price_per_hour, t.peak_fp32, t.peak_tf32, t.peak_fp16, t.peak_bf16, t.peak_fp8, t.peak_int8,
                std::clamp(gemm_eff, 0.05, 1.0), t.eff.attention, std::clamp(mem_eff, 0.05, 1.0),
                std::clamp(mem_eff * t.eff.elementwise / std::max(0.05, t.eff.memory), 0.05, 1.0));
  // The kernel build measured (a later build's kernels make these figures stale).
  std::string out = buf;
  const size_t at = out.find("kind = \"gpu\"\n");
  if (at != std::string::npos) out.insert(at, "measured_with = \"" + std::string(cuda_kernels_id()) + "\"\n");
  return out;
}

}  // namespace lathe
