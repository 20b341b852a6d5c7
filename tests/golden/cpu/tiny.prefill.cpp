// ==== node embed (embedding) k_2a57ec71a4e1161f
// kernel embed = embedding (embedding)
//   b[0] %tokens i32[B, S]
//   b[1] @tok_embeddings f32[512, 128]
//   b[2] -> %x0 f32[B, S, 128]
//   ia[0] = layer
extern "C" void k_2a57ec71a4e1161f(const LatheCtx* ctx, const LatheStep* st, void* const* b, const long* ia) {
  (void)ia;
  lk::embedding_kernel<0, 128, 0>(ctx, st, (const int*)b[0], b[1], nullptr, (float*)b[2]);
}

// ==== node l0.qkv (norm_matmul_x3) k_8b4f888091bfa885
// kernel l0.qkv = matmul (norm_matmul_x3)
// absorbs: l0.wq:matmul l0.wk:matmul l0.wv:matmul l0.attn_norm:rms_norm
//   b[0] %x0 f32[B, S, 128]
//   b[1] @layers.0.attn_norm f32[128]
//   b[2] @layers.0.wq int8[128, 128]
//   b[3] @layers.0.wq scales (f16)
//   b[4] @layers.0.wk int8[64, 128]
//   b[5] @layers.0.wk scales (f16)
//   b[6] @layers.0.wv int8[64, 128]
//   b[7] @layers.0.wv scales (f16)
//   b[8] -> %l0.q f32[B, S, 128]
//   b[9] -> %l0.k f32[B, S, 64]
//   b[10] -> %l0.v f32[B, S, 64]
//   ia[0] = layer
extern "C" void k_8b4f888091bfa885(const LatheCtx* ctx, const LatheStep* st, void* const* b, const long* ia) {
  (void)ia;
  static const lk::GemmDesc d = {3, {128, 64, 64, 0}, 1, 0, 1e-05f, 0};
  const void* W[] = {b[2], b[4], b[6]};
  const lk::u16* S[] = {(const lk::u16*)b[3], (const lk::u16*)b[5], (const lk::u16*)b[7]};
  float* O[] = {(float*)b[8], (float*)b[9], (float*)b[10]};
  lk::gemm_kernel<3, 128, 0>(ctx, st, d, (const float*)b[0], (const float*)b[1], W, S, O, nullptr);
}

// ==== node l0.rope_kvwrite (rope_kvwrite) k_dd5ffbf651645e28
// kernel l0.rope_kvwrite = rope_kvwrite (rope_kvwrite)
// absorbs: l0.rope_q:rope l0.rope_k:rope l0.kv_write:kv_write
//   b[0] %l0.q f32[B, S, 128]
//   b[1] %l0.k f32[B, S, 64]
//   b[2] %l0.v f32[B, S, 64]
//   b[3] -> %l0.q_rot f32[B, S, 128]
//   ia[0] = layer
extern "C" void k_dd5ffbf651645e28(const LatheCtx* ctx, const LatheStep* st, void* const* b, const long* ia) {
  (void)ia;
  static const double rope_freq[16] = {1,0.56234132519034907,0.31622776601683794,0.17782794100389229,0.10000000000000001,0.056234132519034911,0.031622776601683791,0.017782794100389229,0.01,0.005623413251903491,0.0031622776601683794,0.0017782794100389228,0.001,0.0005623413251903491,0.00031622776601683794,0.00017782794100389227};
  lk::rope_kvwrite_kernel<4, 0, 2, 2, 24, 16, 2, 4, 32>(ctx, st, int(ia[0]), (const float*)b[0], (const float*)b[1], (const float*)b[2], (float*)b[3], rope_freq);
}

// ==== node l0.flash_attention (flash_attention) k_3a7b9ffb1dc91cf3
// kernel l0.flash_attention = flash_attention (flash_attention)
// absorbs: l0.kv_read:kv_read l0.qk:qk l0.mask:mask l0.softmax:softmax l0.pv:pv
//   b[0] %l0.q_rot f32[B, S, 128]
//   b[1] %l0.kv int4[B, T, 2, 2, 32]
//   b[2] -> %l0.attn f32[B, S, 128]
//   ia[0] = layer
extern "C" void k_3a7b9ffb1dc91cf3(const LatheCtx* ctx, const LatheStep* st, void* const* b, const long* ia) {
  (void)ia;
  lk::attention_kernel<4, 0, 2, 2, 24, 16, 2, 4, 32, 16>(ctx, st, int(ia[0]), (const float*)b[0], (float*)b[2], 0.176776695f);
}

// ==== node l0.wo (matmul_residual) k_95b57d326d4a4ca9
// kernel l0.wo = matmul (matmul_residual)
// absorbs: l0.wo:matmul l0.attn_add:add
//   b[0] %l0.attn f32[B, S, 128]
//   b[1] @layers.0.wo int8[128, 128]
//   b[2] @layers.0.wo scales (f16)
//   b[3] %x0 f32[B, S, 128]
//   b[4] -> %l0.x_attn f32[B, S, 128]
//   ia[0] = layer
extern "C" void k_95b57d326d4a4ca9(const LatheCtx* ctx, const LatheStep* st, void* const* b, const long* ia) {
  (void)ia;
  static const lk::GemmDesc d = {1, {128, 0, 0, 0}, 0, 1, 1e-05f, 0};
  const void* W[] = {b[1]};
  const lk::u16* S[] = {(const lk::u16*)b[2]};
  float* O[] = {(float*)b[4]};
  lk::gemm_kernel<3, 128, 0>(ctx, st, d, (const float*)b[0], nullptr, W, S, O, (const float*)b[3]);
}

// ==== node l0.gate_up (norm_matmul_gate_up_silu) k_24e5098f5e4da9ef
// kernel l0.gate_up = matmul (norm_matmul_gate_up_silu)
// absorbs: l0.w_gate:matmul l0.w_up:matmul l0.ffn_norm:rms_norm l0.silu:silu l0.mul:mul
//   b[0] %l0.x_attn f32[B, S, 128]
//   b[1] @layers.0.ffn_norm f32[128]
//   b[2] @layers.0.w_gate int8[384, 128]
//   b[3] @layers.0.w_gate scales (f16)
//   b[4] @layers.0.w_up int8[384, 128]
//   b[5] @layers.0.w_up scales (f16)
//   b[6] -> %l0.ffn_act f32[B, S, 384]
//   ia[0] = layer
extern "C" void k_24e5098f5e4da9ef(const LatheCtx* ctx, const LatheStep* st, void* const* b, const long* ia) {
  (void)ia;
  static const lk::GemmDesc d = {2, {384, 384, 0, 0}, 1, 2, 1e-05f, 0};
  const void* W[] = {b[2], b[4]};
  const lk::u16* S[] = {(const lk::u16*)b[3], (const lk::u16*)b[5]};
  float* O[] = {(float*)b[6]};
  lk::gemm_kernel<3, 128, 0>(ctx, st, d, (const float*)b[0], (const float*)b[1], W, S, O, nullptr);
}

// ==== node l0.w_down (matmul_residual) k_978049b0b18e25ad
// kernel l0.w_down = matmul (matmul_residual)
// absorbs: l0.w_down:matmul l0.ffn_add:add
//   b[0] %l0.ffn_act f32[B, S, 384]
//   b[1] @layers.0.w_down int8[128, 384]
//   b[2] @layers.0.w_down scales (f16)
//   b[3] %l0.x_attn f32[B, S, 128]
//   b[4] -> %x1 f32[B, S, 128]
//   ia[0] = layer
extern "C" void k_978049b0b18e25ad(const LatheCtx* ctx, const LatheStep* st, void* const* b, const long* ia) {
  (void)ia;
  static const lk::GemmDesc d = {1, {128, 0, 0, 0}, 0, 1, 1e-05f, 0};
  const void* W[] = {b[1]};
  const lk::u16* S[] = {(const lk::u16*)b[2]};
  float* O[] = {(float*)b[4]};
  lk::gemm_kernel<3, 384, 0>(ctx, st, d, (const float*)b[0], nullptr, W, S, O, (const float*)b[3]);
}

// ==== node l1.qkv (norm_matmul_x3) k_8b4f888091bfa885
// ==== node l1.rope_kvwrite (rope_kvwrite) k_dd5ffbf651645e28
// ==== node l1.flash_attention (flash_attention) k_3a7b9ffb1dc91cf3
// ==== node l1.wo (matmul_residual) k_95b57d326d4a4ca9
// ==== node l1.gate_up (norm_matmul_gate_up_silu) k_24e5098f5e4da9ef
// ==== node l1.w_down (matmul_residual) k_978049b0b18e25ad
// ==== node lm_head (norm_lm_head) k_5d42e3040f8269b5
// kernel lm_head = lm_head (norm_lm_head)
// absorbs: lm_head:lm_head final_norm:rms_norm
//   b[0] %x2 f32[B, S, 128]
//   b[1] @norm f32[128]
//   b[2] @lm_head int8[512, 128]
//   b[3] @lm_head scales (f16)
//   b[4] -> %logits f32[B, 512]
//   ia[0] = layer
extern "C" void k_5d42e3040f8269b5(const LatheCtx* ctx, const LatheStep* st, void* const* b, const long* ia) {
  (void)ia;
  static const lk::GemmDesc d = {1, {512, 0, 0, 0}, 1, 0, 1e-05f, 1};
  const void* W[] = {b[2]};
  const lk::u16* S[] = {(const lk::u16*)b[3]};
  float* O[] = {(float*)b[4]};
  lk::gemm_kernel<3, 128, 0>(ctx, st, d, (const float*)b[0], (const float*)b[1], W, S, O, nullptr);
}

// ==== node sample (sample) k_c8ddc888a47c06fc
// kernel sample = sample (sample)
//   b[0] %logits f32[B, 512]
//   b[1] -> %next_tokens i32[B]
//   ia[0] = layer
extern "C" void k_c8ddc888a47c06fc(const LatheCtx* ctx, const LatheStep* st, void* const* b, const long* ia) {
  (void)ia;
  lk::argmax_kernel<512>(ctx, st, (const float*)b[0], (int*)b[1]);
}

