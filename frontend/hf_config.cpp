#include "frontend/hf_config.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "frontend/specs.h"
#include "ir/assert.h"
#include "ir/json_fields.h"

namespace lathe {

namespace {

using Json = nlohmann::json;
constexpr int64_t kMaxDim = int64_t(1) << 40;

// 1-based line and column of byte `offset` in `text`.
std::string line_col(std::string_view text, size_t offset) {
  int line = 1, col = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

// Reads typed fields of one JSON object with messages "file:line:col: key: why" (the
// position of the key's first occurrence as a JSON key in the text; nlohmann keeps no
// positions, and config.json files are flat enough for this to point at the key).
struct Reader {
  std::string_view text;
  std::string source;
  const Json& obj;
  // A nested object's reader (rope_scaling): its keys are named "rope_scaling.factor" and
  // looked for after the parent key's position `from` (a nested rope_theta was located
  // at the top-level one); a key the object lacks is located at the parent key.
  std::string prefix = "";
  size_t from = 0;

  // The offset of `"key":` at or after `start` (npos when none).
  size_t offset(std::string_view key, size_t start) const {
    std::string quoted = "\"" + std::string(key) + "\"";
    for (size_t at = text.find(quoted, start); at != std::string_view::npos;
         at = text.find(quoted, at + 1)) {
      size_t j = at + quoted.size();
      while (j < text.size() &&
             (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' || text[j] == '\r'))
        ++j;
      if (j < text.size() && text[j] == ':') return at;
    }
    return std::string_view::npos;
  }
  std::string where(std::string_view key) const {
    if (!prefix.empty() && key.starts_with(prefix)) key.remove_prefix(prefix.size());
    size_t at = prefix.empty() || obj.contains(std::string(key)) ? offset(key, from) : std::string_view::npos;
    if (at == std::string_view::npos && !prefix.empty()) at = from;  // the parent key
    return at == std::string_view::npos ? source : source + ":" + line_col(text, at);
  }
  [[noreturn]] void fail(std::string_view key, const std::string& why) const {
    const std::string name = prefix.empty() || key.starts_with(prefix) ? std::string(key) : prefix + std::string(key);
    throw Error(where(key) + ": " + name + ": " + why);
  }
  // The reader of the object under `key` (an object).
  Reader sub(std::string_view key, const Json& o) const {
    size_t at = offset(key, from);
    return Reader{text, source, o, prefix + std::string(key) + ".", at == std::string_view::npos ? from : at};
  }
  // The value of `key`, or nullptr when absent or null.
  const Json* get(std::string_view key) const {
    auto it = obj.find(std::string(key));
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  }
  std::optional<int64_t> get_int(std::string_view key, int64_t min, int64_t max) const {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    int64_t x = 0;
    if (v->is_number_integer()) {
      x = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX
                                                                              : v->get<int64_t>();
    } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
               v->get<double>() == std::floor(v->get<double>()) &&
               std::fabs(v->get<double>()) < 9e18) {
      x = int64_t(v->get<double>());
    } else {
      fail(key, "expected an integer, got " + v->dump());
    }
    if (x < min || x > max)
      fail(key, "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                    "], got " + std::to_string(x));
    return x;
  }
  int64_t require_int(std::string_view key, int64_t min, int64_t max) const {
    if (auto x = get_int(key, min, max)) return *x;
    fail(key, "missing required key (an integer)");
  }
  std::optional<double> get_double(std::string_view key, double min, double max) const {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) fail(key, "expected a number, got " + v->dump());
    double x = v->get<double>();
    if (!(x >= min && x <= max)) {
      char range[64];
      std::snprintf(range, sizeof range, "[%g, %g]", min, max);  // %g: 1e-12, not 0.000000
      fail(key, "expected a number in " + std::string(range) + ", got " + v->dump());
    }
    return x;
  }
  std::optional<bool> get_bool(std::string_view key) const {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) fail(key, "expected true or false, got " + v->dump());
    return v->get<bool>();
  }
  std::optional<std::string> get_string(std::string_view key) const {
    const Json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) fail(key, "expected a string, got " + v->dump());
    return v->get<std::string>();
  }
};

struct Family {
  const char* architecture;  // as in "architectures"
  const char* model_type;    // as in "model_type"
  const char* arch;          // lathe's ModelSpec::arch
  double norm_eps;           // the transformers config class defaults
  double rope_theta;
  bool moe;
};

constexpr Family kFamilies[] = {
    {"LlamaForCausalLM", "llama", "llama", 1e-6, 10000.0, false},
    {"MistralForCausalLM", "mistral", "mistral", 1e-6, 10000.0, false},
    {"MixtralForCausalLM", "mixtral", "mixtral", 1e-5, 1e6, true},
    {"Qwen2ForCausalLM", "qwen2", "qwen2", 1e-6, 10000.0, false},
};

// A model name usable in specs and IR text: the last path component of
// `_name_or_path` (or of the directory), with anything unusual replaced by '-'.
std::string model_name_from(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  if (size_t slash = s.rfind('/'); slash != std::string::npos) s = s.substr(slash + 1);
  return safe_name(s);
}

// Shortest text that reads back to `v`, always a TOML float ("10000.0", "1e-05").
std::string toml_float(double v) {
  char buf[64];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string toml_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(static_cast<unsigned char>(c)));
      o += buf;
    } else {
      o += c;
    }
  }
  return o + "\"";
}

// `s` with control characters written as \n, \t or \xNN: a newline in a config.json
// string or a path would end a TOML comment line and start TOML of the input's making
// (the notes are written as comments and printed as warnings).
std::string escape_control_chars(const std::string& s) {
  std::string o;
  for (unsigned char ch : s) {
    if (ch == '\n') o += "\\n";
    else if (ch == '\t') o += "\\t";
    else if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      o += buf;
    } else {
      o += char(ch);
    }
  }
  return o;
}

}  // namespace

HfConfig parse_hf_config(std::string_view text, std::string_view source_sv) {
  std::string source(source_sv);
  Json root;
  try {
    root = parse_json_unique_keys(text.begin(), text.end(), source);
  } catch (const Json::parse_error& e) {
    throw Error(source + ":" + line_col(text, e.byte > 0 ? e.byte - 1 : 0) +
                ": not valid JSON: " + json_error_text(e.what()));
  } catch (const Json::exception& e) {  // e.g. a number out of range (found by the fuzzer)
    throw Error(source + ": not valid JSON: " + json_error_text(e.what()));
  }
  if (!root.is_object())
    throw Error(source + ":1:1: expected a JSON object (a Hugging Face config.json)");
  if (root.contains("lathe_plan"))
    throw Error(source + ": a compiled lathe plan, not a model config; run it with `lathe run` (the plan "
                         "directory or its plan.json)");
  Reader r{text, source, root};
  HfConfig c;
  c.source = source;

  // The architecture: "architectures": ["LlamaForCausalLM"], else "model_type".
  const Family* fam = nullptr;
  std::string names;
  for (const Family& f : kFamilies)
    names += std::string(names.empty() ? "" : ", ") + f.architecture;
  if (const Json* a = r.get("architectures")) {
    if (!a->is_array() || a->empty() || !(*a)[0].is_string())
      r.fail("architectures",
             "expected a list of class names such as [\"LlamaForCausalLM\"], got " + a->dump());
    c.architecture = (*a)[0].get<std::string>();
    for (const Family& f : kFamilies)
      if (c.architecture == f.architecture) fam = &f;
    if (!fam)
      r.fail("architectures",
             "unsupported architecture '" + c.architecture + "' (supported: " + names + ")");
  } else if (auto t = r.get_string("model_type")) {
    c.architecture = *t;
    for (const Family& f : kFamilies)
      if (*t == f.model_type) fam = &f;
    if (!fam)
      r.fail("model_type",
             "unsupported model_type '" + *t + "' (supported: llama, mistral, mixtral, qwen2)");
  } else {
    throw Error(source +
                ":1:1: architectures: missing required key (or model_type); supported: " + names);
  }

  if (auto act = r.get_string("hidden_act"); act && *act != "silu")
    r.fail("hidden_act", "unsupported activation '" + *act + "' (lathe's FFN is SwiGLU: silu)");
  if (r.get_bool("mlp_bias").value_or(false))
    r.fail("mlp_bias", "MLP biases are not supported by lathe's IR");

  ModelSpec& m = c.model;
  m.arch = fam->arch;
  std::string name = r.get_string("_name_or_path").value_or("");
  if (name.empty()) {
    // The directory's name, from the absolute path (`import-hf config.json` inside the
    // checkpoint was named "config", and `import-hf .` "hf-model"); lexically, so that a
    // symlinked config.json (a Hugging Face cache snapshot) keeps its directory's name.
    std::error_code ec;
    std::filesystem::path p = std::filesystem::absolute(source, ec);
    if (ec) p = source;
    p = p.lexically_normal();
    if (p.filename().empty()) p = p.parent_path();  // "dir/" and "."
    name = p.filename() == "config.json" && p.has_parent_path() ? p.parent_path().filename().string()
                                                                : p.stem().string();
  }
  m.name = model_name_from(name);
  if (m.name.empty() || m.name == "." || m.name == "..") m.name = "hf-model";
  m.description = c.architecture + " imported from " + source;
  m.hidden = r.require_int("hidden_size", 1, kMaxDim);
  m.layers = r.require_int("num_hidden_layers", 1, kMaxLayers);
  m.heads = r.require_int("num_attention_heads", 1, 1 << 20);
  m.kv_heads = r.get_int("num_key_value_heads", 1, 1 << 20).value_or(m.heads);
  if (auto hd = r.get_int("head_dim", 1, 1 << 20)) {
    m.head_dim = *hd;
  } else {
    if (m.hidden % m.heads != 0)
      r.fail("num_attention_heads", "must divide hidden_size (" + std::to_string(m.hidden) +
                                        ") when head_dim is not given");
    m.head_dim = m.hidden / m.heads;
  }
  if (m.heads % m.kv_heads != 0)
    r.fail("num_key_value_heads", std::to_string(m.kv_heads) +
                                      " must divide num_attention_heads (" +
                                      std::to_string(m.heads) + ")");
  if (m.head_dim % 2 != 0)
    r.fail("head_dim", "must be even (RoPE rotates pairs); got " + std::to_string(m.head_dim));
  int64_t ffn = r.require_int("intermediate_size", 1, kMaxDim);
  m.vocab = r.require_int("vocab_size", 1, kMaxDim);
  m.max_context = r.require_int("max_position_embeddings", 1, kMaxDim);
  m.norm_eps = r.get_double("rms_norm_eps", 1e-12, 0.1).value_or(fam->norm_eps);
  m.tie_embeddings = r.get_bool("tie_word_embeddings").value_or(false);

  // RoPE: rope_theta at the top level (transformers 4.x) or in rope_parameters (5.x).
  m.rope_theta = fam->rope_theta;
  if (auto t = r.get_double("rope_theta", 1.0, 1e12)) m.rope_theta = *t;
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const Json* rs = r.get(key);
    if (!rs) continue;
    if (!rs->is_object()) r.fail(key, "expected an object, got " + rs->dump());
    Reader sub = r.sub(key, *rs);
    if (auto t = sub.get_double("rope_theta", 1.0, 1e12)) m.rope_theta = *t;
    std::string type =
        sub.get_string("rope_type").value_or(sub.get_string("type").value_or("default"));
    if (type == "default") continue;
    c.rope_scaling = true;
    if (type == "linear" || type == "llama3") {
      RopeScaling sc;
      sc.type = type;
      auto factor = sub.get_double("factor", 1e-3, 1e6);
      if (!factor) sub.fail("factor", "missing (RoPE scaling of type '" + type + "' needs it)");
      sc.factor = *factor;
      if (type == "llama3") {
        sc.low_freq_factor = sub.get_double("low_freq_factor", 1e-6, 1e6).value_or(1.0);
        sc.high_freq_factor = sub.get_double("high_freq_factor", 1e-6, 1e6).value_or(4.0);
        auto orig = sub.get_int("original_max_position_embeddings", 1, kMaxDim);
        if (!orig)
          sub.fail("original_max_position_embeddings", "missing (llama3 RoPE scaling needs it)");
        sc.original_max_context = *orig;
        if (!(sc.high_freq_factor > sc.low_freq_factor))
          sub.fail("high_freq_factor", "must exceed low_freq_factor");
      }
      m.rope_scaling = sc;
      continue;
    }
    std::string where = type == "dynamic" ? "positions beyond the original context differ" : "positions differ";
    c.notes.push_back(std::string(key) + " of type '" + escape_control_chars(type) +
                      "' is ignored: lathe applies plain RoPE or linear / llama3 scaling (" + where + ")");
  }

  // Weight dtype: torch_dtype (4.x) or dtype (5.x).
  std::string dkey = r.get("torch_dtype") ? "torch_dtype" : "dtype";
  if (auto d = r.get_string(dkey)) {
    if (*d == "float32")
      m.dtype = DType::f32;
    else if (*d == "float16")
      m.dtype = DType::f16;
    else if (*d == "bfloat16")
      m.dtype = DType::bf16;
    else
      r.fail(dkey, "unsupported dtype '" + *d + "' (expected float32, float16 or bfloat16)");
  } else {
    m.dtype = DType::bf16;
    c.notes.push_back("no torch_dtype given: bf16 assumed");
  }

  if (fam->moe) {
    MoeSpec s;
    s.experts = r.get_int("num_local_experts", 1, 1 << 16).value_or(8);
    s.top_k = r.get_int("num_experts_per_tok", 1, 1 << 16).value_or(2);
    s.expert_ffn = ffn;
    if (s.top_k > s.experts)
      r.fail("num_experts_per_tok", std::to_string(s.top_k) + " exceeds num_local_experts (" +
                                        std::to_string(s.experts) + ")");
    m.moe = s;
  } else {
    m.ffn = ffn;
  }

  // Attention biases: Qwen2 always has q/k/v biases; Llama has them with attention_bias.
  c.attention_bias =
      std::string(fam->arch) == "qwen2" || r.get_bool("attention_bias").value_or(false);
  if (c.attention_bias)
    c.notes.push_back(
        "the checkpoint has q/k/v biases, which lathe's IR lacks: simulate and compile cost the "
        "model without them (a negligible difference), and `lathe run` refuses its weights where "
        "they hold bias tensors");

  // Sliding-window attention (Mistral v0.1, Qwen2 with use_sliding_window).
  bool sliding =
      std::string(fam->arch) != "qwen2" || r.get_bool("use_sliding_window").value_or(false);
  if (auto w = r.get_int("sliding_window", 0, kMaxDim);
      w && sliding && *w > 0 && *w < m.max_context) {
    c.sliding_window = *w;
    c.notes.push_back("sliding_window = " + std::to_string(*w) +
                      " is ignored: lathe attends to the whole context (identical up to " +
                      std::to_string(*w) + " tokens)");
  }
  validate_model(m, source);
  return c;
}

HfConfig load_hf_config(const std::string& path) {
  std::error_code ec;
  std::string file = path;
  if (std::filesystem::is_directory(path, ec)) {
    file = (std::filesystem::path(path) / "config.json").string();
    if (!std::filesystem::exists(file, ec))
      throw Error(path + ": not a Hugging Face directory (no config.json in it)");
  }
  return parse_hf_config(read_file(file), file);
}

bool is_hf_dir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) &&
         std::filesystem::is_regular_file(std::filesystem::path(path) / "config.json", ec);
}

bool is_hf_model_path(std::string_view name_or_path) {
  std::string p(name_or_path);
  std::error_code ec;
  if (is_hf_dir(p)) return true;
  return p.ends_with(".json") && std::filesystem::is_regular_file(p, ec);
}

std::string hf_model_to_toml(const HfConfig& c) {
  const ModelSpec& m = c.model;
  std::string o;
  o += "# Imported by `lathe import-hf` from " + escape_control_chars(c.source) + " (" + c.architecture + ").\n";
  for (const std::string& n : c.notes) o += "# Note: " + n + "\n";
  o += "[model]\n";
  o += "name = " + toml_string(m.name) + "\n";
  o += "description = " + toml_string(m.description) + "\n";
  o += "arch = " + toml_string(m.arch) + "\n";
  o += "hidden = " + std::to_string(m.hidden) + "\n";
  o += "layers = " + std::to_string(m.layers) + "\n";
  o += "heads = " + std::to_string(m.heads) + "\n";
  o += "kv_heads = " + std::to_string(m.kv_heads) + "\n";
  o += "head_dim = " + std::to_string(m.head_dim) + "\n";
  if (!m.is_moe()) o += "ffn = " + std::to_string(m.ffn) + "\n";
  o += "vocab = " + std::to_string(m.vocab) + "\n";
  o += "max_context = " + std::to_string(m.max_context) + "\n";
  o += "norm_eps = " + toml_float(m.norm_eps) + "\n";
  o += "rope_theta = " + toml_float(m.rope_theta) + "\n";
  o += std::string("tie_embeddings = ") + (m.tie_embeddings ? "true" : "false") + "\n";
  o += "dtype = " + toml_string(std::string(dtype_name(m.dtype))) + "\n";
  if (m.rope_scaling && m.rope_scaling->type != "factors") {
    const RopeScaling& sc = *m.rope_scaling;
    o += "\n[model.rope_scaling]\n";
    o += "type = " + toml_string(sc.type) + "\n";
    o += "factor = " + toml_float(sc.factor) + "\n";
    if (sc.type == "llama3") {
      o += "low_freq_factor = " + toml_float(sc.low_freq_factor) + "\n";
      o += "high_freq_factor = " + toml_float(sc.high_freq_factor) + "\n";
      o += "original_max_context = " + std::to_string(sc.original_max_context) + "\n";
    }
  }
  if (m.is_moe()) {
    o += "\n[model.moe]\n";
    o += "experts = " + std::to_string(m.moe->experts) + "\n";
    o += "top_k = " + std::to_string(m.moe->top_k) + "\n";
    o += "expert_ffn = " + std::to_string(m.moe->expert_ffn) + "\n";
  }
  return o;
}

}  // namespace lathe
