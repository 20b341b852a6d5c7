// ==== node embed (embedding)
//   entry k_e6d5bcab78cfe926 grid rows block 128 p 0,0,0
// kernel embed = embedding (embedding)
//   b[0] %tokens i32[B, S]
//   b[1] @tok_embeddings f32[512, 128]
//   b[2] -> %x0 bf16[B, S, 128]
extern "C" __global__ void __launch_bounds__(128) k_e6d5bcab78cfe926(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  lk::embedding_kernel<T, 0, 128, 0>(st, (const int*)b[0], b[1], nullptr, (T*)b[2]);
}


// ==== node l0.qkv (norm_matmul_x3) scratch 8192 B
//   entry k_c1735e4f1e55629e_gemv grid warps block 256 p 256,0,0 max_rows 8
//   entry k_c1735e4f1e55629e_gemm grid gemm_tiles block 128 p 4,0,0
//   entry k_c1735e4f1e55629e_norm grid rows block 256 p 0,0,0
//   prefill via cuBLAS: 3 GEMM(s) K 128 N 128 64 64 epilogue 0 norm entry 2 silu entry -1 scratch offsets 0,-1,-1
// kernel l0.qkv = matmul (norm_matmul_x3)
// absorbs: l0.wq:matmul l0.wk:matmul l0.wv:matmul l0.attn_norm:rms_norm
//   b[0] %x0 bf16[B, S, 128]
//   b[1] @layers.0.attn_norm f32[128]
//   b[2] @layers.0.wq bf16[128, 128]
//   b[3] @layers.0.wk bf16[64, 128]
//   b[4] @layers.0.wv bf16[64, 128]
//   b[5] -> %l0.q bf16[B, S, 128]
//   b[6] -> %l0.k bf16[B, S, 64]
//   b[7] -> %l0.v bf16[B, S, 64]
extern "C" __global__ void __launch_bounds__(256, 2) k_c1735e4f1e55629e_gemv(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {3, {128, 64, 64, 0}, 1, 0, 1e-05f, 0};
  const void* W[] = {b[2], b[3], b[4]};
  const void* S[] = {nullptr, nullptr, nullptr};
  void* const O[] = {b[5], b[6], b[7]};
  lk::gemv_kernel<T, 2, 128, 0, 8, true>(st, d, (const T*)b[0], (const T*)b[1], W, S, O, nullptr);
}

extern "C" __global__ void __launch_bounds__(128) k_c1735e4f1e55629e_gemm(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {3, {128, 64, 64, 0}, 1, 0, 1e-05f, 0};
  const void* W[] = {b[2], b[3], b[4]};
  const void* S[] = {nullptr, nullptr, nullptr};
  void* const O[] = {b[5], b[6], b[7]};
  lk::gemm_kernel<T, 2, 128, 0>(st, d, (const T*)b[0], (const T*)b[1], W, S, O, nullptr);
}

extern "C" __global__ void __launch_bounds__(256) k_c1735e4f1e55629e_norm(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  lk::rms_norm_kernel<T, 128>(st, (const T*)b[0], (const T*)b[1], (T*)((unsigned char*)st->scratch + 0), 1e-05f);
}


// ==== node l0.rope_kvwrite (rope_kvwrite)
//   entry k_61756ecd75f63050 grid rows_x block 256 p 1,0,0
// kernel l0.rope_kvwrite = rope_kvwrite (rope_kvwrite)
// absorbs: l0.rope_q:rope l0.rope_k:rope l0.kv_write:kv_write
//   b[0] %l0.q bf16[B, S, 128]
//   b[1] %l0.k bf16[B, S, 64]
//   b[2] %l0.v bf16[B, S, 64]
//   b[3] -> %l0.q_rot bf16[B, S, 128]
extern "C" __global__ void __launch_bounds__(256) k_61756ecd75f63050(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  lk::rope_kvwrite_kernel<T, 4, 0, 2, 2, 24, 16, 2, 4, 32>(st, int(layer), (const T*)b[0], (const T*)b[1], (const T*)b[2], (T*)b[3], 10000.0);
}


// ==== node l0.flash_attention (flash_attention)
//   entry k_6bebcc84316f9ce2 grid flash block 128 p 4,64,0
// kernel l0.flash_attention = flash_attention (flash_attention)
// absorbs: l0.kv_read:kv_read l0.qk:qk l0.mask:mask l0.softmax:softmax l0.pv:pv
//   b[0] %l0.q_rot bf16[B, S, 128]
//   b[1] %l0.kv int4[B, T, 2, 2, 32]
//   b[2] -> %l0.attn bf16[B, S, 128]
extern "C" __global__ void __launch_bounds__(128, 1) k_6bebcc84316f9ce2(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  lk::flash_attention_kernel<T, 4, 0, 2, 2, 24, 16, 2, 4, 32>(st, int(layer), (const T*)b[0], (T*)b[2], 0.176776695f);
}


// ==== node l0.wo (matmul_residual)
//   entry k_a60f54e8331e58e8_gemv grid warps block 256 p 128,0,0 max_rows 8
//   entry k_a60f54e8331e58e8_gemm grid gemm_tiles block 128 p 2,0,0
//   prefill via cuBLAS: 1 GEMM(s) K 128 N 128 epilogue 1 norm entry -1 silu entry -1 scratch offsets -1,-1,-1
// kernel l0.wo = matmul (matmul_residual)
// absorbs: l0.wo:matmul l0.attn_add:add
//   b[0] %l0.attn bf16[B, S, 128]
//   b[1] @layers.0.wo bf16[128, 128]
//   b[2] %x0 bf16[B, S, 128]
//   b[3] -> %l0.x_attn bf16[B, S, 128]
extern "C" __global__ void __launch_bounds__(256, 2) k_a60f54e8331e58e8_gemv(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {1, {128, 0, 0, 0}, 0, 1, 1e-05f, 0};
  const void* W[] = {b[1]};
  const void* S[] = {nullptr};
  void* const O[] = {b[3]};
  lk::gemv_kernel<T, 2, 128, 0, 8, false>(st, d, (const T*)b[0], nullptr, W, S, O, (const T*)b[2]);
}

extern "C" __global__ void __launch_bounds__(128) k_a60f54e8331e58e8_gemm(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {1, {128, 0, 0, 0}, 0, 1, 1e-05f, 0};
  const void* W[] = {b[1]};
  const void* S[] = {nullptr};
  void* const O[] = {b[3]};
  lk::gemm_kernel<T, 2, 128, 0>(st, d, (const T*)b[0], nullptr, W, S, O, (const T*)b[2]);
}


// ==== node l0.gate_up (norm_matmul_gate_up_silu) scratch 57344 B
//   entry k_f23ae93c24577001_gemv grid warps block 256 p 384,0,0 max_rows 8
//   entry k_f23ae93c24577001_gemm grid gemm_tiles block 128 p 6,0,0
//   entry k_f23ae93c24577001_norm grid rows block 256 p 0,0,0
//   entry k_f23ae93c24577001_silu_mul grid elements block 256 p 384,0,0
//   prefill via cuBLAS: 2 GEMM(s) K 128 N 384 384 epilogue 2 norm entry 2 silu entry 3 scratch offsets 0,8192,32768
// kernel l0.gate_up = matmul (norm_matmul_gate_up_silu)
// absorbs: l0.w_gate:matmul l0.w_up:matmul l0.ffn_norm:rms_norm l0.silu:silu l0.mul:mul
//   b[0] %l0.x_attn bf16[B, S, 128]
//   b[1] @layers.0.ffn_norm f32[128]
//   b[2] @layers.0.w_gate bf16[384, 128]
//   b[3] @layers.0.w_up bf16[384, 128]
//   b[4] -> %l0.ffn_act bf16[B, S, 384]
extern "C" __global__ void __launch_bounds__(256, 2) k_f23ae93c24577001_gemv(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {2, {384, 384, 0, 0}, 1, 2, 1e-05f, 0};
  const void* W[] = {b[2], b[3]};
  const void* S[] = {nullptr, nullptr};
  void* const O[] = {b[4]};
  lk::gemv_kernel<T, 2, 128, 0, 8, true>(st, d, (const T*)b[0], (const T*)b[1], W, S, O, nullptr);
}

extern "C" __global__ void __launch_bounds__(128) k_f23ae93c24577001_gemm(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {2, {384, 384, 0, 0}, 1, 2, 1e-05f, 0};
  const void* W[] = {b[2], b[3]};
  const void* S[] = {nullptr, nullptr};
  void* const O[] = {b[4]};
  lk::gemm_kernel<T, 2, 128, 0>(st, d, (const T*)b[0], (const T*)b[1], W, S, O, nullptr);
}

extern "C" __global__ void __launch_bounds__(256) k_f23ae93c24577001_norm(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  lk::rms_norm_kernel<T, 128>(st, (const T*)b[0], (const T*)b[1], (T*)((unsigned char*)st->scratch + 0), 1e-05f);
}

extern "C" __global__ void __launch_bounds__(256) k_f23ae93c24577001_silu_mul(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  lk::elementwise_kernel<T, 3, 384>(st, (T*)((unsigned char*)st->scratch + 8192), (T*)((unsigned char*)st->scratch + 32768), (T*)b[4]);
}


// ==== node l0.w_down (matmul_residual)
//   entry k_3d03d91e27f4950c_gemv grid warps block 256 p 128,0,0 max_rows 8
//   entry k_3d03d91e27f4950c_gemm grid gemm_tiles block 128 p 2,0,0
//   prefill via cuBLAS: 1 GEMM(s) K 384 N 128 epilogue 1 norm entry -1 silu entry -1 scratch offsets -1,-1,-1
// kernel l0.w_down = matmul (matmul_residual)
// absorbs: l0.w_down:matmul l0.ffn_add:add
//   b[0] %l0.ffn_act bf16[B, S, 384]
//   b[1] @layers.0.w_down bf16[128, 384]
//   b[2] %l0.x_attn bf16[B, S, 128]
//   b[3] -> %x1 bf16[B, S, 128]
extern "C" __global__ void __launch_bounds__(256, 2) k_3d03d91e27f4950c_gemv(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {1, {128, 0, 0, 0}, 0, 1, 1e-05f, 0};
  const void* W[] = {b[1]};
  const void* S[] = {nullptr};
  void* const O[] = {b[3]};
  lk::gemv_kernel<T, 2, 384, 0, 8, false>(st, d, (const T*)b[0], nullptr, W, S, O, (const T*)b[2]);
}

extern "C" __global__ void __launch_bounds__(128) k_3d03d91e27f4950c_gemm(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {1, {128, 0, 0, 0}, 0, 1, 1e-05f, 0};
  const void* W[] = {b[1]};
  const void* S[] = {nullptr};
  void* const O[] = {b[3]};
  lk::gemm_kernel<T, 2, 384, 0>(st, d, (const T*)b[0], nullptr, W, S, O, (const T*)b[2]);
}


// ==== node l1.qkv (norm_matmul_x3) scratch 8192 B
//   entry k_c1735e4f1e55629e_gemv grid warps block 256 p 256,0,0 max_rows 8
//   entry k_c1735e4f1e55629e_gemm grid gemm_tiles block 128 p 4,0,0
//   entry k_c1735e4f1e55629e_norm grid rows block 256 p 0,0,0
//   prefill via cuBLAS: 3 GEMM(s) K 128 N 128 64 64 epilogue 0 norm entry 2 silu entry -1 scratch offsets 0,-1,-1
// ==== node l1.rope_kvwrite (rope_kvwrite)
//   entry k_61756ecd75f63050 grid rows_x block 256 p 1,0,0
// ==== node l1.flash_attention (flash_attention)
//   entry k_6bebcc84316f9ce2 grid flash block 128 p 4,64,0
// ==== node l1.wo (matmul_residual)
//   entry k_a60f54e8331e58e8_gemv grid warps block 256 p 128,0,0 max_rows 8
//   entry k_a60f54e8331e58e8_gemm grid gemm_tiles block 128 p 2,0,0
//   prefill via cuBLAS: 1 GEMM(s) K 128 N 128 epilogue 1 norm entry -1 silu entry -1 scratch offsets -1,-1,-1
// ==== node l1.gate_up (norm_matmul_gate_up_silu) scratch 57344 B
//   entry k_f23ae93c24577001_gemv grid warps block 256 p 384,0,0 max_rows 8
//   entry k_f23ae93c24577001_gemm grid gemm_tiles block 128 p 6,0,0
//   entry k_f23ae93c24577001_norm grid rows block 256 p 0,0,0
//   entry k_f23ae93c24577001_silu_mul grid elements block 256 p 384,0,0
//   prefill via cuBLAS: 2 GEMM(s) K 128 N 384 384 epilogue 2 norm entry 2 silu entry 3 scratch offsets 0,8192,32768
// ==== node l1.w_down (matmul_residual)
//   entry k_3d03d91e27f4950c_gemv grid warps block 256 p 128,0,0 max_rows 8
//   entry k_3d03d91e27f4950c_gemm grid gemm_tiles block 128 p 2,0,0
//   prefill via cuBLAS: 1 GEMM(s) K 384 N 128 epilogue 1 norm entry -1 silu entry -1 scratch offsets -1,-1,-1
// ==== node lm_head (norm_lm_head)
//   entry k_696d1ea97e8104d5_gemv grid warps block 256 p 512,0,0 max_rows 8
//   entry k_696d1ea97e8104d5_gemm grid gemm_tiles block 128 p 8,1,0
//   entry k_696d1ea97e8104d5_gemv_mma grid warps block 256 p 256,0,0 max_rows 8
// kernel lm_head = lm_head (norm_lm_head)
// absorbs: lm_head:lm_head final_norm:rms_norm
//   b[0] %x2 bf16[B, S, 128]
//   b[1] @norm f32[128]
//   b[2] @lm_head bf16[512, 128]
//   b[3] -> %logits f32[B, 512]
extern "C" __global__ void __launch_bounds__(256, 2) k_696d1ea97e8104d5_gemv(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {1, {512, 0, 0, 0}, 1, 0, 1e-05f, 1};
  const void* W[] = {b[2]};
  const void* S[] = {nullptr};
  void* const O[] = {b[3]};
  lk::gemv_kernel<T, 2, 128, 0, 8, true>(st, d, (const T*)b[0], (const T*)b[1], W, S, O, nullptr);
}

extern "C" __global__ void __launch_bounds__(128) k_696d1ea97e8104d5_gemm(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {1, {512, 0, 0, 0}, 1, 0, 1e-05f, 1};
  const void* W[] = {b[2]};
  const void* S[] = {nullptr};
  void* const O[] = {b[3]};
  lk::gemm_kernel<T, 2, 128, 0>(st, d, (const T*)b[0], (const T*)b[1], W, S, O, nullptr);
}

extern "C" __global__ void __launch_bounds__(256) k_696d1ea97e8104d5_gemv_mma(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {1, {512, 0, 0, 0}, 1, 0, 1e-05f, 1};
  const void* W[] = {b[2]};
  const void* S[] = {nullptr};
  void* const O[] = {b[3]};
  lk::gemv_mma_kernel<T, 2, 128, 0, true>(st, d, (const T*)b[0], (const T*)b[1], W, S, O, nullptr);
}


// ==== node sample (sample)
//   entry k_3f5dbdbaa9c4e57d grid seqs block 256 p 0,0,0
// kernel sample = sample (sample)
//   b[0] %logits f32[B, 512]
//   b[1] -> %next_tokens i32[B]
extern "C" __global__ void __launch_bounds__(256) k_3f5dbdbaa9c4e57d(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  lk::argmax_kernel<512>(st, (const float*)b[0], (int*)b[1]);
}


