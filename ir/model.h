// ModelSpec: the hyperparameters of a Llama-style decoder (dense or MoE), as read
// from a model TOML, a GGUF file or a Hugging Face config. Plain data plus the
// derived figures every layer needs (parameter counts, KV bytes, FLOPs per token).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace lathe {

// The deepest model lathe plans (50x the deepest published one; planning time is
// linear in it): model TOML, config.json and GGUF alike.
constexpr int64_t kMaxLayers = 10000;

// Names of models and hardware targets appear in IR text, plan files, file names and
// tables, so they are kept to letters, digits, '-', '_' and '.' (at most 128).
// name_problem says what is wrong with `name` ("" when nothing is); safe_name maps
// every other character to '-' (for names taken from files: GGUF general.name,
// config.json's _name_or_path).
std::string name_problem(const std::string& name);
std::string safe_name(std::string name);

struct MoeSpec {
  int64_t experts = 0;     // experts per layer
  int64_t top_k = 0;       // experts each token is routed to
  int64_t expert_ffn = 0;  // intermediate size of one expert
};

// RoPE frequency scaling of long-context checkpoints. Each rotation pair i turns at
// theta^(-2i/D) / divisor[i]:
//   linear  every divisor = factor (positions interpolated by 1 / factor);
//   llama3  Llama 3.1's rule: divisor = factor where the wavelength exceeds
//           original_max_context / low_freq_factor, 1 where it is below
//           original_max_context / high_freq_factor, and a smooth blend between;
//   factors the divisors as given (GGUF's rope_freqs.weight tensor).
struct RopeScaling {
  std::string type;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_context = 8192;
  std::vector<double> factors;  // type "factors": head_dim / 2 divisors
};

// Divisors of the rotation frequencies (head_dim / 2 of them) for `s` at base theta.
std::vector<double> rope_divisors(const RopeScaling& s, double theta, int64_t head_dim);

struct ModelSpec {
  std::string name;
  std::string arch = "llama";
  std::string description;
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t ffn = 0;  // dense FFN intermediate size (unused when moe is set)
  int64_t vocab = 0;
  int64_t max_context = 0;
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;  // none: plain RoPE
  bool tie_embeddings = false;
  DType dtype = DType::bf16;  // stored weight dtype of the published checkpoint
  std::optional<MoeSpec> moe;

  bool is_moe() const { return moe.has_value() && moe->experts > 0; }
  int64_t q_dim() const { return heads * head_dim; }
  int64_t kv_dim() const { return kv_heads * head_dim; }

  // Parameters of one layer's attention block (norm + q, k, v, o projections).
  int64_t attention_params_per_layer() const;
  // Parameters of one layer's FFN block (norm + dense FFN, or router + all experts).
  int64_t ffn_params_per_layer() const;
  // FFN parameters one token touches (router + top_k experts for MoE).
  int64_t active_ffn_params_per_layer() const;
  int64_t embedding_params() const { return vocab * hidden; }
  int64_t lm_head_params() const { return tie_embeddings ? 0 : vocab * hidden; }
  // All parameters (the published "model size").
  int64_t param_count() const;
  // Parameters one token touches (MoE: top_k experts); equals param_count when dense.
  int64_t active_param_count() const;
  // Parameters used in matrix multiplies per token (active, without the embedding
  // lookup, with the LM head even when tied).
  int64_t matmul_params_per_token() const;
  // Bytes of K and V for one token over all layers at the given KV element width,
  // excluding scales.
  double kv_bytes_per_token(double bits_per_element) const;
  // FLOPs to decode one token at context length `context`: 2 x matmul params plus
  // attention (QK^T and PV: 2 x 2 x context x head_dim per head per layer).
  double flops_per_token(int64_t context) const;
};

}  // namespace lathe
