#include "checkpoint/gguf_model.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

#include "ir/assert.h"

namespace lathe::gguf {

namespace {

struct NamePair {
  const char* lathe;
  const char* gguf;
};
constexpr NamePair kLayerNames[] = {
    {"attn_norm", "attn_norm"},
    {"wq", "attn_q"},
    {"wk", "attn_k"},
    {"wv", "attn_v"},
    {"wo", "attn_output"},
    {"ffn_norm", "ffn_norm"},
    {"w_gate", "ffn_gate"},
    {"w_up", "ffn_up"},
    {"w_down", "ffn_down"},
    {"router", "ffn_gate_inp"},
    {"experts.w_gate", "ffn_gate_exps"},
    {"experts.w_up", "ffn_up_exps"},
    {"experts.w_down", "ffn_down_exps"},
};

std::string shape_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

std::vector<std::string> model_notes(const File& f) {
  std::vector<std::string> notes;
  std::string type = f.get_string_opt("llama.rope.scaling.type").value_or("none");
  if (type != "none" && type != "linear")
    notes.push_back("llama.rope.scaling.type = '" + type + "' (factor " +
                    std::to_string(f.get_float_opt("llama.rope.scaling.factor").value_or(1.0)) +
                    ") is not applied: lathe applies linear scaling and per-dimension factors "
                    "(rope_freqs.weight), so positions differ from llama.cpp's where this scaling acts");
  return notes;
}

std::vector<WeightInfo> model_weights(const ModelSpec& m) {
  std::vector<WeightInfo> w;
  w.push_back({"tok_embeddings", {m.vocab, m.hidden}});
  for (int64_t l = 0; l < m.layers; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    w.push_back({p + "attn_norm", {m.hidden}});
    w.push_back({p + "wq", {m.q_dim(), m.hidden}});
    w.push_back({p + "wk", {m.kv_dim(), m.hidden}});
    w.push_back({p + "wv", {m.kv_dim(), m.hidden}});
    w.push_back({p + "wo", {m.hidden, m.q_dim()}});
    w.push_back({p + "ffn_norm", {m.hidden}});
    if (m.is_moe()) {
      int64_t E = m.moe->experts, F = m.moe->expert_ffn;
      w.push_back({p + "router", {E, m.hidden}});
      w.push_back({p + "experts.w_gate", {E, F, m.hidden}});
      w.push_back({p + "experts.w_up", {E, F, m.hidden}});
      w.push_back({p + "experts.w_down", {E, m.hidden, F}});
    } else {
      w.push_back({p + "w_gate", {m.ffn, m.hidden}});
      w.push_back({p + "w_up", {m.ffn, m.hidden}});
      w.push_back({p + "w_down", {m.hidden, m.ffn}});
    }
  }
  w.push_back({"norm", {m.hidden}});
  if (!m.tie_embeddings) w.push_back({"lm_head", {m.vocab, m.hidden}});
  return w;
}

bool is_gguf_path(std::string_view path) {
  if (path.size() >= 5) {
    std::string ext(path.substr(path.size() - 5));
    for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (ext == ".gguf") return true;
  }
  // Any other name: a regular file that starts with the magic (a FIFO is not opened
  // for long: O_NONBLOCK, and it is not regular).
  int fd = ::open(std::string(path).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  char magic[4] = {};
  bool gguf = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::read(fd, magic, 4) == 4 &&
              std::memcmp(magic, "GGUF", 4) == 0;
  ::close(fd);
  return gguf;
}

std::string gguf_name(const std::string& n) {
  if (n == "tok_embeddings") return "token_embd.weight";
  if (n == "norm") return "output_norm.weight";
  if (n == "lm_head") return "output.weight";
  if (!n.starts_with("layers.")) return "";
  size_t dot = n.find('.', 7);
  if (dot == std::string::npos) return "";
  std::string layer = n.substr(7, dot - 7), rest = n.substr(dot + 1);
  for (const NamePair& p : kLayerNames)
    if (rest == p.lathe) return "blk." + layer + "." + p.gguf + ".weight";
  return "";
}

std::string lathe_name(const std::string& g) {
  if (g == "token_embd.weight") return "tok_embeddings";
  if (g == "output_norm.weight") return "norm";
  if (g == "output.weight") return "lm_head";
  if (!g.starts_with("blk.") || !g.ends_with(".weight")) return "";
  size_t dot = g.find('.', 4);
  if (dot == std::string::npos) return "";
  std::string layer = g.substr(4, dot - 4), rest = g.substr(dot + 1, g.size() - 7 - dot - 1);
  for (const NamePair& p : kLayerNames)
    if (rest == p.gguf) return "layers." + layer + "." + p.lathe;
  return "";
}

std::optional<Format> format_of(uint32_t t) {
  switch (t) {
    case 0:
      return Format{DType::f32, 0, DType::f16};
    case 1:
      return Format{DType::f16, 0, DType::f16};
    case 30:
      return Format{DType::bf16, 0, DType::f16};
    case 8:
      return Format{DType::int8, 32, DType::f16};
    case 2:
      return Format{DType::int4, 32, DType::f16};
    default:
      return std::nullopt;
  }
}

std::optional<uint32_t> ggml_type_of(const Format& f) {
  for (uint32_t t : {0u, 1u, 30u, 8u, 2u})
    if (format_of(t) == f) return t;
  return std::nullopt;
}

Format stored_weight_format(const File& f) {
  const TensorInfo* t = f.find("blk.0.attn_q.weight");
  if (!t) throw Error(f.path() + ": missing tensor 'blk.0.attn_q.weight'");
  auto fmt = format_of(t->type);
  if (!fmt)
    throw Error(f.path() + ": tensor 'blk.0.attn_q.weight' is stored as " + type_name(t->type) +
                ", which lathe cannot load (supported: F32, F16, BF16, Q8_0, Q4_0)");
  return *fmt;
}

std::optional<Format> stored_weight_format(const std::string& path) {
  if (!is_gguf_path(path)) return std::nullopt;
  return stored_weight_format(*File::open(path));
}

ModelSpec model_spec(const File& f) {
  const std::string& path = f.path();
  std::string arch = f.get_string("general.architecture");
  if (arch != "llama")
    throw Error(path + ": key 'general.architecture': '" + arch +
                "' is not supported (lathe reads llama-architecture GGUF files, dense or MoE)");
  auto req = [&](const std::string& key) {
    int64_t v = f.get_int("llama." + key);
    if (v <= 0 || v > (int64_t(1) << 40))
      throw Error(path + ": key 'llama." + key + "': expected a positive integer, got " +
                  std::to_string(v));
    return v;
  };
  auto opt = [&](const std::string& key) -> std::optional<int64_t> {
    auto v = f.get_int_opt("llama." + key);
    if (v && (*v <= 0 || *v > (int64_t(1) << 40)))
      throw Error(path + ": key 'llama." + key + "': expected a positive integer, got " +
                  std::to_string(*v));
    return v;
  };
  ModelSpec m;
  m.arch = "llama";
  // general.name is free text ("Meta Llama 3 8B Instruct"); lathe names are not.
  m.name = safe_name(f.get_string_opt("general.name").value_or(std::filesystem::path(path).stem().string()));
  if (m.name.empty()) m.name = "gguf-model";
  m.description = "GGUF file " + path;
  m.hidden = req("embedding_length");
  m.layers = req("block_count");
  // The bound model TOML files and config.json have (a count of 2^32 built layer tables
  // until the machine ran out of memory, before any tensor was looked for).
  if (m.layers > kMaxLayers)
    throw Error(path + ": key 'llama.block_count': " + std::to_string(m.layers) + " layers, more than lathe plans (" +
                std::to_string(kMaxLayers) + ")");
  m.heads = req("attention.head_count");
  m.kv_heads = opt("attention.head_count_kv").value_or(m.heads);
  m.head_dim = opt("attention.key_length")
                   .value_or(opt("rope.dimension_count").value_or(m.hidden / m.heads));
  if (auto vl = opt("attention.value_length"); vl && *vl != m.head_dim)
    throw Error(path + ": key 'llama.attention.value_length' (" + std::to_string(*vl) +
                ") differs from the key length (" + std::to_string(m.head_dim) +
                "); lathe needs them equal");
  if (auto rd = opt("rope.dimension_count"); rd && *rd != m.head_dim)
    throw Error(path + ": key 'llama.rope.dimension_count' (" + std::to_string(*rd) +
                ") differs from the head size (" + std::to_string(m.head_dim) +
                "); partial RoPE is not supported");
  m.max_context = req("context_length");
  m.norm_eps = f.get_float_opt("llama.attention.layer_norm_rms_epsilon").value_or(1e-5);
  m.rope_theta = f.get_float_opt("llama.rope.freq_base").value_or(10000.0);
  // The ranges config.json's reader holds them to (an epsilon of 1e38 ran and produced
  // logits of 1e-19, exit 0).
  auto within = [&](double v, double lo, double hi, const char* key) {
    if (!(v >= lo && v <= hi)) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s: key '%s' is %g, outside [%g, %g]", path.c_str(), key, v, lo, hi);
      throw Error(buf);
    }
  };
  within(m.norm_eps, 1e-12, 0.1, "llama.attention.layer_norm_rms_epsilon");
  within(m.rope_theta, 1.0, 1e12, "llama.rope.freq_base");
  // RoPE scaling: linear by metadata, or per-dimension divisors in rope_freqs.weight
  // (what llama.cpp's converter writes for Llama 3.1's llama3 rule).
  if (f.get_string_opt("llama.rope.scaling.type").value_or("none") == "linear") {
    double factor = f.get_float_opt("llama.rope.scaling.factor").value_or(1.0);
    within(factor, 1e-3, 1e6, "llama.rope.scaling.factor");
    if (factor != 1.0) {
      RopeScaling linear;
      linear.type = "linear";
      linear.factor = factor;
      m.rope_scaling = linear;
    }
  }
  if (const TensorInfo* rf = f.find("rope_freqs.weight")) {
    if (rf->type != 0 || rf->ne.size() != 1 || rf->ne[0] != m.head_dim / 2)
      throw Error(path + ": tensor 'rope_freqs.weight' has type " + type_name(rf->type) + " and ne " +
                  shape_text(rf->ne) + ", expected F32 [" + std::to_string(m.head_dim / 2) +
                  "] (one RoPE frequency factor per rotation pair)");
    RopeScaling sc;
    sc.type = "factors";
    for (int64_t i = 0; i < rf->ne[0]; ++i) {
      float v;
      std::memcpy(&v, rf->data + 4 * i, 4);
      if (!(v > 0) || !std::isfinite(v))
        throw Error(path + ": tensor 'rope_freqs.weight' element " + std::to_string(i) + " is " + std::to_string(v) +
                    ", not a positive factor");
      sc.factors.push_back(double(v));
    }
    if (m.rope_scaling)  // linear and per-dimension factors together: llama.cpp applies both
      for (double& d : sc.factors) d *= m.rope_scaling->factor;
    m.rope_scaling = sc;
  }
  int64_t experts = opt("expert_count").value_or(0);
  if (experts > 0) {
    MoeSpec moe;
    moe.experts = experts;
    moe.top_k = req("expert_used_count");
    // Not value_or(req(...)): its argument is evaluated first, which made the fallback
    // key required beside expert_feed_forward_length.
    const auto expert_ffn = opt("expert_feed_forward_length");
    moe.expert_ffn = expert_ffn ? *expert_ffn : req("feed_forward_length");
    m.moe = moe;
  } else {
    m.ffn = req("feed_forward_length");
  }
  const TensorInfo* emb = f.find("token_embd.weight");
  if (!emb) throw Error(path + ": missing tensor 'token_embd.weight'");
  if (emb->ne.size() != 2 || emb->ne[0] != m.hidden)
    throw Error(path + ": tensor 'token_embd.weight' has ne " + shape_text(emb->ne) +
                ", expected [" + std::to_string(m.hidden) +
                ", vocab] (llama.embedding_length = " + std::to_string(m.hidden) + ")");
  m.vocab = emb->ne[1];
  if (auto v = opt("vocab_size"); v && *v != m.vocab)
    throw Error(path + ": key 'llama.vocab_size' (" + std::to_string(*v) +
                ") differs from token_embd.weight's " + std::to_string(m.vocab) + " rows");
  if (const Value* toks = f.get("tokenizer.ggml.tokens");
      toks && toks->is_array() && int64_t(toks->size()) != m.vocab)
    throw Error(path + ": key 'tokenizer.ggml.tokens' holds " + std::to_string(toks->size()) +
                " tokens but token_embd.weight has " + std::to_string(m.vocab) + " rows");
  m.tie_embeddings = f.find("output.weight") == nullptr;
  m.dtype = emb->type == 1 ? DType::f16 : (emb->type == 30 ? DType::bf16 : DType::f32);
  if (m.heads % m.kv_heads != 0)
    throw Error(path + ": key 'llama.attention.head_count' (" + std::to_string(m.heads) +
                ") is not a multiple of 'llama.attention.head_count_kv' (" +
                std::to_string(m.kv_heads) + ")");
  if (m.is_moe() && m.moe->top_k > m.moe->experts)
    throw Error(path + ": key 'llama.expert_used_count' exceeds 'llama.expert_count'");

  for (const TensorInfo& t : f.tensors())
    if (t.name.ends_with(".bias"))
      throw Error(path + ": tensor '" + t.name + "': biases are not supported (lathe's llama graph has none)");
  // Every tensor the model needs, with the shape the metadata implies.
  for (const auto& [name, shape] : model_weights(m)) {
    std::string g = gguf_name(name);
    const TensorInfo* t = f.find(g);
    if (!t)
      throw Error(
          path + ": missing tensor '" + g + "' (the metadata describes " +
          std::to_string(m.layers) + " layers" +
          (m.is_moe() ? ", " + std::to_string(m.moe->experts) + " experts" : std::string()) + ")");
    std::vector<int64_t> ne(shape.rbegin(), shape.rend());
    if (t->ne != ne)
      throw Error(path + ": tensor '" + g + "' has ne " + shape_text(t->ne) +
                  " but the metadata implies " + shape_text(ne));
    if (!type_supported(t->type))
      throw Error(path + ": tensor '" + g + "' is stored as " + type_name(t->type) +
                  ", which lathe cannot load (supported: F32, F16, BF16, Q8_0, Q4_0)");
  }
  // And no tensor besides them (`check` said OK for such a file; only `run` refused it).
  std::set<std::string> wanted;
  for (const auto& [name, shape] : model_weights(m)) wanted.insert(gguf_name(name));
  refuse_unwanted_tensors(f, wanted,
                          std::to_string(m.layers) + (m.layers == 1 ? " layer" : " layers") +
                              (m.is_moe() ? ", " + std::to_string(m.moe->experts) + " experts" : std::string()) +
                              "; ");
  return m;
}

void refuse_unwanted_tensors(const File& f, const std::set<std::string>& wanted, const std::string& what) {
  std::vector<std::string> unused;
  for (const TensorInfo& t : f.tensors())
    if (!wanted.count(t.name) && t.name != "rope_freqs.weight") unused.push_back(t.name);
  if (!unused.empty())
    throw Error(f.path() + ": tensor '" + unused[0] + "'" +
                (unused.size() > 1 ? " and " + std::to_string(unused.size() - 1) + " more are" : " is") +
                " not a weight of the model its metadata describes (" + what +
                "llama.block_count, llama.expert_count and the other llama.* keys): the metadata and the tensors "
                "disagree");
}

ModelSpec load_model_spec(const std::string& path) {
  return model_spec(*File::open(path));
}

}  // namespace lathe::gguf
