#include "runtime/hf_weights.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "ir/assert.h"
#include "ir/atomic_file.h"
#include "ir/json_fields.h"

namespace lathe {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string shape_text(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

// lathe's per-layer names -> Hugging Face's (under model.layers.N.).
const std::map<std::string, std::string>& layer_names() {
  static const std::map<std::string, std::string> m = {
      {"attn_norm", "input_layernorm.weight"}, {"ffn_norm", "post_attention_layernorm.weight"},
      {"wq", "self_attn.q_proj.weight"},       {"wk", "self_attn.k_proj.weight"},
      {"wv", "self_attn.v_proj.weight"},       {"wo", "self_attn.o_proj.weight"},
      {"w_gate", "mlp.gate_proj.weight"},      {"w_up", "mlp.up_proj.weight"},
      {"w_down", "mlp.down_proj.weight"},      {"router", "block_sparse_moe.gate.weight"},
  };
  return m;
}

const std::map<std::string, std::string>& expert_names() {
  static const std::map<std::string, std::string> m = {
      {"experts.w_gate", "w1"}, {"experts.w_up", "w3"}, {"experts.w_down", "w2"}};
  return m;
}

}  // namespace

std::shared_ptr<HfWeights> HfWeights::open(const std::string& dir) {
  std::shared_ptr<HfWeights> w(new HfWeights());
  w->dir_ = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir + ": not a directory");
  fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::map<std::string, std::string> wanted;  // tensor -> shard file name (from the index)
  std::vector<std::string> shards;
  if (fs::exists(index, ec)) {
    const std::string ip = index.string();
    Json j;
    try {
      const std::string text = read_file(ip);
      j = parse_json_unique_keys(text.begin(), text.end(), ip);
    } catch (const Json::exception& e) {
      throw Error(ip + ": not valid JSON: " + json_error_text(e.what()));
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw Error(ip +
                  ": weight_map: missing (expected an object mapping tensor names to shard files)");
    std::set<std::string> seen;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it->is_string())
        throw Error(ip + ": weight_map." + it.key() + ": expected a file name, got " + it->dump());
      std::string f = it->get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos ||
          f == "." || f == "..")
        throw Error(ip + ": weight_map." + it.key() + ": '" + f +
                    "' is not a file name in the directory");
      wanted[it.key()] = f;
      if (seen.insert(f).second) shards.push_back(f);
    }
  } else {
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".safetensors") shards.push_back(e.path().filename().string());
    std::sort(shards.begin(), shards.end());
    if (shards.empty())
      throw Error(dir + ": no *.safetensors files (and no model.safetensors.index.json)");
  }
  std::map<std::string, const SafetensorsFile*> by_file;
  for (const std::string& s : shards) {
    std::string path = (fs::path(dir) / s).string();
    if (!fs::exists(path, ec))
      throw Error(index.string() + ": lists shard '" + s + "', which is missing from " + dir);
    w->files_.push_back(SafetensorsFile::open(path));
    by_file[s] = w->files_.back().get();
  }
  if (!wanted.empty()) {
    for (const auto& [tensor, f] : wanted) {
      const SafetensorsFile* file = by_file.at(f);
      if (!file->find(tensor))
        throw Error(index.string() + ": lists tensor '" + tensor + "' in " + file->path() +
                    ", which does not hold it");
      w->where_[tensor] = file;
    }
  } else {
    for (const auto& f : w->files_)
      for (const auto& [name, t] : f->tensors()) {
        auto [it, fresh] = w->where_.emplace(name, f.get());
        if (!fresh)
          throw Error(f->path() + ": tensor '" + name + "' is also in " + it->second->path());
      }
  }
  return w;
}

std::vector<HfWeights::Piece> HfWeights::pieces(const std::string& name,
                                                const std::vector<int64_t>& shape) const {
  if (name == "tok_embeddings") return {{"model.embed_tokens.weight", shape}};
  if (name == "norm") return {{"model.norm.weight", shape}};
  if (name == "lm_head") return {{"lm_head.weight", shape}};
  if (name.starts_with("layers.")) {
    size_t dot = name.find('.', 7);
    if (dot != std::string::npos) {
      std::string layer = name.substr(7, dot - 7), rest = name.substr(dot + 1);
      std::string prefix = "model.layers." + layer + ".";
      if (auto it = layer_names().find(rest); it != layer_names().end())
        return {{prefix + it->second, shape}};
      if (auto it = expert_names().find(rest); it != expert_names().end() && !shape.empty()) {
        std::vector<Piece> out;
        std::vector<int64_t> one(shape.begin() + 1, shape.end());
        for (int64_t e = 0; e < shape[0]; ++e)
          out.push_back({prefix + "block_sparse_moe.experts." + std::to_string(e) + "." +
                             it->second + ".weight",
                         one});
        return out;
      }
    }
  }
  throw Error(dir_ + ": lathe weight '" + name + "' has no Hugging Face counterpart");
}

const SafetensorsFile& HfWeights::file_of(const std::string& hf_name,
                                          const std::string& for_weight) const {
  auto it = where_.find(hf_name);
  if (it == where_.end())
    throw Error(dir_ + ": missing tensor '" + hf_name + "' (lathe weight " + for_weight + ")" +
                (hf_name == "lm_head.weight"
                     ? "; a checkpoint without lm_head needs tie_word_embeddings = true"
                     : ""));
  return *it->second;
}

std::vector<std::string> HfWeights::check(const std::vector<const Graph*>& graphs) const {
  for (const auto& [name, f] : where_)
    if (name.ends_with(".bias"))
      throw Error(
          f->path() + ": tensor '" + name +
          "': the checkpoint has biases, which lathe's IR does not support; "
          "`lathe simulate` and `lathe compile` still accept its config.json");
  std::set<std::string> done, used;
  for (const Graph* g : graphs) {
    if (g->attrs.i("tp", 1) != 1)
      throw Error(dir_ + ": checkpoint weights can only be loaded into plans with tp = 1");
    for (ValueId v : g->values_of(ValueKind::weight)) {
      const Value& w = g->value(v);
      if (!done.insert(w.name).second) continue;
      std::vector<int64_t> shape;
      for (const Dim& d : w.shape) shape.push_back(d.coef);
      for (const Piece& p : pieces(w.name, shape)) {
        used.insert(p.hf_name);
        const SafetensorsFile& f = file_of(p.hf_name, w.name);
        const SafetensorsTensor& t = *f.find(p.hf_name);
        if (t.shape != p.shape)
          throw Error(f.path() + ": tensor '" + p.hf_name + "': shape " + shape_text(t.shape) +
                      ", but the model (" + "config.json) needs " + shape_text(p.shape));
        if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16")
          throw Error(f.path() + ": tensor '" + p.hf_name + "': dtype " + t.dtype +
                      " is not supported (expected F32, F16 or BF16)");
      }
    }
  }
  LATHE_ASSERT(!graphs.empty(), "HfWeights::check: no graphs");
  const Graph& g = *graphs.front();
  return unused_tensor_notes(used, g.attrs.i("layers", 0), g.attrs.i("experts", 0));
}

// Tensors the model leaves unused. One under model.layers.N. means config.json and the
// checkpoint disagree, or the checkpoint has weights lathe's IR lacks (QK-norm, say),
// and the model would run without them: an error, as for GGUF files. It names the
// lowest layer's tensor and says why: a layer past num_hidden_layers, an expert past
// num_local_experts, a router without experts, or a weight lathe does not know. RoPE's
// inverse frequencies are skipped (lathe computes them from rope_theta); a tied
// model's own lm_head (the embeddings are used in its place) and names outside the
// layers are warnings.
std::vector<std::string> HfWeights::unused_tensor_notes(const std::set<std::string>& used,
                                                        int64_t layers, int64_t experts) const {
  struct Unused {
    int64_t layer;
    std::string name, why;
  };
  std::vector<Unused> in_layers;
  std::vector<std::string> other;
  std::string lm_head;
  auto number = [](const std::string& s, size_t at, size_t* end) -> int64_t {
    size_t e = at;
    while (e < s.size() && e - at < 9 && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
    *end = e;
    return e == at || (s[at] == '0' && e - at > 1) ? -1 : std::stoll(s.substr(at, e - at));
  };
  for (const auto& [name, f] : where_) {
    if (used.count(name) || name.ends_with("rotary_emb.inv_freq")) continue;
    if (name == "lm_head.weight") {
      lm_head = f->path();
      continue;
    }
    const std::string prefix = "model.layers.";
    size_t end = 0;
    const int64_t layer = name.starts_with(prefix) ? number(name, prefix.size(), &end) : -1;
    if (layer < 0 || end >= name.size() || name[end] != '.') {
      other.push_back(name);
      continue;
    }
    const std::string rest = name.substr(end + 1), expert_prefix = "block_sparse_moe.experts.";
    std::string why = "a weight lathe's IR does not have (the model would run without it)";
    if (layer >= layers) {
      why = "a layer past num_hidden_layers = " + std::to_string(layers);
    } else if (rest == layer_names().at("router")) {
      why = "a router, but config.json has no experts";
    } else if (rest.starts_with(expert_prefix)) {
      const int64_t e = number(rest, expert_prefix.size(), &end);
      const std::string tail = e >= 0 ? rest.substr(end) : "";
      bool expert_weight = false;
      for (const auto& [lathe, hf] : expert_names()) expert_weight = expert_weight || tail == "." + hf + ".weight";
      if (e >= experts && expert_weight) why = "an expert past num_local_experts = " + std::to_string(experts);
    }
    in_layers.push_back({layer, name, why});
  }
  if (!in_layers.empty()) {
    auto first = std::min_element(in_layers.begin(), in_layers.end(), [](const Unused& a, const Unused& b) {
      return a.layer != b.layer ? a.layer < b.layer : a.name < b.name;
    });
    throw Error(where_.at(first->name)->path() + ": tensor '" + first->name + "' is not used: " + first->why +
                (in_layers.size() > 1 ? " (" + std::to_string(in_layers.size() - 1) + " more unused tensors)" : "") +
                "; config.json and the checkpoint disagree, or the checkpoint is of a model lathe does not support");
  }
  std::vector<std::string> notes;
  if (!lm_head.empty())
    notes.push_back(lm_head + ": tensor 'lm_head.weight' is not used: config.json ties the "
                    "output to the embeddings (tie_word_embeddings), so model.embed_tokens.weight "
                    "is used in its place");
  if (!other.empty())
    notes.push_back(where_.at(other[0])->path() + ": tensor '" + other[0] + "'" +
                    (other.size() > 1 ? " and " + std::to_string(other.size() - 1) + " more are" : " is") +
                    " not a weight lathe knows, and not used");
  return notes;
}

void HfWeights::fill(const std::string& name, const std::vector<int64_t>& shape, int64_t head_dim,
                     float* out) const {
  int64_t at = 0;
  for (const Piece& p : pieces(name, shape)) {
    const SafetensorsFile& f = file_of(p.hf_name, name);
    const SafetensorsTensor& t = *f.find(p.hf_name);
    if (t.shape != p.shape)
      throw Error(f.path() + ": tensor '" + p.hf_name + "': shape " + shape_text(t.shape) +
                  ", expected " + shape_text(p.shape));
    f.read_f32(p.hf_name, 0, t.elements(), out + at);
    for (int64_t i = 0; i < t.elements(); ++i)  // a NaN or infinite weight makes every logit NaN
      if (!std::isfinite(out[at + i]))
        throw Error(f.path() + ": tensor '" + p.hf_name + "': element " + std::to_string(i) + " is " +
                    (std::isnan(out[at + i]) ? "NaN" : "infinite"));
    at += t.elements();
  }
  bool rope = name.ends_with(".wq") || name.ends_with(".wk");
  if (!rope) return;
  // Rotate-half rows -> interleaved pairs, head by head: lathe row 2i+j = HF row j*(d/2)+i.
  LATHE_ASSERT(shape.size() == 2 && head_dim > 0 && head_dim % 2 == 0 && shape[0] % head_dim == 0,
               "bad RoPE weight shape for " + name);
  const int64_t K = shape[1], d = head_dim, half = d / 2;
  std::vector<float> head(size_t(d * K));
  for (int64_t h = 0; h < shape[0] / d; ++h) {
    float* rows = out + h * d * K;
    std::copy(rows, rows + d * K, head.begin());
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::copy_n(head.begin() + (j * half + i) * K, K, rows + (2 * i + j) * K);
  }
}

WeightSource HfWeights::source(const Graph& g) const {
  std::shared_ptr<const HfWeights> self = shared_from_this();
  int64_t head_dim = g.attrs.i("head_dim");
  return [self, head_dim](const std::string& name, const std::vector<int64_t>& shape, float* out) {
    self->fill(name, shape, head_dim, out);
  };
}

}  // namespace lathe
