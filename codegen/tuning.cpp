#include "codegen/tuning.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "codegen/cpu/kernel_lib.h"
#include "ir/assert.h"

namespace lathe {

namespace {
constexpr const char* kParamNames[] = {"tune_rows", "tune_cols", "tune_qt", "tune_split"};
}  // namespace

std::optional<TuningKey> tuning_key(const Graph& g, NodeId id, const std::string& backend) {
  if (backend != "cpu") return std::nullopt;
  const Node& n = g.node(id);
  if (!n.alive) return std::nullopt;
  if (n.kind == OpKind::matmul || n.kind == OpKind::lm_head) {
    // Only GEMMs over more than kGemvRows rows take the tiled path the knobs shape.
    int64_t rows = n.kind == OpKind::lm_head ? g.attrs.i("B") : g.attrs.i("B") * g.attrs.i("S");
    if (rows <= lk::kGemvRows) return std::nullopt;
    auto p = gemm_parts(n.kind, n.attrs, n.inputs.size());
    if (!p) return std::nullopt;
    const Value& x = g.value(n.inputs[size_t(p->x)]);
    std::string ns;
    for (int w = 0; w < p->num_weights; ++w) {
      const Value& wv = g.value(n.inputs[size_t(p->first_weight + w)]);
      ns += (w ? "+" : "") + wv.shape[wv.shape.size() - 2].str();
    }
    const Value& w0 = g.value(n.inputs[size_t(p->first_weight)]);
    std::string shape = "K=" + x.shape.back().str() + " N=" + ns + " w=" + format_name(w0.format) +
                        " pro=" + n.attrs.s("prologue", "none") +
                        " epi=" + n.attrs.s("epilogue", "none") +
                        (n.kind == OpKind::lm_head ? " lm_head" : "");
    return TuningKey{"gemm", shape};
  }
  if (n.kind == OpKind::flash_attention || n.kind == OpKind::decode_attention) {
    std::string shape = "H=" + std::to_string(n.attrs.i("heads")) +
                        " KVH=" + std::to_string(n.attrs.i("kv_heads")) +
                        " D=" + std::to_string(n.attrs.i("head_dim")) +
                        " kv=" + g.attrs.s("kv_dtype") + " layout=" + g.attrs.s("kv_layout");
    return TuningKey{n.kind == OpKind::flash_attention ? "flash_attention" : "decode_attention",
                     shape};
  }
  return std::nullopt;
}

std::vector<std::map<std::string, int64_t>> tuning_candidates(const std::string& kind) {
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
    for (const char* p : kParamNames) n.attrs.erase(p);
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
    nlohmann::json j = nlohmann::json::parse(text);
    if (!j.is_object() || j.value("format", "") != "lathe-tuning")
      throw Error(source + ": not a lathe tuning file (expected \"format\": \"lathe-tuning\")");
    if (j.value("version", 0) != 1)
      throw Error(source + ": tuning file version " + j.value("version", nlohmann::json(0)).dump() +
                  " (this lathe reads version 1)");
    t.backend = j.at("backend").get<std::string>();
    t.machine = j.value("machine", "");
    t.model = j.value("model", "");
    t.target = j.value("target", "");
    if (j.contains("workload")) {
      t.batch = j["workload"].value("batch", int64_t(1));
      t.prompt = j["workload"].value("prompt", int64_t(1));
      t.gen = j["workload"].value("gen", int64_t(1));
    }
    for (const auto& e : j.at("entries")) {
      TuningEntry x;
      x.kind = e.at("kind").get<std::string>();
      x.shape = e.at("shape").get<std::string>();
      for (const auto& [k, v] : e.at("params").items()) {
        if (std::find(std::begin(kParamNames), std::end(kParamNames), k) == std::end(kParamNames))
          throw Error(source + ": entry " + x.kind + " '" + x.shape + "': unknown parameter '" + k +
                      "'");
        x.params[k] = v.get<int64_t>();
      }
      x.default_us = e.value("default_us", 0.0);
      x.best_us = e.value("best_us", 0.0);
      t.entries.push_back(std::move(x));
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": malformed tuning file: " + e.what());
  }
  return t;
}

}  // namespace lathe
