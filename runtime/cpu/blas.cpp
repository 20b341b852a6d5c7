#include "runtime/cpu/blas.h"

#if LATHE_HAVE_BLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

namespace lathe {

#if LATHE_HAVE_BLAS
namespace {
struct SingleThreaded {
  SingleThreaded() { openblas_set_num_threads(1); }
};
}  // namespace

void sgemm_nt(long M, long N, long K, const float* A, long lda, const float* B, long ldb, float* C, long ldc,
              float beta) {
  static SingleThreaded once;  // our pool parallelizes; OpenBLAS must not add threads
  (void)once;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(N), int(K), 1.0f, A, int(lda), B, int(ldb), beta,
              C, int(ldc));
}
const char* blas_name() { return "OpenBLAS"; }
#else
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
