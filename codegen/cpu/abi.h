/* The ABI between generated CPU kernels and the runtime. Plain C so it can be pasted
   into every generated translation unit verbatim (codegen embeds this file's text)
   and included by the runtime; the two can never disagree.

   A kernel is   void k_<hash>(const LatheCtx* ctx, const LatheStep* step,
                               void* const* bufs, const long* iargs);
   bufs: for each node input that is not the KV state, its data pointer and, for a
   quantized weight, its scales pointer next; then each output's data pointer (the
   KV cache view a kv_write returns is not passed). iargs[0] is the layer index. */
#ifndef LATHE_CPU_ABI_H
#define LATHE_CPU_ABI_H

typedef struct LatheSeq {
  int slot;  /* KV-cache slot of the sequence */
  int past;  /* tokens already in the cache before this step */
  int len;   /* new tokens this step (rows) */
  int row0;  /* first row of the sequence in the packed activations */
} LatheSeq;

typedef struct LatheStep {
  int n_seq;                /* sequences this step (the B index of [B, ...] buffers) */
  int n_rows;               /* new tokens over all sequences (rows of [B, S, ...] buffers) */
  const LatheSeq* seq;      /* [n_seq] */
  const int* row_seq;       /* [n_rows] sequence index of each row */
  const int* row_pos;       /* [n_rows] position of each row in its sequence */
  const int* block_table;   /* paged KV: [slots][blocks_per_slot] physical block ids */
  int blocks_per_slot;
} LatheStep;

typedef void (*LatheBody)(void* closure, long begin, long end, int thread);

typedef struct LatheCtx {
  void* pool;
  /* Runs body over [0, n) in chunks of at least `grain` on the pool; returns when done. */
  void (*parallel_for)(void* pool, long n, long grain, LatheBody body, void* closure);
  int threads;
  float* const* scratch;    /* [threads] per-thread scratch, scratch_floats each */
  long scratch_floats;
  float* shared;            /* kernel-wide scratch, shared_floats */
  long shared_floats;
  /* C[M, N] = A[M, K] B[N, K]^T + beta C (row-major, f32). */
  void (*sgemm_nt)(long M, long N, long K, const float* A, long lda, const float* B, long ldb, float* C,
                   long ldc, float beta);
  unsigned char* kv;        /* KV cache payload */
  unsigned short* kv_scales; /* f16 scale per cached (token, head) vector (integer KV) */
} LatheCtx;

typedef void (*LatheKernel)(const LatheCtx* ctx, const LatheStep* step, void* const* bufs, const long* iargs);

#endif
