#include "runtime/cpu/blas.h"

#include <mutex>
#include <string>

#include "ir/assert.h"

#if LATHE_HAVE_BLAS
#include <cblas.h>
#include <dlfcn.h>

#include <cstdlib>
#endif

namespace lathe {

#if LATHE_HAVE_BLAS
namespace {
using SgemmFn = decltype(&cblas_sgemm);
SgemmFn g_sgemm = nullptr;
std::once_flag g_once;
std::string g_failure;

void load() {
  // Our pool parallelizes over rows: OpenBLAS must not start threads of its own. It
  // reads its thread count when it loads and its idle threads spin on the cores our
  // workers use, so the count is set before dlopen, and again through the API.
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  std::string tried;
  for (const char* path : {"libopenblas.so.0", LATHE_OPENBLAS_PATH}) {
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      tried += std::string("\n  ") + path + ": " + (e ? e : "dlopen failed");
      continue;
    }
    auto sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm"));
    if (!sgemm) {
      tried += std::string("\n  ") + path + ": no cblas_sgemm";
      continue;
    }
    if (auto set = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"))) set(1);
    g_sgemm = sgemm;
    return;
  }
  g_failure = "the CPU backend's f32 GEMMs need OpenBLAS, which could not be loaded; tried:" + tried;
}
}  // namespace

void blas_load() {
  std::call_once(g_once, load);
  if (!g_sgemm) throw Error(g_failure);
}

void sgemm_nt(long M, long N, long K, const float* A, long lda, const float* B, long ldb, float* C, long ldc,
              float beta) {
  std::call_once(g_once, load);  // a no-op after blas_load(), which sessions call first
  LATHE_ASSERT(g_sgemm != nullptr, "sgemm_nt called without OpenBLAS (blas_load() throws the reason)");
  g_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(N), int(K), 1.0f, A, int(lda), B, int(ldb), beta,
          C, int(ldc));
}
const char* blas_name() { return "OpenBLAS"; }
#else
void blas_load() {}
void sgemm_nt(long M, long N, long K, const float* A, long lda, const float* B, long ldb, float* C, long ldc,
              float beta) {
  for (long i = 0; i < M; ++i)
    for (long j = 0; j < N; ++j) {
      float s = 0;
      for (long k = 0; k < K; ++k) s += A[i * lda + k] * B[j * ldb + k];
      C[i * ldc + j] = s + (beta != 0 ? beta * C[i * ldc + j] : 0.0f);
    }
}
const char* blas_name() { return "built-in loops (no BLAS found at configure time)"; }
#endif

}  // namespace lathe
