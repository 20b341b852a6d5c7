// Op kinds, node attributes and per-kind shape rules.
//
// Before fusion a decoder layer is a chain of small ops; after the fusion passes a
// node is one kernel. GEMMs stay one kind (matmul / expert_matmul / lm_head) whose
// attributes say what was folded in:
//   prologue = none | rms_norm     (fuse-norm-matmul; inputs gain the norm weight)
//   prologue = gather              (expert_matmul: the MoE dispatch folded in)
//   epilogue = none | silu_mul     (fuse-epilogue on a gate/up GEMM: 2 weights, 1 output)
//            | residual            (fuse-epilogue: + residual input)
//            | combine             (expert_matmul: weighted sum over top_k, the MoE combine)
//            | combine_residual    (expert_matmul: combine + residual input)
// and several weights mean several GEMMs sharing one input read (fuse-qkv, fuse-gate-up).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"

namespace lathe {

enum class OpKind : uint8_t {
  // Unfused ops.
  embedding,      // (tokens i32[B,S], W[V,H]) -> [B,S,H]
  rms_norm,       // (x[B,S,H], w[H]) {eps} -> [B,S,H]
  matmul,         // (x[B,S,K], [norm_w[K]], W1[N1,K]..., [residual]) -> [B,S,Ni]...
  rope,           // (x[B,S,n*d]) {heads=n, head_dim, theta} -> [B,S,n*d]
  kv_write,       // (k[B,S,kvh*d], v[B,S,kvh*d], $kv) {layer} -> cache view [B,T,2,kvh,d]
  kv_read,        // (cache view) {layer} -> k[B,kvh,T,d], v[B,kvh,T,d]
  qk,             // (q[B,S,h*d], k[B,kvh,T,d]) {heads, kv_heads, head_dim, scale} -> [B,h,S,T]
  mask,           // (s[B,h,S,T]) causal: query i sees keys j <= T-S+i -> [B,h,S,T]
  softmax,        // (s[B,h,S,T]) over T -> [B,h,S,T]
  pv,             // (p[B,h,S,T], v[B,kvh,T,d]) -> [B,S,h*d]
  silu,           // (x) -> x
  mul,            // (a, b) -> a
  add,            // (a, b) -> a
  moe_router,     // (h[B,S,H], Wr[E,H]) {experts, top_k} -> idx i32[B,S,k], gates f32[B,S,k]
  moe_dispatch,   // (h[B,S,H], idx) {top_k} -> [B,S,k,H]
  expert_matmul,  // (x[B,S,k,K] | x[B,S,K] with gather, idx, W[E,N,K]..., [gates, residual])
  moe_combine,    // (y[B,S,k,H], gates[B,S,k]) -> [B,S,H]
  lm_head,        // (h[B,S,H], [norm_w], W[V,H]) -> logits f32[B,V] of each sequence's last token
  sample,         // (logits[B,V]) -> tokens i32[B]
  all_reduce,     // (x) {tp} -> x, summed over tensor-parallel ranks
  all_gather,     // (x[..., N]) {tp} -> [..., N*tp]
  // Fused kernels.
  rope_kvwrite,      // (q, k, v, $kv) {heads, kv_heads, head_dim, theta, layer} -> q_rot, cache view
  flash_attention,   // (q[B,S,h*d], cache view) {heads, kv_heads, head_dim, scale} -> [B,S,h*d]
  decode_attention,  // same, S = 1, split over the context
};

inline constexpr int kNumOpKinds = int(OpKind::decode_attention) + 1;

std::string_view op_name(OpKind k);
std::optional<OpKind> parse_op(std::string_view s);
bool is_gemm(OpKind k);  // matmul, expert_matmul, lm_head

// ---- attributes ----
using AttrValue = std::variant<int64_t, double, std::string>;

// A small ordered map (sorted by key) so printing is deterministic.
class Attrs {
 public:
  void set(std::string_view key, AttrValue v);
  bool has(std::string_view key) const { return find(key) != nullptr; }
  void erase(std::string_view key);
  const AttrValue* find(std::string_view key) const;
  int64_t i(std::string_view key, int64_t def = 0) const;
  double f(std::string_view key, double def = 0) const;  // ints convert
  std::string s(std::string_view key, std::string_view def = "") const;
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool operator==(const Attrs&) const = default;

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;
};

// RoPE frequency divisors of a rope / rope_kvwrite node (attribute "rope_divisors":
// head_dim / 2 positive numbers, comma-separated; see RopeScaling in ir/model.h).
// Empty when the node has plain RoPE. rope_divisors_of returns nullopt and sets *why
// when the attribute is malformed (a plan file edited by hand). rope_table_text writes
// such a table (divisors, or the kernels' frequencies) as "%.17g" values, comma-separated,
// which read back exactly.
std::string rope_table_text(const std::vector<double>& values);
std::optional<std::vector<double>> rope_divisors_of(const Attrs& a, std::string* why = nullptr);
// The rotation frequencies of RoPE: theta^(-2i / head_dim) for the head_dim / 2 pairs,
// each over its divisor when there are divisors. The CPU kernels carry them as a table.
std::vector<double> rope_frequencies(double theta, int64_t head_dim, const std::vector<double>& divisors);

// Input positions of a GEMM-family node, derived from its attributes.
struct GemmParts {
  int x = 0;            // activation input
  int norm = -1;        // rms_norm weight when prologue = rms_norm
  int idx = -1;         // expert ids (expert_matmul)
  int first_weight = 0;
  int num_weights = 0;
  int gates = -1;       // router gates (combine_residual)
  int residual = -1;    // residual input (residual / combine_residual)
};
// Computes positions for a node of kind `k` with `num_inputs` inputs and the given
// attributes; nullopt when the counts do not add up.
std::optional<GemmParts> gemm_parts(OpKind k, const Attrs& a, size_t num_inputs);

// Type of a value as shape inference sees it.
struct TypeShape {
  DType dtype;
  Shape shape;
  bool operator==(const TypeShape&) const = default;
};

}  // namespace lathe
