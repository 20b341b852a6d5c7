#include "codegen/tuning.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "codegen/cpu/kernel_lib.h"
#include "codegen/cuda/emit_cuda.h"
#include "codegen/kernel_facts.h"
#include "ir/assert.h"
#include "ir/json_fields.h"

namespace lathe {

namespace {

// Every tuning parameter, the backend whose emitter reads it, the kernel kind it
// shapes and the values that emitter accepts (`allowed` empty: any value in [lo, hi]).
struct ParamRule {
  const char* name;
  const char* backend;
  const char* kind;
  int64_t lo, hi;
  std::vector<int64_t> allowed;
};
const std::vector<ParamRule>& param_rules() {
  static const std::vector<ParamRule> rules = {
      {"tune_rows", "cpu", "gemm", 0, 4096, {}},
      {"tune_cols", "cpu", "gemm", 0, 4096, {}},
      {"tune_qt", "cpu", "flash_attention", 1, 256, {}},
      {"tune_split", "cpu", "decode_attention", 1, 64, {}},
      {"tune_cuda_warps", "cuda", "gemv", 4, 16, {4, 8, 16}},
      {"tune_cuda_loads", "cuda", "gemv", 1, 8, {1, 2, 4, 8}},
      {"tune_cuda_split", "cuda", "decode_attention", 1, 128, {}},
  };
  return rules;
}

// The text after `field` in a shape key ("K=" in "K=4096 N=..."), up to the next space.
std::string shape_field(const std::string& shape, const std::string& field) {
  size_t at = shape.find(field);
  while (at != std::string::npos && at > 0 && shape[at - 1] != ' ') at = shape.find(field, at + 1);
  if (at == std::string::npos) return "";
  at += field.size();
  return shape.substr(at, shape.find(' ', at) - at);
}
int64_t shape_int(const std::string& shape, const std::string& field) {
  std::string v = shape_field(shape, field);
  if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || v.size() > 12) return -1;
  return std::stoll(v);
}

// "K=4096 N=1024+1024 w=int8 pro=rms_norm epi=none": the GEMM family's shape key.
std::optional<std::string> gemm_shape(const Graph& g, const Node& n) {
  auto p = gemm_parts(n.kind, n.attrs, n.inputs.size());
  if (!p) return std::nullopt;
  const Value& x = g.value(n.inputs[size_t(p->x)]);
  std::string ns;
  for (int w = 0; w < p->num_weights; ++w) {
    const Value& wv = g.value(n.inputs[size_t(p->first_weight + w)]);
    ns += (w ? "+" : "") + wv.shape[wv.shape.size() - 2].str();
  }
  const Value& w0 = g.value(n.inputs[size_t(p->first_weight)]);
  return "K=" + x.shape.back().str() + " N=" + ns + " w=" + format_name(w0.format) +
         " pro=" + n.attrs.s("prologue", "none") + " epi=" + n.attrs.s("epilogue", "none") +
         (n.kind == OpKind::lm_head ? " lm_head" : "") +
         (n.kind == OpKind::expert_matmul ? " experts=" + w0.shape[0].str() : "");
}

std::string attention_shape(const Graph& g, const Node& n) {
  return "H=" + std::to_string(n.attrs.i("heads")) + " KVH=" + std::to_string(n.attrs.i("kv_heads")) +
         " D=" + std::to_string(n.attrs.i("head_dim")) + " kv=" + g.attrs.s("kv_dtype") +
         " layout=" + g.attrs.s("kv_layout");
}

std::optional<TuningKey> cuda_tuning_key(const Graph& g, const Node& n) {
  const int64_t B = g.attrs.i("B"), rows = B * g.attrs.i("S");
  if (n.kind == OpKind::matmul || n.kind == OpKind::lm_head) {
    // Only steps of at most kCudaGemvRows rows (sequences for lm_head) run the GEMV entry,
    // and of fewer than cuda_batched_min_rows where the node leaves it earlier (cuBLAS
    // is assumed present: it ships with the CUDA toolkit).
    const int64_t used = n.kind == OpKind::lm_head ? B : rows;
    const int batched = cuda_batched_min_rows(g, n);
    if (used > kCudaGemvRows || (batched > 0 && used >= batched)) return std::nullopt;
    if (auto s = gemm_shape(g, n)) return TuningKey{"gemv", *s};
    return std::nullopt;
  }
  if (n.kind == OpKind::expert_matmul) {
    auto p = gemm_parts(n.kind, n.attrs, n.inputs.size());
    if (!p) return std::nullopt;
    const Value& idx = g.value(n.inputs[size_t(p->idx)]);
    const Dim& k = idx.shape.back();
    if (!k.is_const() || rows > kCudaExpertGemvPairs / std::max<int64_t>(1, k.coef)) return std::nullopt;
    if (auto s = gemm_shape(g, n)) return TuningKey{"gemv", *s};
    return std::nullopt;
  }
  if (n.kind == OpKind::decode_attention)
    return TuningKey{"decode_attention", attention_shape(g, n) + " cap=" + std::to_string(kv_facts(g).capacity)};
  return std::nullopt;
}

}  // namespace

bool is_tuning_backend(const std::string& backend) { return backend == "cpu" || backend == "cuda"; }

std::vector<std::string> tuning_kinds(const std::string& backend) {
  std::vector<std::string> kinds;
  for (const ParamRule& r : param_rules())
    if (backend == r.backend && std::find(kinds.begin(), kinds.end(), r.kind) == kinds.end())
      kinds.push_back(r.kind);
  return kinds;
}

void check_tuning_param(const std::string& backend, const std::string& kind, const std::string& name,
                        int64_t value, const std::string& where) {
  for (const ParamRule& r : param_rules()) {
    if (name != r.name) continue;
    if (backend != r.backend)
      throw Error(where + ": '" + name + "' is a " + r.backend + " parameter, not a " + backend + " one");
    if (!kind.empty() && kind != r.kind)
      throw Error(where + ": '" + name + "' is a parameter of " + r.kind + " kernels, not of " + kind);
    bool ok = value >= r.lo && value <= r.hi;
    if (!r.allowed.empty()) ok = std::find(r.allowed.begin(), r.allowed.end(), value) != r.allowed.end();
    if (!ok) {
      std::string range;
      if (r.allowed.empty()) {
        range = std::to_string(r.lo) + " to " + std::to_string(r.hi);
      } else {
        for (int64_t v : r.allowed) range += (range.empty() ? "" : ", ") + std::to_string(v);
        range = "one of " + range;
      }
      throw Error(where + ": " + name + " = " + std::to_string(value) + " (expected " + range + ")");
    }
    return;
  }
  std::string known;
  for (const ParamRule& r : param_rules())
    if (backend == r.backend) known += (known.empty() ? "" : ", ") + std::string(r.name);
  throw Error(where + ": unknown parameter '" + name + "' (" + backend + " parameters: " + known + ")");
}

int64_t tuning_param(const Attrs& a, const std::string& backend, const char* name, int64_t def) {
  const AttrValue* v = a.find(name);
  if (!v) return def;
  const int64_t* i = std::get_if<int64_t>(v);
  if (!i) throw Error(std::string(name) + " must be an integer");
  check_tuning_param(backend, "", name, *i, "tuning");
  return *i;
}

std::optional<TuningKey> tuning_key(const Graph& g, NodeId id, const std::string& backend) {
  const Node& n = g.node(id);
  if (!n.alive) return std::nullopt;
  if (backend == "cuda") return cuda_tuning_key(g, n);
  if (backend != "cpu") return std::nullopt;
  if (n.kind == OpKind::matmul || n.kind == OpKind::lm_head) {
    // Only GEMMs over more than kGemvRows rows take the tiled path the knobs shape.
    int64_t rows = n.kind == OpKind::lm_head ? g.attrs.i("B") : g.attrs.i("B") * g.attrs.i("S");
    if (rows <= lk::kGemvRows) return std::nullopt;
    if (auto s = gemm_shape(g, n)) return TuningKey{"gemm", *s};
    return std::nullopt;
  }
  if (n.kind == OpKind::flash_attention || n.kind == OpKind::decode_attention)
    return TuningKey{n.kind == OpKind::flash_attention ? "flash_attention" : "decode_attention",
                     attention_shape(g, n)};
  return std::nullopt;
}

std::vector<std::map<std::string, int64_t>> tuning_candidates(const std::string& kind,
                                                              const std::string& backend,
                                                              const std::string& shape) {
  if (backend == "cuda") {
    // Candidates that would emit the default kernel, or one that behaves like another
    // candidate, are left out: they cost a round and can only win on noise.
    std::vector<std::map<std::string, int64_t>> c = {{}};
    if (kind == "gemv") {
      c.push_back({{"tune_cuda_warps", 4}});
      c.push_back({{"tune_cuda_warps", 16}});
      // Loads in flight: 2, and 8 for rows of at most 8 elements a load (16-bit, f32)
      // or 4 for rows that are decoded (int8, fp8, int4). Each lane takes every 32nd
      // 16-byte chunk of a row, so beyond ceil(chunks / 32) loads all behave alike.
      const int64_t K = shape_int(shape, "K=");
      const auto f = parse_weight_format(shape_field(shape, "w="));
      if (K <= 0 || !f) return c;
      const int E = cuda_chunk_elems(f->dtype);
      const int64_t per_lane = std::max<int64_t>(1, (K / E + 31) / 32);
      std::vector<int64_t> seen = {std::min<int64_t>(cuda_gemv_default_loads(f->dtype, K), per_lane)};
      for (int64_t u : {int64_t(2), int64_t(E <= 8 ? 8 : 4)}) {
        const int64_t eff = std::min(u, per_lane);
        if (std::find(seen.begin(), seen.end(), eff) != seen.end()) continue;
        seen.push_back(eff);
        c.push_back({{"tune_cuda_loads", u}});
      }
      return c;
    }
    if (kind == "decode_attention") {
      const int64_t cap = shape_int(shape, "cap=");
      const int64_t dflt = cap > 0 ? cuda_decode_default_splits(cap) : -1;
      for (int64_t sp : {8, 16, 32, 64})
        if (sp != dflt) c.push_back({{"tune_cuda_split", sp}});
    }
    return c;
  }
  if (kind == "gemm")
    return {{},
            {{"tune_cols", 32}},
            {{"tune_cols", 64}},
            {{"tune_cols", 256}},
            {{"tune_rows", 64}, {"tune_cols", 64}}};
  if (kind == "flash_attention") return {{}, {{"tune_qt", 4}}, {{"tune_qt", 8}}, {{"tune_qt", 32}}};
  if (kind == "decode_attention")
    return {{}, {{"tune_split", 2}}, {{"tune_split", 4}}, {{"tune_split", 8}}};
  return {{}};
}

int apply_params(Graph& g, const std::string& kind, const std::string& shape,
                 const std::map<std::string, int64_t>& params, const std::string& backend) {
  int changed = 0;
  for (NodeId id : g.topo_order()) {
    auto key = tuning_key(g, id, backend);
    if (!key || key->kind != kind || key->shape != shape) continue;
    Node& n = g.node_mut(id);
    for (const ParamRule& r : param_rules())
      if (backend == r.backend) n.attrs.erase(r.name);
    for (const auto& [k, v] : params) n.attrs.set(k, v);
    ++changed;
  }
  return changed;
}

int apply_tuning(Graph& g, const TuningFile& t, const std::string& backend) {
  if (t.backend != backend) return 0;
  int changed = 0;
  for (const TuningEntry& e : t.entries)
    changed += apply_params(g, e.kind, e.shape, e.params, backend);
  return changed;
}

std::string tuning_to_json(const TuningFile& t) {
  nlohmann::json j;
  j["format"] = "lathe-tuning";
  j["version"] = 1;
  j["backend"] = t.backend;
  j["machine"] = t.machine;
  j["model"] = t.model;
  j["target"] = t.target;
  j["workload"] = {{"batch", t.batch}, {"prompt", t.prompt}, {"gen", t.gen}};
  j["entries"] = nlohmann::json::array();
  for (const TuningEntry& e : t.entries) {
    nlohmann::json c = nlohmann::json::array();
    for (const auto& [params, us] : e.candidates) c.push_back({{"params", params}, {"us", us}});
    j["entries"].push_back({{"kind", e.kind},
                            {"shape", e.shape},
                            {"params", e.params},
                            {"default_us", e.default_us},
                            {"best_us", e.best_us},
                            {"candidates", c}});
  }
  return j.dump(2) + "\n";
}

TuningFile tuning_from_json(const std::string& text, const std::string& source) {
  TuningFile t;
  try {
    nlohmann::json j = parse_json_unique_keys(text.begin(), text.end(), source);
    if (!j.is_object() || !j.contains("format") || !j["format"].is_string() || j["format"] != "lathe-tuning")
      throw Error(source + ": not a lathe tuning file (expected \"format\": \"lathe-tuning\")");
    if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != 1)
      throw Error(source + ": tuning file version " + j.value("version", nlohmann::json(0)).dump() +
                  " (this lathe reads version 1)");
    // Fields by type, named in errors ("t.json: entries[2].shape: 7 is not a string").
    auto at = [&](const std::string& what) { return source + ": " + what; };
    auto text = [&](const nlohmann::json& in, const char* key, const std::string& what) {
      return json_string_at(in, key, at(what));
    };
    t.backend = text(j, "backend", "backend");
    if (!is_tuning_backend(t.backend))
      throw Error(source + ": backend '" + t.backend + "' (expected cpu or cuda)");
    const std::vector<std::string> kinds = tuning_kinds(t.backend);
    t.machine = j.contains("machine") ? text(j, "machine", "machine") : "";
    t.model = j.contains("model") ? text(j, "model", "model") : "";
    t.target = j.contains("target") ? text(j, "target", "target") : "";
    if (j.contains("workload")) {
      const nlohmann::json& w = j["workload"];
      if (!w.is_object()) throw Error(source + ": workload: " + w.dump() + " is not an object");
      auto count = [&](const char* key, int64_t& out, int64_t lo) {
        if (!w.contains(key)) return;
        out = json_integer(w[key], at(std::string("workload.") + key));
        if (out < lo)
          throw Error(at(std::string("workload.") + key) + ": " + std::to_string(out) + " is below " +
                      std::to_string(lo));
      };
      count("batch", t.batch, 1);
      count("prompt", t.prompt, 1);
      count("gen", t.gen, 0);
    }
    if (!j.contains("entries") || !j["entries"].is_array()) throw Error(source + ": \"entries\" must be an array");
    const nlohmann::json& entries = j["entries"];
    for (size_t i = 0; i < entries.size(); ++i) {
      const nlohmann::json& e = entries[i];
      const std::string rec = "entries[" + std::to_string(i) + "].";
      if (!e.is_object()) throw Error(source + ": entries[" + std::to_string(i) + "]: " + e.dump() + " is not an object");
      TuningEntry x;
      x.kind = text(e, "kind", rec + "kind");
      x.shape = text(e, "shape", rec + "shape");
      const std::string where = source + ": entry " + x.kind + " '" + x.shape + "'";
      if (std::find(kinds.begin(), kinds.end(), x.kind) == kinds.end()) {
        std::string known;
        for (const std::string& k : kinds) known += (known.empty() ? "" : ", ") + k;
        throw Error(where + ": unknown kernel kind for the " + t.backend + " backend (expected " + known + ")");
      }
      for (const TuningEntry& y : t.entries)
        if (y.kind == x.kind && y.shape == x.shape) throw Error(where + ": a second entry for this kernel");
      if (!e.contains("params") || !e["params"].is_object()) throw Error(where + ": params must be an object");
      if (e["params"].empty())  // it tunes nothing, yet counted as a tuned kernel
        throw Error(where + ": params is empty (an entry sets at least one parameter)");
      for (const auto& [k, v] : e["params"].items()) {
        const int64_t n = json_integer(v, where + ": " + k);
        check_tuning_param(t.backend, x.kind, k, n, where);
        x.params[k] = n;
      }
      auto time_us = [&](const char* key) {
        const double v = e.contains(key) ? json_number(e[key], where + ": " + key) : 0.0;
        if (!(v >= 0) || !std::isfinite(v))
          throw Error(where + ": " + key + ": " + e[key].dump() + " is not a time in microseconds (>= 0)");
        return v;
      };
      x.default_us = time_us("default_us");
      x.best_us = time_us("best_us");
      t.entries.push_back(std::move(x));
    }
  } catch (const nlohmann::json::parse_error& e) {
    // Not the parser's message: it quotes the bytes it read, which for a binary file
    // are control characters. Where it stopped, as a line and column.
    const size_t end = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const size_t line = 1 + size_t(std::count(text.begin(), text.begin() + long(end), '\n'));
    const size_t nl = text.rfind('\n', end == 0 ? 0 : end - 1);
    const size_t col = end - (nl == std::string::npos || end == 0 ? 0 : nl + 1) + 1;
    throw Error(source + ":" + std::to_string(line) + ":" + std::to_string(col) +
                ": not valid JSON (a tuning file is the JSON `lathe tune -o FILE` writes)");
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": malformed tuning file: " + json_error_text(e.what()));
  }
  return t;
}

}  // namespace lathe
