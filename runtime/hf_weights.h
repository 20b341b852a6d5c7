// The weights of a Hugging Face checkpoint directory (model.safetensors, or shards
// listed by model.safetensors.index.json) as a WeightSource under lathe's weight
// names, converted to f32 from F32, F16 or BF16.
//
// Names (lathe <- Hugging Face; per-layer tensors are under model.layers.N.):
//   tok_embeddings <- model.embed_tokens.weight
//   norm <- model.norm.weight
//   lm_head <- lm_head.weight (absent with tie_word_embeddings: the graph reads the
//     embedding table instead)
//   layers.N.attn_norm <- input_layernorm.weight
//   layers.N.ffn_norm <- post_attention_layernorm.weight
//   layers.N.wq, wk, wv, wo <- self_attn.q_proj, k_proj, v_proj, o_proj .weight
//   layers.N.w_gate, w_up, w_down <- mlp.gate_proj, up_proj, down_proj .weight
//   layers.N.router <- block_sparse_moe.gate.weight (Mixtral)
//   layers.N.experts.w_gate, w_up, w_down [E, ...] <- block_sparse_moe.experts.E.w1, w3, w2
// Both store matrices as [out, in], as lathe does.
//
// RoPE: Hugging Face rotates halves (element i pairs with i + d/2 within a head);
// lathe, like GGUF, rotates interleaved pairs (2i, 2i+1). Rows of wq and wk are
// permuted per head on load, lathe row 2i+j = HF row j*(d/2)+i (j in {0, 1}), which
// makes the two computations identical: q.k dot products are sums over the same pairs.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/safetensors.h"
#include "runtime/weights.h"

namespace lathe {

class HfWeights : public std::enable_shared_from_this<HfWeights> {
 public:
  // Opens the safetensors files of a Hugging Face directory: the shards that
  // model.safetensors.index.json lists, else every *.safetensors file in it.
  static std::shared_ptr<HfWeights> open(const std::string& dir);

  // Throws lathe::Error, naming the file and tensor, when a weight of the graphs is
  // missing or has another shape or an unsupported dtype, when the checkpoint holds
  // biases (Qwen2's q/k/v biases: lathe's IR has none), or when the graphs are split
  // for tensor parallelism, or when a tensor under model.layers.N. is left unused (a
  // layer, expert or router config.json does not have, or a weight lathe's IR lacks).
  // Returns warnings: unused tensors outside the layers (a tied model's lm_head, names
  // lathe does not know).
  std::vector<std::string> check(const std::vector<const Graph*>& graphs) const;
  // The values of lathe weight `name` (rows of wq/wk permuted for RoPE, with the
  // head_dim of `g`). Thread-safe; keeps the files mapped while it lives.
  WeightSource source(const Graph& g) const;

  const std::string& dir() const { return dir_; }
  size_t tensor_count() const { return where_.size(); }

 private:
  struct Piece {
    std::string hf_name;
    std::vector<int64_t> shape;  // the shape the checkpoint must hold
  };
  // The checkpoint tensors lathe weight `name` of `shape` is made of, in order.
  std::vector<Piece> pieces(const std::string& name, const std::vector<int64_t>& shape) const;
  std::vector<std::string> unused_tensor_notes(const std::set<std::string>& used, int64_t layers,
                                               int64_t experts) const;
  const SafetensorsFile& file_of(const std::string& hf_name, const std::string& for_weight) const;
  void fill(const std::string& name, const std::vector<int64_t>& shape, int64_t head_dim,
            float* out) const;

  std::string dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;  // HF tensor name -> its file
};

}  // namespace lathe
