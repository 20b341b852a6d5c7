// The f32 GEMM the CPU kernels call (LatheCtx::sgemm_nt): OpenBLAS when lathe was
// built with it, a blocked loop nest otherwise. OpenBLAS is dlopen()ed by blas_load(),
// not linked, so commands that never run a kernel do not load it (nor start its threads).
#pragma once

namespace lathe {

// C[M, N] = A[M, K] B[N, K]^T + beta C, row-major. Single-threaded: kernels call it
// from every worker of their own thread pool.
void sgemm_nt(long M, long N, long K, const float* A, long lda, const float* B, long ldb, float* C, long ldc,
              float beta);
const char* blas_name();
// Loads OpenBLAS (once per process, single-threaded: call it before kernels run).
// Throws lathe::Error saying where it looked if it cannot be loaded.
void blas_load();

}  // namespace lathe
