#include "frontend/specs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "frontend/embedded_specs.h"
#include "frontend/hf_config.h"
#include "frontend/plan_keys.h"
#include "frontend/toml_doc.h"
#include "checkpoint/gguf_model.h"
#include "ir/assert.h"

namespace lathe {

namespace {
constexpr int64_t kMaxDim = int64_t(1) << 40;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

// Reads the single top-level table `want` ([model], [hardware], [plan]) and rejects
// any other top-level key.
const TomlValue& top_table(const TomlValue& root, std::string_view want, const std::string& source) {
  TableReader top(root, "", source);
  const TomlValue* t = top.get_table(want);
  if (!t) {
    std::string have;
    for (const std::string& k : root.keys) have += (have.empty() ? "" : ", ") + k;
    throw Error(source + ":1:1: expected a [" + std::string(want) + "] table" +
                (have.empty() ? std::string(" (the file is empty)") : " (found: " + have + ")"));
  }
  top.finish();
  return *t;
}
}  // namespace

std::string_view spec_kind_name(SpecKind k) {
  switch (k) {
    case SpecKind::model: return "model";
    case SpecKind::hardware: return "hardware";
    case SpecKind::plan: return "plan";
    case SpecKind::sweep: return "sweep";
    case SpecKind::scenario: return "scenario";
    case SpecKind::unknown: return "unknown";
  }
  return "?";
}

void validate_model(const ModelSpec& m, const std::string& where) {
  auto bad = [&](const std::string& why) { throw Error(where + ": " + why); };
  // Sizes whose products would overflow 64-bit counts (each dimension alone may be
  // large): the parameter count, in floating point, stays below 1e15 (a thousand
  // times the largest published models), and the depth within kMaxLayers.
  if (m.layers > kMaxLayers) bad("layers (" + std::to_string(m.layers) + ") above " + std::to_string(kMaxLayers));
  double h = double(m.hidden), q = double(m.heads) * double(m.head_dim), kv = double(m.kv_heads) * double(m.head_dim);
  double ffn = m.is_moe() ? double(m.moe->experts) * (3.0 * h * double(m.moe->expert_ffn) + h) : 3.0 * h * double(m.ffn);
  double params = double(m.layers) * (2.0 * h * q + 2.0 * h * kv + ffn) + 2.0 * double(m.vocab) * h;
  if (!(params <= 1e15)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g", params);
    bad("about " + std::string(buf) + " parameters; lathe plans models of up to 1e15");
  }
  if (m.heads % m.kv_heads != 0)
    bad("kv_heads (" + std::to_string(m.kv_heads) + ") must divide heads (" + std::to_string(m.heads) + ")");
  if (m.head_dim % 2 != 0) bad("head_dim must be even for RoPE (got " + std::to_string(m.head_dim) + ")");
  if (m.is_moe()) {
    if (m.moe->top_k > m.moe->experts)
      bad("moe.top_k (" + std::to_string(m.moe->top_k) + ") exceeds moe.experts (" +
          std::to_string(m.moe->experts) + ")");
  } else if (m.ffn <= 0) {
    bad("ffn must be given for a dense model");
  }
}

ModelSpec parse_model_toml(std::string_view text, std::string_view source_sv) {
  std::string source(source_sv);
  TomlValue root = parse_toml(text, source);
  const TomlValue& t = top_table(root, "model", source);
  TableReader r(t, "model", source);
  ModelSpec m;
  m.name = r.require_string("name");
  if (std::string why = name_problem(m.name); !why.empty()) r.fail_at(*t.get("name"), "name", why);
  m.description = r.get_string("description").value_or("");
  m.arch = r.get_string("arch").value_or("llama");
  if (m.arch != "llama" && m.arch != "mistral" && m.arch != "mixtral" && m.arch != "qwen2")
    r.fail_at(*t.get("arch"), "arch", "unsupported architecture '" + m.arch + "' (expected llama, mistral, mixtral or qwen2)");
  m.hidden = r.require_int("hidden", 1, kMaxDim);
  m.layers = r.require_int("layers", 1, kMaxLayers);
  m.heads = r.require_int("heads", 1, 1 << 20);
  m.kv_heads = r.get_int("kv_heads", 1, 1 << 20).value_or(m.heads);
  if (auto hd = r.get_int("head_dim", 1, 1 << 20)) {
    m.head_dim = *hd;
  } else {
    if (m.hidden % m.heads != 0)
      r.fail_at(*t.get("heads"), "heads",
                "heads (" + std::to_string(m.heads) + ") must divide hidden (" + std::to_string(m.hidden) +
                    ") when head_dim is not given");
    m.head_dim = m.hidden / m.heads;
  }
  // Location of a key for messages: the key itself, or its table when absent.
  auto at = [&](const char* key) -> const TomlValue& { return t.get(key) ? *t.get(key) : t; };
  if (m.heads % m.kv_heads != 0)
    r.fail_at(at("kv_heads"), "kv_heads",
              "kv_heads (" + std::to_string(m.kv_heads) + ") must divide heads (" + std::to_string(m.heads) + ")");
  if (m.head_dim % 2 != 0)
    r.fail_at(at("head_dim"), "head_dim",
              "must be even (RoPE rotates pairs); got " + std::to_string(m.head_dim) +
                  (t.get("head_dim") ? "" : " = hidden / heads"));
  m.ffn = r.get_int("ffn", 1, kMaxDim).value_or(0);
  m.vocab = r.require_int("vocab", 1, kMaxDim);
  m.max_context = r.get_int("max_context", 1, kMaxDim).value_or(4096);
  m.norm_eps = r.get_double("norm_eps", 1e-12, 0.1).value_or(1e-5);
  m.rope_theta = r.get_double("rope_theta", 1.0, 1e12).value_or(10000.0);
  m.tie_embeddings = r.get_bool("tie_embeddings").value_or(false);
  if (const TomlValue* rs = r.get_table("rope_scaling")) {
    TableReader sr(*rs, "model.rope_scaling", source);
    RopeScaling sc;
    sc.type = sr.require_string("type");
    if (sc.type != "linear" && sc.type != "llama3")
      sr.fail_at(*rs->get("type"), "type", "expected \"linear\" or \"llama3\", got \"" + sc.type + "\"");
    auto factor = sr.get_double("factor", 1e-3, 1e6);
    if (!factor) sr.fail_missing("factor", "a number");
    sc.factor = *factor;
    if (sc.type == "llama3") {
      sc.low_freq_factor = sr.get_double("low_freq_factor", 1e-6, 1e6).value_or(1.0);
      sc.high_freq_factor = sr.get_double("high_freq_factor", 1e-6, 1e6).value_or(4.0);
      sc.original_max_context = sr.require_int("original_max_context", 1, kMaxDim);
      if (!(sc.high_freq_factor > sc.low_freq_factor))
        sr.fail_table("high_freq_factor (" + std::to_string(sc.high_freq_factor) + ") must exceed low_freq_factor (" +
                      std::to_string(sc.low_freq_factor) + ")");
    }
    sr.finish();
    m.rope_scaling = sc;
  }
  if (auto d = r.get_string("dtype")) {
    auto dt = parse_float_dtype(*d);
    if (!dt)
      r.fail_at(*t.get("dtype"), "dtype", "expected f32, f16 or bf16, got \"" + *d + "\"");
    m.dtype = *dt;
  }
  if (const TomlValue* moe = r.get_table("moe")) {
    TableReader mr(*moe, "model.moe", source);
    MoeSpec s;
    s.experts = mr.require_int("experts", 1, 1 << 16);
    s.top_k = mr.require_int("top_k", 1, 1 << 16);
    s.expert_ffn = mr.get_int("expert_ffn", 1, kMaxDim).value_or(m.ffn);
    if (s.expert_ffn <= 0) mr.fail_table("expert_ffn is required when ffn is not given");
    if (s.top_k > s.experts)
      mr.fail_at(*moe->get("top_k"), "top_k",
                 "top_k (" + std::to_string(s.top_k) + ") exceeds experts (" + std::to_string(s.experts) + ")");
    mr.finish();
    m.moe = s;
  } else if (m.ffn <= 0) {
    r.fail_table("missing required key 'ffn' (an integer) for a dense model");
  }
  r.finish();
  validate_model(m, source);
  return m;
}

bool is_kernel_build_id(std::string_view id) {
  const size_t colon = id.find(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view kind = id.substr(0, colon), hex = id.substr(colon + 1);
  return (kind == "cpu" || kind == "cuda") && !hex.empty() && hex.size() <= 64 &&
         hex.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

Target parse_target_toml(std::string_view text, std::string_view source_sv) {
  std::string source(source_sv);
  TomlValue root = parse_toml(text, source);
  const TomlValue& t = top_table(root, "hardware", source);
  TableReader r(t, "hardware", source);
  Target tg;
  tg.name = r.require_string("name");
  if (std::string why = name_problem(tg.name); !why.empty()) r.fail_at(*t.get("name"), "name", why);
  tg.description = r.get_string("description").value_or("");
  std::string kind = r.require_string("kind");
  if (kind == "gpu") tg.kind = TargetKind::gpu;
  else if (kind == "cpu") tg.kind = TargetKind::cpu;
  else r.fail_at(*t.get("kind"), "kind", "expected \"gpu\" or \"cpu\", got \"" + kind + "\"");
  // The kernel build a probe or calibration measured ("" = not measured): a CPU spec's
  // id names CPU kernels, a GPU spec's CUDA kernels.
  if (const TomlValue* m = t.get("measured_with")) {
    tg.measured_with = r.get_string("measured_with").value_or("");
    const std::string want = tg.is_gpu() ? "cuda:" : "cpu:";
    if (!tg.measured_with.empty() && (!is_kernel_build_id(tg.measured_with) || !tg.measured_with.starts_with(want)))
      r.fail_at(*m, "measured_with",
                "expected the kernel build id `lathe probe` writes for a " + kind + " spec, \"" + want +
                    "\" and hex digits");
  }
  if (const TomlValue* cc = t.get("compute_capability")) {
    r.allow("compute_capability");
    double v = 0;
    if (cc->kind == TomlValue::Kind::string) {
      try {
        size_t used = 0;
        v = std::stod(cc->str, &used);
        if (used != cc->str.size()) v = -1;
      } catch (...) {
        v = -1;
      }
    } else if (cc->kind == TomlValue::Kind::floating) {
      v = cc->floating;
    } else if (cc->kind == TomlValue::Kind::integer) {
      // A whole number below 20 is the major version (10: sm_100, 12: sm_120); 20 and up
      // is major x 10 + minor (80: sm_80, 89: sm_89). 10 and 12 were read as 1.0 and 1.2.
      v = cc->integer >= 20 ? double(cc->integer) / 10.0 : double(cc->integer);
    }
    // One decimal: 7.55 was rounded to sm_76.
    if (!(v >= 1.0 && v < 20.0) || std::fabs(v * 10.0 - std::round(v * 10.0)) > 1e-6)
      r.fail_at(*cc, "compute_capability", "expected a version such as \"8.0\" or \"9.0\" (major.minor, one digit of minor)");
    tg.compute_capability = int(v * 10.0 + 0.5);
  } else if (tg.is_gpu()) {
    r.fail_table("missing required key 'compute_capability' for a GPU (e.g. \"8.0\")");
  }
  TableReader* peak = nullptr;
  TableReader* eff = nullptr;
  std::optional<TableReader> peak_r, eff_r;
  if (const TomlValue* p = r.get_table("peak_tflops")) peak = &peak_r.emplace(*p, "hardware.peak_tflops", source);
  if (const TomlValue* e = r.get_table("efficiency")) eff = &eff_r.emplace(*e, "hardware.efficiency", source);
  for (const TargetField& f : target_fields()) {
    std::string_view key = f.key;
    TableReader* reader = &r;
    if (key.starts_with("peak_tflops.")) {
      reader = peak;
      key.remove_prefix(12);
    } else if (key.starts_with("efficiency.")) {
      reader = eff;
      key.remove_prefix(11);
    }
    if (!reader) continue;
    // The same ranges as --set (efficiency.dequant, a relative speed, may exceed 1.5).
    FieldRange range = target_field_range(f);
    if (auto v = reader->get_double(key, range.lo, range.hi, range.zero_ok)) set_field(tg, f, *v);
  }
  if (!peak) r.fail_table("missing required table [hardware.peak_tflops]");
  if (tg.hbm_bandwidth_gbs <= 0) r.fail_table("missing or zero 'hbm_bandwidth_gbs' (memory bandwidth, GB/s)");
  if (tg.memory_gb <= 0) r.fail_table("missing or zero 'memory_gb' (memory capacity, GB)");
  if (tg.sm_count <= 0) r.fail_table("missing or zero 'sm_count' (SMs or cores)");
  if (tg.peak_fp32 <= 0) peak->fail_table("missing or zero 'fp32' peak");
  if (tg.is_gpu() && tg.peak_fp16 <= 0 && tg.peak_bf16 <= 0) peak->fail_table("a GPU needs an fp16 or bf16 peak");
  // The checks above name the missing key; target_problem also checks what they do not
  // (a fractional SM count), the same check overrides get.
  if (std::string why = target_problem(tg); !why.empty()) r.fail_table(why);
  peak->finish();
  if (eff) eff->finish();
  r.finish();
  return tg;
}

void check_spec_reference(const TableReader& r, const TomlValue& at, std::string_view key, std::string_view folder,
                          const std::string& ref, bool check_names) {
  const std::string path = folder == "hardware" ? target_spec_base(ref) : ref;
  std::error_code ec;
  if (path.empty() && check_names) r.fail_at(at, key, "an empty name");
  if (is_builtin_name(folder, path) || std::filesystem::exists(path, ec)) return;
  if (looks_like_path(path))
    r.fail_at(at, key,
              "no such file: " + path + " (a relative path is read beside this file, else from the working directory)");
  if (!check_names) return;
  // A name: located here (the commands named neither the file nor the line).
  std::vector<std::string> names;
  for (const BuiltinSpec& b : builtin_specs(folder)) names.push_back(b.name);
  const std::string hint = closest_match(path, names);
  r.fail_at(at, key, "'" + path + "' is neither a built-in " + (folder == "models" ? "model" : "hardware target") +
                         " nor a file" + (hint.empty() ? "; built-in: " + join(names) : " (did you mean '" + hint + "'?)"));
}

void read_plan_options(TableReader& r, const TomlValue& t, PlanOptions& o) {
  std::string why;
  if (auto w = r.get_string("weights")) {
    auto f = parse_weight_format(*w, &why);
    if (!f) r.fail_at(*t.get("weights"), "weights", why);
    o.weights = f;
  }
  if (auto k = r.get_string("kv")) {
    auto d = parse_kv_dtype(*k, &why);
    if (!d) r.fail_at(*t.get("kv"), "kv", why);
    o.kv_dtype = d;
  }
  if (auto l = r.get_string("kv_layout")) {
    if (*l != "auto") {
      auto lay = parse_kv_layout(*l, &why);
      if (!lay) r.fail_at(*t.get("kv_layout"), "kv_layout", why);
      o.kv_layout = lay;
    }
  }
  if (auto a = r.get_string("act")) {
    auto d = parse_float_dtype(*a);
    if (!d)
      r.fail_at(*t.get("act"), "act", "expected f32, f16 or bf16, got \"" + *a + "\"");
    o.act_dtype = d;
  }
  if (auto tp = r.get_int("tp", 1, 1024)) o.tp = *tp;
  if (auto a = r.get_string("attention")) {
    if (*a == "naive") o.pass_enabled["flash-attention"] = false;
    else if (*a != "flash") r.fail_at(*t.get("attention"), "attention", "expected \"flash\" or \"naive\", got \"" + *a + "\"");
  }
  if (auto ps = r.get_string("pipeline")) {
    // Named where it is written (the pass manager would name it with no location).
    if (*ps != "default" && *ps != "none") {
      std::vector<std::string> names;
      for (std::string_view n : known_pass_names()) names.emplace_back(n);
      // An empty item is refused, as --passes refuses it (" , ," ran no pass).
      {
        size_t start = 0;
        for (;;) {
          const size_t comma = std::min(ps->find(',', start), ps->size());
          if (ps->find_first_not_of(' ', start) >= comma)
            r.fail_at(*t.get("pipeline"), "pipeline", "an empty item in the list");
          if (comma == ps->size()) break;
          start = comma + 1;
        }
      }
      std::vector<std::string> seen;
      for (const std::string& p : split_pass_list(*ps)) {
        if (std::find(names.begin(), names.end(), p) == names.end()) {
          std::string hint = closest_match(p, names);
          r.fail_at(*t.get("pipeline"), "pipeline",
                    "unknown pass '" + p + "'" +
                        (hint.empty() ? "; passes: " + join(names) : " (did you mean '" + hint + "'?)"));
        }
        // Repeats and a pass after memory-plan, located (the pass manager named neither
        // the file nor the key, and check said OK).
        if (std::find(seen.begin(), seen.end(), p) != seen.end())
          r.fail_at(*t.get("pipeline"), "pipeline", "pass '" + p + "' appears twice");
        if (!seen.empty() && seen.back() == "memory-plan")
          r.fail_at(*t.get("pipeline"), "pipeline",
                    "pass 'memory-plan' must come last (it places the final graph's buffers), but '" + p +
                        "' comes after it");
        seen.push_back(p);
      }
    }
    o.passes = *ps;
  }
}

PlanSpec parse_plan_toml(std::string_view text, std::string_view source_sv) {
  std::string source(source_sv);
  TomlValue root = parse_toml(text, source);
  const TomlValue& t = top_table(root, "plan", source);
  TableReader r(t, "plan", source);
  PlanSpec p;
  p.model = r.get_string("model");
  p.hardware = r.get_string("hardware");
  if (p.model) p.model = resolve_spec_reference(*p.model, source);
  if (p.hardware) p.hardware = resolve_spec_reference(*p.hardware, source);
  if (p.model) check_spec_reference(r, *t.get("model"), "model", "models", *p.model);
  if (p.hardware) check_spec_reference(r, *t.get("hardware"), "hardware", "hardware", *p.hardware);
  read_plan_options(r, t, p.options);
  if (const TomlValue* w = r.get_table("workload")) {
    TableReader wr(*w, "plan.workload", source);
    if (auto v = wr.get_int("batch", 1, 1 << 20)) p.workload.batch = *v, p.batch_given = true;
    if (auto v = wr.get_int("prompt", 1, 1 << 24)) p.workload.prompt = *v, p.prompt_given = true;
    if (auto v = wr.get_int("gen", 0, 1 << 24)) p.workload.gen = *v, p.gen_given = true;
    wr.finish();
  }
  if (const TomlValue* ps = r.get_table("passes")) {
    std::vector<std::string> names;
    for (std::string_view n : known_pass_names()) names.emplace_back(n);
    for (size_t i = 0; i < ps->keys.size(); ++i) {
      const std::string& k = ps->keys[i];
      const TomlValue& v = ps->values[i];
      if (std::find(names.begin(), names.end(), k) == names.end()) {
        std::string hint = closest_match(k, names);
        throw Error(source + ":" + std::to_string(v.line) + ":" + std::to_string(v.column) + ": plan.passes." + k +
                    ": unknown pass" + (hint.empty() ? "; passes: " + join(names) : " (did you mean '" + hint + "'?)"));
      }
      if (v.kind != TomlValue::Kind::boolean)
        throw Error(source + ":" + std::to_string(v.line) + ":" + std::to_string(v.column) + ": plan.passes." + k +
                    ": expected a boolean, got " + std::string(v.kind_name()));
      p.options.pass_enabled[k] = v.boolean;
    }
  }
  // attention = "flash" is the flash-attention pass's work: with the pass off it was a
  // silent no-op, where weights, kv and kv_layout with their passes off are refused.
  if (const TomlValue* a = t.get("attention"); a && a->kind == TomlValue::Kind::string && a->str == "flash") {
    const PlanOptions& o = p.options;
    bool listed = true;
    if (o.passes && *o.passes != "default") {
      const std::vector<std::string> list = split_pass_list(*o.passes);
      listed = *o.passes != "none" && std::find(list.begin(), list.end(), "flash-attention") != list.end();
    }
    if (!listed || !o.pass_on("flash-attention"))
      r.fail_at(*a, "attention", "\"flash\" needs the flash-attention pass, which this plan's pipeline or passes "
                                 "leave out");
  }
  r.finish();
  return p;
}

SpecKind detect_spec_kind(std::string_view text, std::string_view source) {
  TomlValue root = parse_toml(text, source);
  for (const std::string& k : root.keys) {
    if (k == "model") return SpecKind::model;
    if (k == "hardware") return SpecKind::hardware;
    if (k == "plan") return SpecKind::plan;
    if (k == "sweep") return SpecKind::sweep;
    if (k == "scenario") return SpecKind::scenario;
  }
  return SpecKind::unknown;
}

std::string target_to_toml(const Target& t, const std::string& comment) {
  std::string out;
  size_t start = 0;
  while (start < comment.size()) {
    size_t nl = comment.find('\n', start);
    if (nl == std::string::npos) nl = comment.size();
    out += "# " + comment.substr(start, nl - start) + "\n";
    start = nl + 1;
  }
  auto quoted = [](const std::string& s) {  // a TOML basic string
    std::string q = "\"";
    for (unsigned char c : s) {
      if (c == '"' || c == '\\') {
        q += '\\';
        q += char(c);
      } else if (c < 0x20 || c == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        q += buf;
      } else {
        q += char(c);
      }
    }
    return q + "\"";
  };
  auto number = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    std::string s = buf;
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
    return s;
  };
  out += "[hardware]\n";
  out += "name = " + quoted(t.name) + "\n";
  out += "description = " + quoted(t.description) + "\n";
  if (!t.measured_with.empty()) out += "measured_with = " + quoted(t.measured_with) + "\n";
  out += std::string("kind = \"") + (t.is_gpu() ? "gpu" : "cpu") + "\"\n";
  if (t.is_gpu() || t.compute_capability > 0) {
    char cc[32];
    std::snprintf(cc, sizeof cc, "%d.%d", t.compute_capability / 10, t.compute_capability % 10);
    out += std::string("compute_capability = \"") + cc + "\"\n";
  }
  std::string peaks, effs;
  for (const TargetField& f : target_fields()) {
    std::string_view key = f.key;
    std::string line = " = " + number(get_field(t, f)) + "\n";
    if (key.starts_with("peak_tflops.")) peaks += std::string(key.substr(12)) + line;
    else if (key.starts_with("efficiency.")) effs += std::string(key.substr(11)) + line;
    else out += std::string(key) + line;
  }
  out += "\n[hardware.peak_tflops]\n" + peaks + "\n[hardware.efficiency]\n" + effs;
  return out;
}

std::vector<BuiltinSpec> builtin_specs(std::string_view folder) {
  std::vector<BuiltinSpec> out;
  std::string prefix = std::string(folder) + "/";
  for (const EmbeddedSpec& e : embedded_specs()) {
    std::string_view path = e.path;
    if (!path.starts_with(prefix) || !path.ends_with(".toml")) continue;
    std::string_view name = path.substr(prefix.size(), path.size() - prefix.size() - 5);
    if (name.find('/') != std::string_view::npos) continue;
    out.push_back({std::string(name), std::string(path), std::string(e.text)});
  }
  return out;
}

std::vector<std::string> builtin_names(std::string_view folder) {
  std::vector<std::string> out;
  for (const BuiltinSpec& b : builtin_specs(folder)) out.push_back(b.name);
  return out;
}

bool is_builtin_name(std::string_view folder, std::string_view name) {
  for (const BuiltinSpec& b : builtin_specs(folder))
    if (b.name == name) return true;
  return false;
}

size_t existing_path_end(std::string_view ref, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto exists = [&](size_t end) { return fs::exists(fs::path(dir) / std::string(ref.substr(0, end)), ec); };
  if (!ref.empty() && exists(ref.size())) return ref.size();
  for (size_t p = ref.rfind('+'); p != std::string_view::npos && p > 0; p = ref.rfind('+', p - 1))
    if (exists(p)) return p;
  return std::string_view::npos;
}

size_t target_spec_split(std::string_view spec) {
  const size_t first = spec.find('+');
  if (first == std::string_view::npos) return first;
  // A built-in name wins over a file, as everywhere a spec is named.
  if (is_builtin_name("hardware", spec.substr(0, first))) return first;
  if (const size_t end = existing_path_end(spec); end != std::string_view::npos)
    return end == spec.size() ? std::string_view::npos : end;
  // No file: "c++/gpu.toml" (no '=' after the '+') is a path that does not exist, not
  // the target "c" with an override.
  const std::string_view after = spec.substr(first + 1, spec.find('+', first + 1) - first - 1);
  return after.find('=') == std::string_view::npos ? std::string_view::npos : first;
}

std::string resolve_spec_reference(const std::string& ref, std::string_view source) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(std::string(source)).parent_path();
  if (dir.empty() || source.starts_with("<built-in>")) return ref;
  // A relative path beside the spec file, overrides ("+key=value") kept after it.
  const size_t end = existing_path_end(ref, dir.string());
  if (end == std::string::npos) return ref;
  const std::string path = ref.substr(0, end);
  if (!looks_like_path(path) || fs::path(path).is_absolute()) return ref;
  return (dir / path).string() + ref.substr(end);
}

bool looks_like_path(std::string_view arg) {
  return arg.find('/') != std::string_view::npos || arg.ends_with(".toml") || arg.ends_with(".gguf") ||
         arg.ends_with(".json") || arg.starts_with(".");
}

namespace {
template <typename T, typename Parse>
T load_named(std::string_view name_or_path, std::string_view folder, std::string_view what, Parse parse) {
  std::string arg(name_or_path);
  for (const BuiltinSpec& b : builtin_specs(folder))
    if (b.name == arg) return parse(b.text, "<built-in>/" + b.path);
  std::error_code ec;
  if (looks_like_path(arg) || std::filesystem::exists(arg, ec)) {
    if (!std::filesystem::exists(arg, ec)) throw Error(arg + ": no such file");
    return parse(read_file(arg), arg);
  }
  std::vector<std::string> names = builtin_names(folder);
  std::string hint = closest_match(arg, names);
  throw Error("unknown " + std::string(what) + " '" + arg + "'" +
              (hint.empty() ? "" : " (did you mean '" + hint + "'?)") + "; built-in " + std::string(what) +
              "s: " + join(names) + "; or give a path to a TOML file");
}
}  // namespace

ModelSpec load_model(std::string_view name_or_path) {
  if (gguf::is_gguf_path(name_or_path)) {
    std::string path(name_or_path);
    ModelSpec m = gguf::load_model_spec(path);
    validate_model(m, path);
    return m;
  }
  // A Hugging Face config.json or its directory (built-in names keep precedence).
  std::vector<std::string> names = builtin_names("models");
  if (std::find(names.begin(), names.end(), name_or_path) == names.end() && is_hf_model_path(name_or_path))
    return load_hf_config(std::string(name_or_path)).model;
  // A directory that is not a checkpoint: say what a model directory needs ("is a
  // directory, expected a file" read as if directories were not accepted).
  if (std::error_code ec; std::find(names.begin(), names.end(), name_or_path) == names.end() &&
                          std::filesystem::is_directory(std::string(name_or_path), ec))
    throw Error(std::string(name_or_path) +
                ": a directory without config.json; a model directory is a Hugging Face checkpoint (config.json "
                "beside its safetensors), and a compiled plan directory runs with `lathe run`");
  return load_named<ModelSpec>(name_or_path, "models", "model",
                               [](const std::string& text, const std::string& src) { return parse_model_toml(text, src); });
}

Target load_target(std::string_view name_or_path) {
  return load_named<Target>(name_or_path, "hardware", "hardware target",
                            [](const std::string& text, const std::string& src) { return parse_target_toml(text, src); });
}

PlanSpec load_plan(std::string_view path) {
  return load_named<PlanSpec>(path, "plans", "plan",
                              [](const std::string& text, const std::string& src) { return parse_plan_toml(text, src); });
}

}  // namespace lathe
