// The CUDA driver API and cuBLAS, loaded with dlopen at run time so one lathe binary
// runs with or without a GPU. Every call goes through check(), which names the call,
// the location and the driver's error name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace lathe {

// Opaque handles (the driver's types are pointers or integers of these sizes).
using CuDevicePtr = unsigned long long;
using CuFunction = void*;
using CuModule = void*;
using CuStream = void*;
using CuEvent = void*;
using CuGraphExec = void*;

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;
  int compute_capability = 0;  // 90 for sm_90
  int sm_count = 0;
  double memory_gb = 0;
  double free_gb = 0;
};

class CudaApi {
 public:
  // Loads libcuda and initializes device `ordinal`. Throws lathe::Error with a clear
  // reason ("no CUDA device": library missing, driver error, no device).
  explicit CudaApi(int ordinal = 0);
  ~CudaApi();
  CudaApi(const CudaApi&) = delete;
  CudaApi& operator=(const CudaApi&) = delete;

  // Whether a device can be opened, without throwing; `why` says why not.
  static bool device_available(std::string* why);

  const CudaDeviceInfo& device() const;
  CuDevicePtr alloc(size_t bytes, const char* what);
  void free(CuDevicePtr p);
  void upload(CuDevicePtr dst, const void* src, size_t bytes, CuStream s = nullptr);
  void download(void* dst, CuDevicePtr src, size_t bytes);
  void memset32(CuDevicePtr p, uint32_t value, size_t words, CuStream s);
  void copy_d2d(CuDevicePtr dst, CuDevicePtr src, size_t bytes, CuStream s);
  CuModule load_module(const std::string& cubin, const std::string& name);
  CuFunction function(CuModule m, const std::string& symbol);
  void launch(CuFunction f, unsigned gx, unsigned gy, unsigned gz, unsigned block, CuStream s, void** params,
              const std::string& name);
  CuStream stream();
  void sync(CuStream s);
  CuEvent event();
  void record(CuEvent e, CuStream s);
  float elapsed_ms(CuEvent a, CuEvent b);
  // CUDA graphs: capture launches issued on `s` between begin and end.
  void begin_capture(CuStream s);
  CuGraphExec end_capture(CuStream s);
  void graph_launch(CuGraphExec g, CuStream s);
  void graph_destroy(CuGraphExec g);

  // cuBLAS (bf16/f16 in, f32 accumulate): C[M, N] = A[M, K] B[N, K]^T, row-major.
  bool blas_available() const;
  void gemm_nt(CuStream s, bool bf16, int64_t M, int64_t N, int64_t K, CuDevicePtr A, CuDevicePtr B, CuDevicePtr C,
               float beta);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lathe
