#include "codegen/plan.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <variant>

#include "ir/assert.h"
#include "ir/atomic_file.h"
#include "ir/buffers.h"
#include "ir/json_fields.h"
#include "ir/text.h"
#include "ir/verifier.h"

namespace lathe {

using nlohmann::json;

namespace {

json target_json(const Target& t) {
  json j = {{"name", t.name},
            {"description", t.description},
            {"measured_with", t.measured_with},
            {"kind", t.is_gpu() ? "gpu" : "cpu"},
            {"compute_capability", t.compute_capability}};
  for (const TargetField& f : target_fields()) j["fields"][std::string(f.key)] = get_field(t, f);
  return j;
}

Target target_from(const json& j) {
  Target t;
  t.name = json_string_at(j, "name", "target.name");
  t.description = j.value("description", "");
  // Plans written before specs carried it have none: not measured.
  if (j.contains("measured_with")) t.measured_with = json_string(j["measured_with"], "target.measured_with");
  if (printable(t.name) != t.name || printable(t.description) != t.description ||
      printable(t.measured_with) != t.measured_with)
    throw Error("target name, description or measured_with holds control characters");
  const std::string kind = json_string_at(j, "kind", "target.kind");
  if (kind != "gpu" && kind != "cpu") throw Error("target kind '" + kind + "' (expected cpu or gpu)");
  t.kind = kind == "gpu" ? TargetKind::gpu : TargetKind::cpu;
  const int64_t cc = json_integer_at(j, "compute_capability", "target.compute_capability");
  if (cc < 0 || cc > 1000) throw Error("target.compute_capability: " + std::to_string(cc) + " is outside [0, 1000]");
  t.compute_capability = int(cc);
  const nlohmann::json& fields = json_field(j, "fields", "target.fields");
  if (!fields.is_object()) throw Error("target.fields: not an object");
  for (const TargetField& f : target_fields()) {
    auto it = fields.find(std::string(f.key));
    if (it == fields.end()) continue;
    double v = json_number(*it, "target field " + std::string(f.key));
    FieldRange r = target_field_range(f);
    if (!r.contains(v))  // the ranges of hardware TOML files and --set
      throw Error("target field " + std::string(f.key) + " = " + it->dump() + " is outside " + r.text());
    set_field(t, f, v);
  }
  return t;
}

json phase_json(const Graph& g) {
  json nodes = json::array();
  Bindings b = graph_bindings(g);
  for (NodeId id : g.topo_order()) {
    const Node& n = g.node(id);
    json in = json::array(), out = json::array();
    for (ValueId v : n.inputs) in.push_back(value_ref(g.value(v)));
    for (ValueId v : n.outputs) {
      const Value& val = g.value(v);
      out.push_back({{"name", val.name},
                     {"dtype", std::string(dtype_name(val.dtype))},
                     {"shape", shape_str(val.shape)},
                     {"bytes", value_bytes(val, b)},
                     {"offset", val.offset}});
    }
    json attrs = json::object();
    for (const auto& [k, v] : n.attrs.items()) attrs[k] = attr_value_str(v);
    nodes.push_back({{"name", n.name},
                     {"op", std::string(op_name(n.kind))},
                     {"absorbed", n.absorbed},
                     {"inputs", in},
                     {"outputs", out},
                     {"attrs", attrs}});
  }
  json weights = json::array();
  for (ValueId v : g.values_of(ValueKind::weight)) {
    const Value& w = g.value(v);
    weights.push_back({{"name", w.name},
                       {"format", format_name(w.format)},
                       {"shape", shape_str(w.shape)},
                       {"bytes", value_bytes(w, b)}});
  }
  return {{"bindings", {{"B", b.B}, {"S", b.S}, {"T", b.T}}},
          {"arena_bytes", g.attrs.i("arena_bytes", -1)},
          {"kernels", nodes.size()},
          {"nodes", nodes},
          {"weights", weights},
          {"ir", print_graph(g)}};
}

}  // namespace

std::string target_to_json_text(const Target& t) { return target_json(t).dump(2); }

std::string plan_to_json(const Plan& p) {
  json records = json::array();
  for (const PassRecord& r : p.records)
    records.push_back({{"pass", r.pass},
                       {"changed", r.changed},
                       {"note", r.note},
                       {"prefill_kernels", r.prefill_kernels},
                       {"decode_kernels", r.decode_kernels},
                       {"prefill_bytes", r.prefill_bytes},
                       {"decode_bytes_per_step", r.decode_bytes_per_step},
                       {"prefill_ms", r.prefill_s * 1e3},
                       {"decode_ms", r.decode_s * 1e3},
                       {"tpot_ms", r.tpot_s * 1e3},
                       {"weight_bytes", r.weight_bytes},
                       {"kv_bytes", r.kv_bytes},
                       {"activation_bytes", r.activation_bytes},
                       {"pass_ms", r.pass_ms}});
  json j = {{"lathe_plan", kPlanFormatVersion},
            {"model", p.model},
            {"target", target_json(p.target)},
            {"workload", {{"batch", p.workload.batch}, {"prompt", p.workload.prompt}, {"gen", p.workload.gen}}},
            {"options",
             {{"weights", p.weights_format},
              {"kv_dtype", p.kv_dtype},
              {"kv_layout", p.kv_layout},
              {"kv_layout_reason", p.kv_layout_reason},
              {"act_dtype", p.act_dtype},
              {"tp", p.tp}}},
            {"pipeline", p.pipeline},
            {"passes", records},
            {"prefill", phase_json(p.prefill)},
            {"decode", phase_json(p.decode)}};
  return j.dump(2) + "\n";
}

namespace {
// A plan file's graphs verify on their own (shapes, dtypes, buffers), but the runtime
// also sizes the KV cache, the logits and its loops from the graph attributes (layers,
// kv_heads, head_dim, B, final_context, vocab...). A hand-edited attribute that
// disagrees with the values the kernels index would write out of bounds, so they are
// checked against each other and against the graph before anything is allocated.
void check_plan_attrs(const Graph& prefill, const Graph& decode, const std::string& source) {
  auto fail = [&](const Graph& g, const std::string& why) { throw Error(source + ": " + g.name + ": " + why); };
  static constexpr const char* kPositive[] = {"B",        "S",        "T",      "final_context", "layers", "heads",
                                              "kv_heads", "head_dim", "hidden", "vocab",         "tp"};
  for (const Graph* gp : {&prefill, &decode}) {
    const Graph& g = *gp;
    for (const char* k : kPositive) {
      const AttrValue* v = g.attrs.find(k);
      if (!v) fail(g, std::string("graph attribute '") + k + "' is missing");
      if (!std::holds_alternative<int64_t>(*v) || std::get<int64_t>(*v) < 1)
        fail(g, std::string("graph attribute '") + k + "' must be a positive integer");
    }
    if (g.attrs.has("arena_bytes") && g.attrs.i("arena_bytes", -1) < 0) fail(g, "arena_bytes must be >= 0");
    const int64_t layers = g.attrs.i("layers"), kvh = g.attrs.i("kv_heads"), d = g.attrs.i("head_dim");
    const int64_t tp = g.attrs.i("tp"), vocab = g.attrs.i("vocab");
    for (const char* k : {"rope_theta", "norm_eps"})
      if (g.attrs.has(k) && !(g.attrs.f(k) > 0 && std::isfinite(g.attrs.f(k))))
        fail(g, std::string("graph attribute '") + k + "' must be a positive number");
    if (g.attrs.i("T") > g.attrs.i("final_context"))
      fail(g, "T (" + std::to_string(g.attrs.i("T")) + ") exceeds final_context (" +
                  std::to_string(g.attrs.i("final_context")) + ")");
    if (vocab % tp != 0) fail(g, "vocab is not divisible by tp");
    const Shape kv_shape = {Dim::c(layers), Dim::c(2), Dim::B(), Dim::T(), Dim::c(kvh), Dim::c(d)};
    if (g.values_of(ValueKind::state).size() != 1) fail(g, "expected one KV state value ($kv)");
    for (ValueId v : g.values_of(ValueKind::state)) {
      const Value& val = g.value(v);
      if (val.shape != kv_shape)
        fail(g, "KV state " + val.name + shape_str(val.shape) + " does not match layers, kv_heads and head_dim " +
                    shape_str(kv_shape));
    }
    ValueId emb = g.find_value("tok_embeddings");
    if (emb != kNone) {
      const Shape& sh = g.value(emb).shape;
      // A tied table (the LM head reads it) is split by vocabulary over tp devices
      // (frontend/builder.cpp); an untied one is whole.
      bool tied = false;
      for (NodeId id : g.topo_order())
        if (g.node(id).kind == OpKind::lm_head)
          for (ValueId in : g.node(id).inputs) tied = tied || in == emb;
      if (sh.size() != 2 || sh[0] != Dim::c(tied ? vocab / tp : vocab) || sh[1] != Dim::c(g.attrs.i("hidden")))
        fail(g, "tok_embeddings" + shape_str(sh) + " does not match vocab and hidden");
    }
    for (NodeId id : g.topo_order()) {
      const Node& n = g.node(id);
      for (const auto& [key, value] : n.attrs.items())
        if (std::holds_alternative<double>(value) && !std::isfinite(std::get<double>(value)))
          fail(g, "node '" + n.name + "': " + key + " is not a finite number");
      auto same = [&](const char* key, int64_t want) {
        if (n.attrs.has(key) && n.attrs.i(key, -1) != want)
          fail(g, "node '" + n.name + "': " + key + " = " + std::to_string(n.attrs.i(key, -1)) +
                      ", but the graph says " + std::to_string(want));
      };
      same("kv_heads", kvh);
      same("head_dim", d);
      if (g.attrs.has("experts")) same("experts", g.attrs.i("experts"));
      if (g.attrs.has("top_k")) same("top_k", g.attrs.i("top_k"));
      if (n.attrs.has("layer") && (n.attrs.i("layer", -1) < 0 || n.attrs.i("layer", -1) >= layers))
        fail(g, "node '" + n.name + "': layer " + std::to_string(n.attrs.i("layer", -1)) + " is outside 0.." +
                    std::to_string(layers - 1));
      // A layer's nodes are named "l<N>." and index its KV slice and weights: a node of
      // layer 1 relabelled layer 0 ran, writing layer 0's cache (other tokens, no error).
      if (n.attrs.has("layer") && n.name.size() > 1 && n.name[0] == 'l' && std::isdigit(uint8_t(n.name[1]))) {
        const int64_t named = std::strtoll(n.name.c_str() + 1, nullptr, 10);
        if (named != n.attrs.i("layer", -1))
          fail(g, "node '" + n.name + "': layer " + std::to_string(n.attrs.i("layer", -1)) +
                      ", but its name says layer " + std::to_string(named));
      }
      if (n.kind == OpKind::lm_head && !n.outputs.empty()) {
        const Shape& sh = g.value(n.outputs[0]).shape;
        if (sh.empty() || sh.back() != Dim::c(vocab / tp))
          fail(g, "node '" + n.name + "': logits" + shape_str(sh) + " do not match vocab / tp = " +
                      std::to_string(vocab / tp));
      }
    }
  }
  // Hand-edited plans: what the kernels and the weight packing rely on, as errors (they
  // were crashes or silently wrong tokens).
  for (const Graph* gp : {&prefill, &decode}) {
    const Graph& g = *gp;
    bool offsets = false;
    for (size_t v = 0; v < g.value_capacity(); ++v)
      if (g.value(ValueId(v)).alive && g.value(ValueId(v)).offset >= 0) offsets = true;
    if (offsets && !g.attrs.has("arena_bytes"))
      fail(g, "values have memory-plan offsets but the graph has no arena_bytes");
    for (ValueId v : g.values_of(ValueKind::weight)) {
      const Value& w = g.value(v);
      const Format& f = w.format;
      std::string where = "weight " + w.name + " (" + format_name(f) + shape_str(w.shape) + ")";
      for (const Dim& d : w.shape)
        if (!d.is_const()) fail(g, where + ": weight dimensions must be constants");
      // The formats --weights accepts (the spelling round-trips), groups dividing the
      // reduction length, and quantized formats on matrices only.
      std::string why;
      std::optional<Format> spelled = parse_weight_format(format_name(f), &why);
      if (!spelled || *spelled != f)
        fail(g, where + ": not a weight format lathe stores" + (why.empty() ? "" : " (" + why + ")"));
      const int64_t K = w.shape.empty() ? 0 : w.shape.back().coef;
      if (f.group > 0 && K % f.group != 0)
        fail(g, where + ": the group of " + std::to_string(f.group) + " does not divide K = " + std::to_string(K));
      if (f.has_scales() && w.shape.size() < 2) fail(g, where + ": only matrices are stored quantized");
      const Graph& other = gp == &prefill ? decode : prefill;
      ValueId ov = other.find_value(w.name);
      if (ov != kNone && (other.value(ov).format != f || other.value(ov).shape != w.shape))
        fail(g, where + " differs from the same weight in " + other.name);
    }
    for (NodeId id : g.topo_order()) {
      const Node& n = g.node(id);
      auto positive = [&](const char* key, bool required) {
        if (!n.attrs.has(key)) {
          if (required) fail(g, "node '" + n.name + "': attribute '" + std::string(key) + "' is missing");
          return;
        }
        if (!(n.attrs.f(key) > 0)) fail(g, "node '" + n.name + "': " + key + " must be positive");
      };
      const bool rope = n.kind == OpKind::rope || n.kind == OpKind::rope_kvwrite;
      const bool attention =
          n.kind == OpKind::qk || n.kind == OpKind::flash_attention || n.kind == OpKind::decode_attention;
      // Every expert weight holds the graph's experts (the router picks ids below it;
      // an edited first dimension made the kernels read past the weight).
      if (n.kind == OpKind::expert_matmul || n.kind == OpKind::moe_router) {
        const int64_t E = g.attrs.i("experts", -1);
        if (E < 1) fail(g, "node '" + n.name + "': an MoE node in a graph without 'experts'");
        for (ValueId in : n.inputs) {
          const Value& w = g.value(in);
          if (w.kind != ValueKind::weight) continue;
          if (w.shape.empty() || w.shape[0] != Dim::c(E))
            fail(g, "node '" + n.name + "': weight " + w.name + shape_str(w.shape) + " does not hold the graph's " +
                        std::to_string(E) + " experts in its first dimension");
        }
      }
      // lathe's prefill attention is causal; a flash_attention node says so.
      if (n.kind == OpKind::flash_attention && n.attrs.has("causal") &&
          n.attrs.i("causal", -1) != (g.phase == Phase::prefill ? 1 : 0))
        fail(g, "node '" + n.name + "': causal = " + std::to_string(n.attrs.i("causal", -1)) +
                    " (lathe's prefill attention is causal: 1 in prefill)");
      positive("theta", rope);
      positive("scale", attention);
      positive("eps", n.kind == OpKind::rms_norm);
      // RoPE's theta and the norms' eps are the model's (the graph's rope_theta and
      // norm_eps): an edited one ran with other tokens.
      for (const auto& [key, model_key] : {std::pair{"theta", "rope_theta"}, std::pair{"eps", "norm_eps"}})
        if (n.attrs.has(key) && g.attrs.has(model_key) && n.attrs.f(key) != g.attrs.f(model_key))
          fail(g, "node '" + n.name + "': " + key + " = " + attr_value_str(AttrValue(n.attrs.f(key))) +
                      ", but the graph's " + model_key + " is " + attr_value_str(AttrValue(g.attrs.f(model_key))));
      // The attention scale is 1 / sqrt(head_dim), as lathe builds it (an edited one ran).
      if (attention && n.attrs.has("scale") && g.attrs.i("head_dim", 0) > 0) {
        const double want = 1.0 / std::sqrt(double(g.attrs.i("head_dim", 0)));
        if (std::fabs(n.attrs.f("scale") - want) > 1e-12 * want)
          fail(g, "node '" + n.name + "': scale = " + attr_value_str(AttrValue(n.attrs.f("scale"))) +
                      ", but attention scales by 1 / sqrt(head_dim " + std::to_string(g.attrs.i("head_dim", 0)) +
                      ") = " + attr_value_str(AttrValue(want)));
      }
    }
  }
  for (const char* k : {"B", "final_context", "layers", "heads", "kv_heads", "head_dim", "hidden", "vocab", "tp",
                        "experts", "top_k", "kv_layout", "kv_dtype", "act_dtype"}) {
    const AttrValue *a = prefill.attrs.find(k), *b = decode.attrs.find(k);
    if ((a == nullptr) != (b == nullptr) || (a && !(*a == *b)))
      throw Error(source + ": graph attribute '" + k + "' differs between the prefill and decode graphs");
  }
  if (decode.attrs.i("S") != 1) throw Error(source + ": the decode graph must have S = 1");
  {
    std::string why;
    if (!parse_kv_layout(decode.attrs.s("kv_layout", ""), &why))
      throw Error(source + ": graph attribute kv_layout: " + why);
  }
  // The runtime sizes its buffers from each graph's B, S and T and the KV cache from
  // final_context: they must agree as lathe compiles them (an edited T or final_context
  // wrote past the cache or read positions that were never written).
  if (prefill.attrs.i("T") != prefill.attrs.i("S"))
    throw Error(source + ": the prefill graph's T (" + std::to_string(prefill.attrs.i("T")) +
                ") must equal its S (" + std::to_string(prefill.attrs.i("S")) + "), the prompt length");
  if (decode.attrs.i("T") != decode.attrs.i("final_context"))
    throw Error(source + ": the decode graph's T (" + std::to_string(decode.attrs.i("T")) +
                ") must equal final_context (" + std::to_string(decode.attrs.i("final_context")) +
                "), the KV cache length");
  if (prefill.attrs.i("S") > prefill.attrs.i("final_context"))  // equal: compiled with --gen 0
    throw Error(source + ": the prompt (prefill S = " + std::to_string(prefill.attrs.i("S")) +
                ") exceeds final_context (" + std::to_string(prefill.attrs.i("final_context")) + ")");
}
}  // namespace

Plan plan_from_json(const std::string& text, const std::string& source) {
  json j;
  try {
    j = parse_json_unique_keys(text.begin(), text.end(), source);
  } catch (const json::parse_error& e) {
    throw Error(source + ": not a valid plan file (JSON error at byte " + std::to_string(e.byte) +
                (text.empty() ? ": the file is empty" : ": truncated or corrupted") + ")");
  } catch (const json::exception& e) {  // e.g. a number too large for a double (out_of_range)
    throw Error(source + ": not a valid plan file (" + std::string(e.what()) + ")");
  }
  try {
    if (!j.is_object() || !j.contains("lathe_plan"))
      throw Error(source + ": not a lathe plan (no \"lathe_plan\" version field)");
    if (!j["lathe_plan"].is_number_integer())
      throw Error(source + ": \"lathe_plan\" must be an integer format version");
    if (!(j.at("lathe_plan") == kPlanFormatVersion))
      throw Error(source + ": plan format version " + j.at("lathe_plan").dump() + ", but this lathe reads version " +
                  std::to_string(kPlanFormatVersion) + "; recompile the plan with `lathe compile`");
    Plan p;
    // Fields by type, named in errors ("plan.json: options.kv_dtype: 5 is not a string").
    auto at = [&](const std::string& what) { return source + ": " + what; };
    p.model = json_string_at(j, "model", at("model"));
    const json& target = json_field(j, "target", at("target"));
    try {
      p.target = target_from(target);
    } catch (const Error& e) {
      throw Error(source + ": " + e.what());
    }
    const json& w = json_field(j, "workload", at("workload"));
    p.workload = {json_integer_at(w, "batch", at("workload.batch")),
                  json_integer_at(w, "prompt", at("workload.prompt")),
                  json_integer_at(w, "gen", at("workload.gen"))};
    const json& o = json_field(j, "options", at("options"));
    p.weights_format = json_string_at(o, "weights", at("options.weights"));
    p.kv_dtype = json_string_at(o, "kv_dtype", at("options.kv_dtype"));
    p.kv_layout = json_string_at(o, "kv_layout", at("options.kv_layout"));
    p.kv_layout_reason =
        o.contains("kv_layout_reason") ? json_string_at(o, "kv_layout_reason", at("options.kv_layout_reason")) : "";
    p.act_dtype = json_string_at(o, "act_dtype", at("options.act_dtype"));
    p.tp = json_integer_at(o, "tp", at("options.tp"));
    const json& pipeline = json_field(j, "pipeline", at("pipeline"));
    if (!pipeline.is_array()) throw Error(source + ": pipeline: not a list of pass names");
    for (size_t i = 0; i < pipeline.size(); ++i) {
      if (!pipeline[i].is_string())
        throw Error(source + ": pipeline[" + std::to_string(i) + "]: " + pipeline[i].dump() + " is not a pass name");
      p.pipeline.push_back(pipeline[i].get<std::string>());
    }
    const json& passes = json_field(j, "passes", at("passes"));
    if (!passes.is_array()) throw Error(source + ": passes: not a list");
    for (size_t i = 0; i < passes.size(); ++i) {
      const json& r = passes[i];
      const std::string rec = "passes[" + std::to_string(i) + "].";
      PassRecord pr;
      pr.pass = json_string_at(r, "pass", at(rec + "pass"));
      pr.changed = json_bool_at(r, "changed", at(rec + "changed"));
      pr.note = json_string_at(r, "note", at(rec + "note"));
      const int64_t pk = json_integer_at(r, "prefill_kernels", at(rec + "prefill_kernels")),
                    dk = json_integer_at(r, "decode_kernels", at(rec + "decode_kernels"));
      if (pk < 0 || pk > INT32_MAX || dk < 0 || dk > INT32_MAX)
        throw Error(at(rec + "prefill_kernels / decode_kernels: outside [0, 2^31)"));
      pr.prefill_kernels = int(pk);
      pr.decode_kernels = int(dk);
      pr.prefill_s = json_number_at(r, "prefill_ms", at(rec + "prefill_ms")) / 1e3;
      pr.decode_s = json_number_at(r, "decode_ms", at(rec + "decode_ms")) / 1e3;
      pr.tpot_s = json_number_at(r, "tpot_ms", at(rec + "tpot_ms")) / 1e3;
      p.records.push_back(pr);
    }
    p.prefill = parse_graph(json_string_at(json_field(j, "prefill", at("prefill")), "ir", at("prefill.ir")),
                            source + " (prefill IR)");
    p.decode =
        parse_graph(json_string_at(json_field(j, "decode", at("decode")), "ir", at("decode.ir")), source + " (decode IR)");
    for (const Graph* g : {&p.prefill, &p.decode}) {
      std::vector<std::string> errs = verify(*g);
      if (!errs.empty()) throw Error(source + ": " + g->name + " does not verify: " + errs[0]);
    }
    check_plan_attrs(p.prefill, p.decode, source);
    // The header's options, as the graphs have them (`run --format json` reports these
    // and `lathe calibrate` reads them back).
    auto header = [&](const std::string& key, const std::string& value, const std::string& graph_value) {
      if (value != graph_value)
        throw Error(source + ": \"" + key + "\" is \"" + value + "\" but the graphs say \"" + graph_value + "\"");
    };
    header("model", p.model, p.prefill.attrs.s("model", ""));
    header("options.kv_dtype", p.kv_dtype, p.prefill.attrs.s("kv_dtype", ""));
    header("options.act_dtype", p.act_dtype, p.prefill.attrs.s("act_dtype", ""));
    header("options.kv_layout", p.kv_layout, p.prefill.attrs.s("kv_layout", ""));
    header("options.tp", std::to_string(p.tp), std::to_string(p.prefill.attrs.i("tp")));
    if (!p.weights_format.empty()) {
      std::string why;
      std::optional<Format> wf = parse_weight_format(p.weights_format, &why);
      if (!wf) throw Error(source + ": \"options.weights\": " + (why.empty() ? "not a weight format" : why));
      // The format the graphs' GEMM weights mostly hold (the LM head may stay wider).
      std::map<std::string, int> seen;
      for (NodeId id : p.prefill.topo_order()) {
        const Node& n = p.prefill.node(id);
        if (n.kind == OpKind::lm_head) continue;
        auto parts = gemm_parts(n.kind, n.attrs, n.inputs.size());
        if (!parts) continue;
        for (int w = 0; w < parts->num_weights; ++w)
          ++seen[format_name(p.prefill.value(n.inputs[size_t(parts->first_weight + w)]).format)];
      }
      auto most = std::max_element(seen.begin(), seen.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
      if (most != seen.end()) header("options.weights", format_name(*wf), most->first);
    }
    const auto known = known_pass_names();
    for (const std::string& pass : p.pipeline)
      if (std::find(known.begin(), known.end(), pass) == known.end())
        throw Error(source + ": \"pipeline\" names an unknown pass '" + pass + "'");
    // The workload the plan was compiled for, as the graphs have it.
    const Workload& wl = p.workload;
    if (wl.batch != p.prefill.attrs.i("B") || wl.prompt != p.prefill.attrs.i("S") ||
        wl.gen < 0 || wl.prompt + wl.gen != p.prefill.attrs.i("final_context"))
      throw Error(source + ": workload {batch " + std::to_string(wl.batch) + ", prompt " + std::to_string(wl.prompt) +
                  ", gen " + std::to_string(wl.gen) + "} does not match the graphs (B " +
                  std::to_string(p.prefill.attrs.i("B")) + ", prompt S " + std::to_string(p.prefill.attrs.i("S")) +
                  ", final_context " + std::to_string(p.prefill.attrs.i("final_context")) + " = prompt + gen)");
    // What hardware TOML files and --set refuse (a zero peak predicted NaN times).
    if (std::string why = target_problem(p.target); !why.empty()) throw Error(source + ": target: " + why);
    return p;
  } catch (const json::exception& e) {
    throw Error(source + ": malformed plan file: " + json_error_text(e.what()));
  }
}

Plan load_plan_dir(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file = fs::is_directory(path, ec) ? fs::path(path) / "plan.json" : fs::path(path);
  // A directory that is neither a compiled plan nor a checkpoint: say what it lacks
  // ("DIR/plan.json: cannot open file" beside a config.json that is a directory).
  if (fs::is_directory(path, ec) && !fs::exists(file, ec))
    throw Error(path + ": a directory with no plan.json (a compiled plan) and no config.json file (a Hugging Face " +
                "checkpoint)" + (fs::is_directory(fs::path(path) / "config.json", ec) ? "; its config.json is a directory" : ""));
  return plan_from_json(read_file(file.string()), file.string());
}

}  // namespace lathe
