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


// ==== node l0.qkv (norm_matmul_x3) scratch 66048 B
//   entry k_415808565b5360a4_gemv grid warps block 256 p 256,0,0 max_rows 8
//   entry k_415808565b5360a4_gemm grid gemm_tiles block 128 p 4,0,0
//   entry k_415808565b5360a4_norm grid rows block 256 p 0,0,0
//   entry k_415808565b5360a4_dequant grid warps block 256 p 256,0,0
//   prefill via cuBLAS: 3 GEMM(s) K 128 N 128 64 64 epilogue 0 norm entry 2 silu entry -1 scratch offsets 0,-1,-1 dequant entry 3 weight copies at 512 33280 49664
// kernel l0.qkv = matmul (norm_matmul_x3)
// absorbs: l0.wq:matmul l0.wk:matmul l0.wv:matmul l0.attn_norm:rms_norm
//   b[0] %x0 bf16[B, S, 128]
//   b[1] @layers.0.attn_norm f32[128]
//   b[2] @layers.0.wq int8[128, 128]
//   b[3] @layers.0.wq scales
//   b[4] @layers.0.wk int8[64, 128]
//   b[5] @layers.0.wk scales
//   b[6] @layers.0.wv int8[64, 128]
//   b[7] @layers.0.wv scales
//   b[8] -> %l0.q bf16[B, S, 128]
//   b[9] -> %l0.k bf16[B, S, 64]
//   b[10] -> %l0.v bf16[B, S, 64]
extern "C" __global__ void __launch_bounds__(256, 2) k_415808565b5360a4_gemv(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {3, {128, 64, 64, 0}, 1, 0, 1e-05f, 0};
  const void* W[] = {b[2], b[4], b[6]};
  const void* S[] = {b[3], b[5], b[7]};
  void* const O[] = {b[8], b[9], b[10]};
  lk::gemv_kernel<T, 3, 128, 0, 8, true>(st, d, (const T*)b[0], (const T*)b[1], W, S, O, nullptr);
}

extern "C" __global__ void __launch_bounds__(128) k_415808565b5360a4_gemm(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {3, {128, 64, 64, 0}, 1, 0, 1e-05f, 0};
  const void* W[] = {b[2], b[4], b[6]};
  const void* S[] = {b[3], b[5], b[7]};
  void* const O[] = {b[8], b[9], b[10]};
  lk::gemm_kernel<T, 3, 128, 0>(st, d, (const T*)b[0], (const T*)b[1], W, S, O, nullptr);
}

extern "C" __global__ void __launch_bounds__(256) k_415808565b5360a4_norm(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  lk::rms_norm_kernel<T, 128>(st, (const T*)b[0], (const T*)b[1], (T*)((unsigned char*)st->scratch + 0), 1e-05f);
}

extern "C" __global__ void __launch_bounds__(256) k_415808565b5360a4_dequant(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const void* W[] = {b[2], b[4], b[6]};
  const void* S[] = {b[3], b[5], b[7]};
  const long n[] = {128, 64, 64};
  const long off[] = {512, 33280, 49664};
  lk::dequant_kernel<T, 3, 128, 0>(st, W, S, n, off, 3);
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


// ==== node l0.decode_attention (decode_attention) scratch 1088 B counters 4
//   entry k_db4fa29570934b83 grid decode_splits block 128 p 2,1,0
// kernel l0.decode_attention = decode_attention (decode_attention)
// absorbs: l0.kv_read:kv_read l0.qk:qk l0.softmax:softmax l0.pv:pv
//   b[0] %l0.q_rot bf16[B, S, 128]
//   b[1] %l0.kv int4[B, T, 2, 2, 32]
//   b[2] -> %l0.attn bf16[B, S, 128]
extern "C" __global__ void __launch_bounds__(128, 1) k_db4fa29570934b83(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  lk::decode_attention_kernel<T, 4, 0, 2, 2, 24, 16, 2, 4, 32, 1>(st, int(layer), (const T*)b[0], (T*)b[2], 0.176776695f);
}


// ==== node l0.wo (matmul_residual) scratch 32768 B
//   entry k_2bb94ac9207bd6ce_gemv grid warps block 256 p 128,0,0 max_rows 8
//   entry k_2bb94ac9207bd6ce_gemm grid gemm_tiles block 128 p 2,0,0
//   entry k_2bb94ac9207bd6ce_dequant grid warps block 256 p 128,0,0
//   prefill via cuBLAS: 1 GEMM(s) K 128 N 128 epilogue 1 norm entry -1 silu entry -1 scratch offsets -1,-1,-1 dequant entry 2 weight copies at 0
// kernel l0.wo = matmul (matmul_residual)
// absorbs: l0.wo:matmul l0.attn_add:add
//   b[0] %l0.attn bf16[B, S, 128]
//   b[1] @layers.0.wo int8[128, 128]
//   b[2] @layers.0.wo scales
//   b[3] %x0 bf16[B, S, 128]
//   b[4] -> %l0.x_attn bf16[B, S, 128]
extern "C" __global__ void __launch_bounds__(256, 2) k_2bb94ac9207bd6ce_gemv(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {1, {128, 0, 0, 0}, 0, 1, 1e-05f, 0};
  const void* W[] = {b[1]};
  const void* S[] = {b[2]};
  void* const O[] = {b[4]};
  lk::gemv_kernel<T, 3, 128, 0, 8, false>(st, d, (const T*)b[0], nullptr, W, S, O, (const T*)b[3]);
}

extern "C" __global__ void __launch_bounds__(128) k_2bb94ac9207bd6ce_gemm(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {1, {128, 0, 0, 0}, 0, 1, 1e-05f, 0};
  const void* W[] = {b[1]};
  const void* S[] = {b[2]};
  void* const O[] = {b[4]};
  lk::gemm_kernel<T, 3, 128, 0>(st, d, (const T*)b[0], nullptr, W, S, O, (const T*)b[3]);
}

extern "C" __global__ void __launch_bounds__(256) k_2bb94ac9207bd6ce_dequant(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const void* W[] = {b[1]};
  const void* S[] = {b[2]};
  const long n[] = {128};
  const long off[] = {0};
  lk::dequant_kernel<T, 3, 128, 0>(st, W, S, n, off, 1);
}


// ==== node l0.ffn_norm (rms_norm)
//   entry k_df4e4100dadebdc0 grid rows block 256 p 0,0,0
// kernel l0.ffn_norm = rms_norm (rms_norm)
//   b[0] %l0.x_attn bf16[B, S, 128]
//   b[1] @layers.0.ffn_norm f32[128]
//   b[2] -> %l0.h_ffn bf16[B, S, 128]
extern "C" __global__ void __launch_bounds__(256) k_df4e4100dadebdc0(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  lk::rms_norm_kernel<T, 128>(st, (const T*)b[0], (const T*)b[1], (T*)b[2], 1e-05f);
}


// ==== node l0.router (moe_router)
//   entry k_0fade350a1bdc9c6 grid rows block 256 p 0,0,0
// kernel l0.router = moe_router (moe_router)
//   b[0] %l0.h_ffn bf16[B, S, 128]
//   b[1] @layers.0.router f32[4, 128]
//   b[2] -> %l0.expert_ids i32[B, S, 2]
//   b[3] -> %l0.expert_gates f32[B, S, 2]
extern "C" __global__ void __launch_bounds__(256) k_0fade350a1bdc9c6(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  lk::router_kernel<T, 0, 128, 0, 4, 2>(st, (const T*)b[0], b[1], nullptr, (int*)b[2], (float*)b[3]);
}


// ==== node l0.experts.gate_up (gather_expert_matmul_gate_up_silu)
//   entry k_511f72ffd6a0e33d_gemv grid warps block 256 p 192,0,0 max_rows 8
//   entry k_511f72ffd6a0e33d_gemm grid expert_tiles block 128 p 3,4,2
// kernel l0.experts.gate_up = expert_matmul (gather_expert_matmul_gate_up_silu)
// absorbs: l0.experts.w_gate:expert_matmul l0.experts.w_up:expert_matmul l0.silu:silu l0.mul:mul l0.dispatch:moe_dispatch
//   b[0] %l0.h_ffn bf16[B, S, 128]
//   b[1] %l0.expert_ids i32[B, S, 2]
//   b[2] @layers.0.experts.w_gate int8[4, 192, 128]
//   b[3] @layers.0.experts.w_gate scales
//   b[4] @layers.0.experts.w_up int8[4, 192, 128]
//   b[5] @layers.0.experts.w_up scales
//   b[6] -> %l0.ffn_act bf16[B, S, 2, 192]
extern "C" __global__ void __launch_bounds__(256, 2) k_511f72ffd6a0e33d_gemv(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::ExpertDesc d = {2, {192, 192, 0, 0}, 2, 2, 2, 4};
  const void* W[] = {b[2], b[4]};
  const void* S[] = {b[3], b[5]};
  void* const O[] = {b[6]};
  lk::expert_gemv_kernel<T, 3, 128, 0, 8>(st, d, (const T*)b[0], (const int*)b[1], W, S, nullptr, nullptr, O);
}

extern "C" __global__ void __launch_bounds__(128) k_511f72ffd6a0e33d_gemm(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::ExpertDesc d = {2, {192, 192, 0, 0}, 2, 2, 2, 4};
  const void* W[] = {b[2], b[4]};
  const void* S[] = {b[3], b[5]};
  void* const O[] = {b[6]};
  lk::expert_gemm_kernel<T, 3, 128, 0>(st, d, (const T*)b[0], (const int*)b[1], W, S, nullptr, nullptr, O);
}


// ==== node l0.experts.w_down (expert_matmul_combine_residual) scratch 1024 B counters 1
//   entry k_71556628639a5cd5_gemv grid warps block 256 p 128,0,0 max_rows 8
//   entry k_71556628639a5cd5_gemm grid expert_tiles block 128 p 2,4,2
// kernel l0.experts.w_down = expert_matmul (expert_matmul_combine_residual)
// absorbs: l0.experts.w_down:expert_matmul l0.combine:moe_combine l0.ffn_add:add
//   b[0] %l0.ffn_act bf16[B, S, 2, 192]
//   b[1] %l0.expert_ids i32[B, S, 2]
//   b[2] @layers.0.experts.w_down int8[4, 128, 192]
//   b[3] @layers.0.experts.w_down scales
//   b[4] %l0.expert_gates f32[B, S, 2]
//   b[5] %l0.x_attn bf16[B, S, 128]
//   b[6] -> %x1 bf16[B, S, 128]
extern "C" __global__ void __launch_bounds__(256, 2) k_71556628639a5cd5_gemv(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::ExpertDesc d = {1, {128, 0, 0, 0}, 0, 4, 2, 4};
  const void* W[] = {b[2]};
  const void* S[] = {b[3]};
  void* const O[] = {b[6]};
  lk::expert_gemv_kernel<T, 3, 192, 0, 8>(st, d, (const T*)b[0], (const int*)b[1], W, S, (const float*)b[4], (const T*)b[5], O);
}

extern "C" __global__ void __launch_bounds__(128) k_71556628639a5cd5_gemm(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::ExpertDesc d = {1, {128, 0, 0, 0}, 0, 4, 2, 4};
  const void* W[] = {b[2]};
  const void* S[] = {b[3]};
  void* const O[] = {b[6]};
  lk::expert_gemm_kernel<T, 3, 192, 0>(st, d, (const T*)b[0], (const int*)b[1], W, S, (const float*)b[4], (const T*)b[5], O);
}


// ==== node l1.qkv (norm_matmul_x3) scratch 66048 B
//   entry k_415808565b5360a4_gemv grid warps block 256 p 256,0,0 max_rows 8
//   entry k_415808565b5360a4_gemm grid gemm_tiles block 128 p 4,0,0
//   entry k_415808565b5360a4_norm grid rows block 256 p 0,0,0
//   entry k_415808565b5360a4_dequant grid warps block 256 p 256,0,0
//   prefill via cuBLAS: 3 GEMM(s) K 128 N 128 64 64 epilogue 0 norm entry 2 silu entry -1 scratch offsets 0,-1,-1 dequant entry 3 weight copies at 512 33280 49664
// ==== node l1.rope_kvwrite (rope_kvwrite)
//   entry k_61756ecd75f63050 grid rows_x block 256 p 1,0,0
// ==== node l1.decode_attention (decode_attention) scratch 1088 B counters 4
//   entry k_db4fa29570934b83 grid decode_splits block 128 p 2,1,0
// ==== node l1.wo (matmul_residual) scratch 32768 B
//   entry k_2bb94ac9207bd6ce_gemv grid warps block 256 p 128,0,0 max_rows 8
//   entry k_2bb94ac9207bd6ce_gemm grid gemm_tiles block 128 p 2,0,0
//   entry k_2bb94ac9207bd6ce_dequant grid warps block 256 p 128,0,0
//   prefill via cuBLAS: 1 GEMM(s) K 128 N 128 epilogue 1 norm entry -1 silu entry -1 scratch offsets -1,-1,-1 dequant entry 2 weight copies at 0
// ==== node l1.ffn_norm (rms_norm)
//   entry k_df4e4100dadebdc0 grid rows block 256 p 0,0,0
// ==== node l1.router (moe_router)
//   entry k_0fade350a1bdc9c6 grid rows block 256 p 0,0,0
// ==== node l1.experts.gate_up (gather_expert_matmul_gate_up_silu)
//   entry k_511f72ffd6a0e33d_gemv grid warps block 256 p 192,0,0 max_rows 8
//   entry k_511f72ffd6a0e33d_gemm grid expert_tiles block 128 p 3,4,2
// ==== node l1.experts.w_down (expert_matmul_combine_residual) scratch 1024 B counters 1
//   entry k_71556628639a5cd5_gemv grid warps block 256 p 128,0,0 max_rows 8
//   entry k_71556628639a5cd5_gemm grid expert_tiles block 128 p 2,4,2
// ==== node lm_head (norm_lm_head)
//   entry k_657581699fef055d_gemv grid warps block 256 p 512,0,0 max_rows 8
//   entry k_657581699fef055d_gemm grid gemm_tiles block 128 p 8,1,0
//   entry k_657581699fef055d_gemv_mma grid warps block 256 p 256,0,0 max_rows 8
// kernel lm_head = lm_head (norm_lm_head)
// absorbs: lm_head:lm_head final_norm:rms_norm
//   b[0] %x2 bf16[B, S, 128]
//   b[1] @norm f32[128]
//   b[2] @lm_head int8[512, 128]
//   b[3] @lm_head scales
//   b[4] -> %logits f32[B, 512]
extern "C" __global__ void __launch_bounds__(256, 2) k_657581699fef055d_gemv(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {1, {512, 0, 0, 0}, 1, 0, 1e-05f, 1};
  const void* W[] = {b[2]};
  const void* S[] = {b[3]};
  void* const O[] = {b[4]};
  lk::gemv_kernel<T, 3, 128, 0, 8, true>(st, d, (const T*)b[0], (const T*)b[1], W, S, O, nullptr);
}

extern "C" __global__ void __launch_bounds__(128) k_657581699fef055d_gemm(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {1, {512, 0, 0, 0}, 1, 0, 1e-05f, 1};
  const void* W[] = {b[2]};
  const void* S[] = {b[3]};
  void* const O[] = {b[4]};
  lk::gemm_kernel<T, 3, 128, 0>(st, d, (const T*)b[0], (const T*)b[1], W, S, O, nullptr);
}

extern "C" __global__ void __launch_bounds__(256) k_657581699fef055d_gemv_mma(const LatheCudaStep* st, void* const* b, long layer) {
  typedef __nv_bfloat16 T;
  (void)layer;
  const lk::GemmDesc d = {1, {512, 0, 0, 0}, 1, 0, 1e-05f, 1};
  const void* W[] = {b[2]};
  const void* S[] = {b[3]};
  void* const O[] = {b[4]};
  lk::gemv_mma_kernel<T, 3, 128, 0, true>(st, d, (const T*)b[0], (const T*)b[1], W, S, O, nullptr);
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


