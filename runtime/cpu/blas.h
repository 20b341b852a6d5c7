// The f32 GEMM the CPU kernels call (LatheCtx::sgemm_nt): OpenBLAS when lathe was
// built with it, a blocked loop nest otherwise.
#pragma once

namespace lathe {

// C[M, N] = A[M, K] B[N, K]^T + beta C, row-major. Single-threaded: kernels call it
// from every worker of their own thread pool.
void sgemm_nt(long M, long N, long K, const float* A, long lda, const float* B, long ldb, float* C, long ldc,
              float beta);
const char* blas_name();

}  // namespace lathe
