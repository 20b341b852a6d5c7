#include "runtime/cuda/cuda_api.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "ir/assert.h"

#if LATHE_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda.h>
#endif

namespace lathe {

#if LATHE_HAVE_CUDA

namespace {
template <typename F>
F load(void* lib, const char* name, std::string* why) {
  F f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f && why && why->empty()) *why = std::string("libcuda lacks ") + name;
  return f;
}
}  // namespace

struct CudaApi::Impl {
  void* lib = nullptr;
  void* blas_lib = nullptr;
  CudaDeviceInfo info;
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  cublasHandle_t blas = nullptr;
  std::vector<CUmodule> modules;
  std::vector<CUstream> streams;
  std::vector<CUevent> events;

  // Driver entry points (versioned names, as cuda.h's macros map them).
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuMemGetInfo)(size_t*, size_t*) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream) = nullptr;
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**) = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*cuStreamBeginCapture)(CUstream, CUstreamCaptureMode) = nullptr;
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*) = nullptr;
  CUresult (*cuGraphInstantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  // cuBLAS
  cublasStatus_t (*cublasCreate)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*cublasDestroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*cublasSetStream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*cublasGemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                 const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                 cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;

  std::string open(std::string* why) {
    for (const char* name : {"libcuda.so.1", "libcuda.so"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
    }
    if (!lib) return "no CUDA device: the NVIDIA driver library libcuda.so.1 is not installed";
    std::string w;
#define L(f, name) f = load<decltype(f)>(lib, name, &w)
    L(cuInit, "cuInit");
    L(cuDeviceGetCount, "cuDeviceGetCount");
    L(cuDeviceGet, "cuDeviceGet");
    L(cuDeviceGetName, "cuDeviceGetName");
    L(cuDeviceGetAttribute, "cuDeviceGetAttribute");
    L(cuDeviceTotalMem, "cuDeviceTotalMem_v2");
    L(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    L(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    L(cuCtxSetCurrent, "cuCtxSetCurrent");
    L(cuMemGetInfo, "cuMemGetInfo_v2");
    L(cuMemAlloc, "cuMemAlloc_v2");
    L(cuMemFree, "cuMemFree_v2");
    L(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    L(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    L(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    L(cuMemsetD32Async, "cuMemsetD32Async");
    L(cuModuleLoadData, "cuModuleLoadData");
    L(cuModuleUnload, "cuModuleUnload");
    L(cuModuleGetFunction, "cuModuleGetFunction");
    L(cuLaunchKernel, "cuLaunchKernel");
    L(cuStreamCreate, "cuStreamCreate");
    L(cuStreamDestroy, "cuStreamDestroy_v2");
    L(cuStreamSynchronize, "cuStreamSynchronize");
    L(cuEventCreate, "cuEventCreate");
    L(cuEventDestroy, "cuEventDestroy_v2");
    L(cuEventRecord, "cuEventRecord");
    L(cuEventElapsedTime, "cuEventElapsedTime");
    L(cuStreamBeginCapture, "cuStreamBeginCapture_v2");
    L(cuStreamEndCapture, "cuStreamEndCapture");
    L(cuGraphInstantiate, "cuGraphInstantiateWithFlags");
    L(cuGraphLaunch, "cuGraphLaunch");
    L(cuGraphExecDestroy, "cuGraphExecDestroy");
    L(cuGraphDestroy, "cuGraphDestroy");
    L(cuGetErrorName, "cuGetErrorName");
#undef L
    if (!w.empty()) return "no CUDA device: " + w + " (driver too old?)";
    CUresult r = cuInit(0);
    if (r != CUDA_SUCCESS) return "no CUDA device: cuInit failed (" + err(r) + ")";
    int n = 0;
    if (cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) return "no CUDA device: the driver reports no GPU";
    (void)why;
    return "";
  }
  std::string err(CUresult r) {
    const char* name = nullptr;
    if (cuGetErrorName) cuGetErrorName(r, &name);
    return name ? name : "CUDA error " + std::to_string(int(r));
  }
  void check(CUresult r, const char* call, const std::string& what = "") {
    if (r != CUDA_SUCCESS)
      throw Error(std::string("CUDA: ") + call + (what.empty() ? "" : " (" + what + ")") + " failed: " + err(r));
  }
  void open_blas() {
    for (const char* name : {"libcublas.so", "libcublas.so.13", "libcublas.so.12"}) {
      blas_lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (blas_lib) break;
    }
    if (!blas_lib) return;
    cublasCreate = load<decltype(cublasCreate)>(blas_lib, "cublasCreate_v2", nullptr);
    cublasDestroy = load<decltype(cublasDestroy)>(blas_lib, "cublasDestroy_v2", nullptr);
    cublasSetStream = load<decltype(cublasSetStream)>(blas_lib, "cublasSetStream_v2", nullptr);
    cublasGemmEx = load<decltype(cublasGemmEx)>(blas_lib, "cublasGemmEx", nullptr);
    if (!cublasCreate || !cublasSetStream || !cublasGemmEx || cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) blas = nullptr;
  }
};

bool CudaApi::device_available(std::string* why) {
  Impl probe;
  std::string w = probe.open(why);
  if (why) *why = w;
  if (probe.lib) dlclose(probe.lib);
  return w.empty();
}

CudaApi::CudaApi(int ordinal) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  std::string why = m.open(nullptr);
  if (!why.empty()) throw Error(why);
  m.check(m.cuDeviceGet(&m.dev, ordinal), "cuDeviceGet");
  char name[256] = {0};
  m.cuDeviceGetName(name, sizeof name - 1, m.dev);
  int major = 0, minor = 0, sms = 0;
  m.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, m.dev);
  m.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, m.dev);
  m.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, m.dev);
  size_t total = 0;
  m.cuDeviceTotalMem(&total, m.dev);
  m.check(m.cuDevicePrimaryCtxRetain(&m.ctx, m.dev), "cuDevicePrimaryCtxRetain");
  m.check(m.cuCtxSetCurrent(m.ctx), "cuCtxSetCurrent");
  size_t free_b = 0, total_b = 0;
  m.cuMemGetInfo(&free_b, &total_b);
  m.info = {ordinal, name, major * 10 + minor, sms, double(total) / 1e9, double(free_b) / 1e9};
  m.open_blas();
}

CudaApi::~CudaApi() {
  Impl& m = *impl_;
  if (!m.lib) return;
  if (m.blas && m.cublasDestroy) m.cublasDestroy(m.blas);
  for (CUevent e : m.events) m.cuEventDestroy(e);
  for (CUstream s : m.streams) m.cuStreamDestroy(s);
  for (CUmodule mod : m.modules) m.cuModuleUnload(mod);
  if (m.ctx) m.cuDevicePrimaryCtxRelease(m.dev);
  if (m.blas_lib) dlclose(m.blas_lib);
  dlclose(m.lib);
}

const CudaDeviceInfo& CudaApi::device() const { return impl_->info; }

CuDevicePtr CudaApi::alloc(size_t bytes, const char* what) {
  CUdeviceptr p = 0;
  CUresult r = impl_->cuMemAlloc(&p, std::max<size_t>(bytes, 256));
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    throw OutOfDeviceMemory(std::string("CUDA: out of device memory allocating ") + std::to_string(bytes / 1000000) + " MB for " + what);
  impl_->check(r, "cuMemAlloc", what);
  return p;
}
void CudaApi::free(CuDevicePtr p) {
  if (p) impl_->cuMemFree(p);
}
void CudaApi::upload(CuDevicePtr dst, const void* src, size_t bytes, CuStream s) {
  impl_->check(impl_->cuMemcpyHtoDAsync(dst, src, bytes, static_cast<CUstream>(s)), "cuMemcpyHtoDAsync");
  if (!s) impl_->check(impl_->cuStreamSynchronize(nullptr), "cuStreamSynchronize");
}
void CudaApi::download(void* dst, CuDevicePtr src, size_t bytes) {
  impl_->check(impl_->cuMemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH");
}
void CudaApi::memset32(CuDevicePtr p, uint32_t v, size_t words, CuStream s) {
  impl_->check(impl_->cuMemsetD32Async(p, v, words, static_cast<CUstream>(s)), "cuMemsetD32Async");
}
void CudaApi::copy_d2d(CuDevicePtr dst, CuDevicePtr src, size_t bytes, CuStream s) {
  impl_->check(impl_->cuMemcpyDtoDAsync(dst, src, bytes, static_cast<CUstream>(s)), "cuMemcpyDtoDAsync");
}
CuModule CudaApi::load_module(const std::string& cubin, const std::string& name) {
  CUmodule m = nullptr;
  impl_->check(impl_->cuModuleLoadData(&m, cubin.data()), "cuModuleLoadData", name);
  impl_->modules.push_back(m);
  return m;
}
CuFunction CudaApi::function(CuModule m, const std::string& symbol) {
  CUfunction f = nullptr;
  impl_->check(impl_->cuModuleGetFunction(&f, static_cast<CUmodule>(m), symbol.c_str()), "cuModuleGetFunction", symbol);
  return f;
}
void CudaApi::launch(CuFunction f, unsigned gx, unsigned gy, unsigned gz, unsigned block, CuStream s, void** params,
                     const std::string& name) {
  impl_->check(impl_->cuLaunchKernel(static_cast<CUfunction>(f), gx, gy, gz, block, 1, 1, 0, static_cast<CUstream>(s),
                                     params, nullptr),
               "cuLaunchKernel", name);
}
CuStream CudaApi::stream() {
  CUstream s = nullptr;
  impl_->check(impl_->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  impl_->streams.push_back(s);
  return s;
}
void CudaApi::sync(CuStream s) { impl_->check(impl_->cuStreamSynchronize(static_cast<CUstream>(s)), "cuStreamSynchronize"); }
CuEvent CudaApi::event() {
  CUevent e = nullptr;
  impl_->check(impl_->cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  impl_->events.push_back(e);
  return e;
}
void CudaApi::record(CuEvent e, CuStream s) {
  impl_->check(impl_->cuEventRecord(static_cast<CUevent>(e), static_cast<CUstream>(s)), "cuEventRecord");
}
float CudaApi::elapsed_ms(CuEvent a, CuEvent b) {
  float ms = 0;
  impl_->check(impl_->cuEventElapsedTime(&ms, static_cast<CUevent>(a), static_cast<CUevent>(b)), "cuEventElapsedTime");
  return ms;
}
void CudaApi::begin_capture(CuStream s) {
  impl_->check(impl_->cuStreamBeginCapture(static_cast<CUstream>(s), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
               "cuStreamBeginCapture");
}
CuGraphExec CudaApi::end_capture(CuStream s) {
  CUgraph g = nullptr;
  impl_->check(impl_->cuStreamEndCapture(static_cast<CUstream>(s), &g), "cuStreamEndCapture");
  CUgraphExec e = nullptr;
  impl_->check(impl_->cuGraphInstantiate(&e, g, 0), "cuGraphInstantiate");
  impl_->cuGraphDestroy(g);
  return e;
}
void CudaApi::graph_launch(CuGraphExec g, CuStream s) {
  impl_->check(impl_->cuGraphLaunch(static_cast<CUgraphExec>(g), static_cast<CUstream>(s)), "cuGraphLaunch");
}
void CudaApi::graph_destroy(CuGraphExec g) {
  if (g) impl_->cuGraphExecDestroy(static_cast<CUgraphExec>(g));
}
bool CudaApi::blas_available() const { return impl_->blas != nullptr; }
void CudaApi::gemm_nt(CuStream s, bool bf16, int64_t M, int64_t N, int64_t K, CuDevicePtr A, CuDevicePtr B,
                      CuDevicePtr C, float beta) {
  Impl& m = *impl_;
  if (!m.blas) throw Error("cuBLAS is not available (libcublas not found)");
  m.cublasSetStream(m.blas, static_cast<cudaStream_t>(s));
  const float alpha = 1.0f;
  cudaDataType t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  // Row-major C[M, N] = A[M, K] B[N, K]^T is column-major C^T = B^T... : op(B) = T.
  cublasStatus_t r = m.cublasGemmEx(m.blas, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &alpha,
                                    reinterpret_cast<const void*>(B), t, int(K), reinterpret_cast<const void*>(A), t,
                                    int(K), &beta, reinterpret_cast<void*>(C), t, int(N), CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
  if (r != CUBLAS_STATUS_SUCCESS) throw Error("cuBLAS: cublasGemmEx failed with status " + std::to_string(int(r)));
}

#else  // no CUDA toolkit at build time

struct CudaApi::Impl {
  CudaDeviceInfo info;
};
bool CudaApi::device_available(std::string* why) {
  if (why) *why = "no CUDA device: lathe was built without the CUDA toolkit";
  return false;
}
CudaApi::CudaApi(int) { throw Error("no CUDA device: lathe was built without the CUDA toolkit"); }
CudaApi::~CudaApi() = default;
const CudaDeviceInfo& CudaApi::device() const { return impl_->info; }
CuDevicePtr CudaApi::alloc(size_t, const char*) { return 0; }
void CudaApi::free(CuDevicePtr) {}
void CudaApi::upload(CuDevicePtr, const void*, size_t, CuStream) {}
void CudaApi::download(void*, CuDevicePtr, size_t) {}
void CudaApi::memset32(CuDevicePtr, uint32_t, size_t, CuStream) {}
void CudaApi::copy_d2d(CuDevicePtr, CuDevicePtr, size_t, CuStream) {}
CuModule CudaApi::load_module(const std::string&, const std::string&) { return nullptr; }
CuFunction CudaApi::function(CuModule, const std::string&) { return nullptr; }
void CudaApi::launch(CuFunction, unsigned, unsigned, unsigned, unsigned, CuStream, void**, const std::string&) {}
CuStream CudaApi::stream() { return nullptr; }
void CudaApi::sync(CuStream) {}
CuEvent CudaApi::event() { return nullptr; }
void CudaApi::record(CuEvent, CuStream) {}
float CudaApi::elapsed_ms(CuEvent, CuEvent) { return 0; }
void CudaApi::begin_capture(CuStream) {}
CuGraphExec CudaApi::end_capture(CuStream) { return nullptr; }
void CudaApi::graph_launch(CuGraphExec, CuStream) {}
void CudaApi::graph_destroy(CuGraphExec) {}
bool CudaApi::blas_available() const { return false; }
void CudaApi::gemm_nt(CuStream, bool, int64_t, int64_t, int64_t, CuDevicePtr, CuDevicePtr, CuDevicePtr, float) {}

#endif

}  // namespace lathe
