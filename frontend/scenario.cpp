#include "frontend/scenario.h"

#include <filesystem>

#include "frontend/plan_keys.h"
#include "frontend/specs.h"
#include "frontend/toml_doc.h"
#include "ir/assert.h"

namespace lathe {

std::string_view scenario_kind_name(ScenarioKind k) {
  switch (k) {
    case ScenarioKind::serve:
      return "serve";
    case ScenarioKind::rag:
      return "rag";
    case ScenarioKind::moe:
      return "moe";
    case ScenarioKind::edge:
      return "edge";
  }
  return "?";
}

namespace {

constexpr double kHuge = 1e12;

// Reads the typed values TableReader has no getter for: arrays and distributions.
struct Extra {
  TableReader& r;
  const TomlValue& t;

  const TomlValue* array(std::string_view key) {
    r.allow(key);
    const TomlValue* v = t.get(key);
    if (v && v->kind != TomlValue::Kind::array)
      r.fail_at(*v, key, "expected an array, got " + std::string(v->kind_name()));
    if (v && v->array.empty()) r.fail_at(*v, key, "expected a non-empty array");
    return v;
  }
  std::optional<std::vector<double>> numbers(std::string_view key, double lo, double hi) {
    const TomlValue* v = array(key);
    if (!v) return std::nullopt;
    std::vector<double> out;
    for (const TomlValue& e : v->array) {
      if (e.kind != TomlValue::Kind::integer && e.kind != TomlValue::Kind::floating)
        r.fail_at(e, key, "expected numbers, got " + std::string(e.kind_name()));
      double d = e.kind == TomlValue::Kind::integer ? double(e.integer) : e.floating;
      if (!(d >= lo && d <= hi))
        r.fail_at(e, key,
                  "expected numbers in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      out.push_back(d);
    }
    return out;
  }
  std::optional<std::vector<int64_t>> integers(std::string_view key, int64_t lo, int64_t hi) {
    const TomlValue* v = array(key);
    if (!v) return std::nullopt;
    std::vector<int64_t> out;
    for (const TomlValue& e : v->array) {
      if (e.kind != TomlValue::Kind::integer || e.integer < lo || e.integer > hi)
        r.fail_at(e, key,
                  "expected integers in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
      out.push_back(e.integer);
    }
    return out;
  }
  // A list naming one value twice (keys[i]: item i's canonical spelling) would give a
  // table with a repeated row; the second one is named where it is written.
  void no_repeats(std::string_view key, const std::vector<std::string>& keys) {
    for (size_t i = 0; i < keys.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (keys[i] == keys[j])
          r.fail_at(t.get(key)->array[i], key, "\"" + keys[i] + "\" appears twice in the list");
  }
  std::optional<std::vector<std::string>> strings(std::string_view key) {
    const TomlValue* v = array(key);
    if (!v) return std::nullopt;
    std::vector<std::string> out;
    for (const TomlValue& e : v->array) {
      if (e.kind != TomlValue::Kind::string)
        r.fail_at(e, key, "expected strings, got " + std::string(e.kind_name()));
      out.push_back(e.str);
    }
    return out;
  }
  void distribution(std::string_view key, Distribution& d, double hi = 0, bool tokens = false) {
    auto s = r.get_string(key);
    if (!s) return;
    std::string why;
    auto parsed = tokens ? parse_token_distribution(*s, &why) : parse_distribution(*s, &why, hi);
    if (!parsed) r.fail_at(*t.get(key), key, why);
    d = *parsed;
  }
  double ms(std::string_view key, double current_s, double hi_ms) {
    auto v = r.get_double(key, 0, hi_ms);
    return v ? *v * 1e-3 : current_s;
  }
};

void read_serve(const TomlValue& t, const std::string& source, ServeOptions& o) {
  TableReader r(t, "scenario.serve", source);
  if (auto b = r.get_string("batching")) {
    auto k = parse_batching(*b);
    if (!k)
      r.fail_at(*t.get("batching"), "batching",
                "expected static, dynamic, continuous or chunked, got \"" + *b + "\"");
    o.batching = *k;
  }
  Extra x{r, t};
  o.max_batch = r.get_int("max_batch", 1, 65536).value_or(o.max_batch);
  o.batch_timeout_s = x.ms("batch_timeout_ms", o.batch_timeout_s, 1e7);
  o.token_budget = r.get_int("token_budget", 1, 1 << 24).value_or(o.token_budget);
  o.max_prefill_tokens = r.get_int("max_prefill_tokens", 1, 1 << 24).value_or(o.max_prefill_tokens);
  o.memory_fraction = r.get_double("memory_fraction", 0.01, 1.0).value_or(o.memory_fraction);
  o.kv_block = r.get_int("kv_block", 1, 4096).value_or(o.kv_block);
  o.replicas = r.get_int("replicas", 1, 4096).value_or(o.replicas);
  if (auto s = r.get_string("router")) {
    auto k = parse_router(*s);
    if (!k)
      r.fail_at(*t.get("router"), "router",
                "expected round-robin or least-loaded, got \"" + *s + "\"");
    o.router = *k;
  }
  o.slo_ttft_s = x.ms("slo_ttft_ms", o.slo_ttft_s, 1e9);
  o.slo_tpot_s = x.ms("slo_tpot_ms", o.slo_tpot_s, 1e9);
  // A key only another policy than the file's own reads is an error, as the flags are
  // (token_budget beside batching = "continuous" ran without a word). A file that names
  // no policy may be meant for a --batching flag.
  if (t.get("batching"))
    for (const PolicyOnlyKey& k : kPolicyOnlyKeys)
      if (const TomlValue* v = t.get(k.key); v && k.reader != o.batching)
        r.fail_at(*v, k.key,
                  std::string("only ") + k.who + " reads it, and batching is \"" +
                      std::string(batching_name(o.batching)) + "\"");
  r.finish();
}

void read_arrivals(const TomlValue& t, const std::string& source, ArrivalOptions& a,
                   std::optional<std::string>& csv) {
  TableReader r(t, "scenario.arrivals", source);
  Extra x{r, t};
  a.rate_per_s = r.get_double("rate", 1e-6, 1e7).value_or(a.rate_per_s);
  a.duration_s = r.get_double("duration_s", 1e-6, 1e9).value_or(a.duration_s);
  a.requests = r.get_int("requests", 0, int64_t(1) << 26).value_or(a.requests);
  // Alternatives: a stream of `requests` arrivals, or arrivals over `duration_s`.
  if (t.get("duration_s") && t.get("requests") && a.requests > 0)
    r.fail_at(*t.get("requests"), "requests", "give duration_s or requests, not both");
  x.distribution("prompt", a.prompt, 0, true);
  x.distribution("output", a.output, 0, true);
  if (auto m = x.numbers("priority_mix", 0, kHuge)) {
    double sum = 0;
    for (double v : *m) sum += v;
    if (!(sum > 0)) r.fail_at(*t.get("priority_mix"), "priority_mix", "give at least one positive share");
    a.priority_mix = *m;
  }
  a.seed = uint64_t(r.get_int("seed", 0, INT64_MAX).value_or(int64_t(a.seed)));
  if (auto c = r.get_string("csv")) {
    // The trace is the whole stream: the generator's keys would be ignored.
    for (const char* k : {"rate", "duration_s", "requests", "prompt", "output", "priority_mix", "seed"})
      if (t.get(k))
        r.fail_at(*t.get(k), k, "the csv trace gives every request (arrival, prompt, output, priority); drop '" +
                                    std::string(k) + "' or the csv");
    std::filesystem::path p(*c);
    std::filesystem::path dir = std::filesystem::path(source).parent_path();
    csv = p.is_absolute() || dir.empty() || source.starts_with("<built-in>") ? p.string()
                                                                             : (dir / p).string();
  }
  r.finish();
}

void read_rag(const TomlValue& t, const std::string& source, RagOptions& o) {
  TableReader r(t, "scenario.rag", source);
  Extra x{r, t};
  if (auto modes = x.strings("modes")) {
    o.modes.clear();
    for (size_t i = 0; i < modes->size(); ++i) {
      auto m = parse_rag_mode((*modes)[i]);
      if (!m)
        r.fail_at(t.get("modes")->array[i], "modes",
                  "expected sequential, overlapped, prefetch or timeout");
      o.modes.push_back(*m);
    }
    x.no_repeats("modes", *modes);
  }
  x.distribution("retrieval_ms", o.retrieval_ms, 1e7);
  o.preprocess_ms = r.get_double("preprocess_ms", 0, 1e7).value_or(o.preprocess_ms);
  o.assembly_ms = r.get_double("assembly_ms", 0, 1e7).value_or(o.assembly_ms);
  o.base_tokens = r.get_int("base_tokens", 1, 1 << 24).value_or(o.base_tokens);
  o.context_tokens = r.get_int("context_tokens", 0, 1 << 24).value_or(o.context_tokens);
  o.output_tokens = r.get_int("output_tokens", 1, 1 << 24).value_or(o.output_tokens);
  o.timeout_ms = r.get_double("timeout_ms", 0, 1e7).value_or(o.timeout_ms);
  o.prefetch_lead_ms = r.get_double("prefetch_lead_ms", 0, 1e7).value_or(o.prefetch_lead_ms);
  o.prefetch_hit = r.get_double("prefetch_hit", 0, 1).value_or(o.prefetch_hit);
  o.cpu_cores = r.get_int("cpu_cores", 1, 4096).value_or(o.cpu_cores);
  o.runtime_threads = r.get_int("runtime_threads", 0, 4096).value_or(o.runtime_threads);
  o.retrieval_ref_threads =
      r.get_int("retrieval_ref_threads", 1, 4096).value_or(o.retrieval_ref_threads);
  o.retrieval_parallel_fraction =
      r.get_double("retrieval_parallel_fraction", 0, 1).value_or(o.retrieval_parallel_fraction);
  o.samples = r.get_int("samples", 1, 10000000).value_or(o.samples);
  o.seed = uint64_t(r.get_int("seed", 0, INT64_MAX).value_or(int64_t(o.seed)));
  r.finish();
}

void read_moe(const TomlValue& t, const std::string& source, MoeOptions& o) {
  TableReader r(t, "scenario.moe", source);
  Extra x{r, t};
  if (auto l = r.get_string("load")) {
    if (*l == "uniform")
      o.load = ExpertLoadKind::uniform;
    else if (*l == "zipf")
      o.load = ExpertLoadKind::zipf;
    else if (*l == "histogram")
      o.load = ExpertLoadKind::histogram;
    else
      r.fail_at(*t.get("load"), "load", "expected uniform, zipf or histogram, got \"" + *l + "\"");
  }
  o.zipf_skew = r.get_double("zipf_skew", 0, 10).value_or(o.zipf_skew);
  if (auto h = x.numbers("histogram", 0, kHuge)) {
    // As --histogram: a histogram implies load = "histogram"; with another load it is
    // a contradiction (it was silently ignored).
    if (t.get("load") && o.load != ExpertLoadKind::histogram)
      r.fail_at(*t.get("histogram"), "histogram", "a histogram needs load = \"histogram\" (or no load)");
    o.histogram = *h;
    o.load = ExpertLoadKind::histogram;
  }
  if (o.load == ExpertLoadKind::histogram && o.histogram.empty())
    r.fail_table("load = \"histogram\" needs a histogram = [tokens per expert, ...]");
  o.gpus = r.get_int("gpus", 1, 4096).value_or(o.gpus);
  if (auto b = x.integers("batches", 1, 1 << 20)) {
    std::vector<std::string> keys;
    for (int64_t v : *b) keys.push_back(std::to_string(v));
    x.no_repeats("batches", keys);
    o.batches = *b;
  }
  o.context = r.get_int("context", 1, 1 << 24).value_or(o.context);
  o.prompt = r.get_int("prompt", 0, 1 << 24).value_or(o.prompt);
  o.hot_replicas = r.get_int("hot_replicas", 0, 1 << 16).value_or(o.hot_replicas);
  o.samples = r.get_int("samples", 1, 1000000).value_or(o.samples);
  o.seed = uint64_t(r.get_int("seed", 0, INT64_MAX).value_or(int64_t(o.seed)));
  r.finish();
}

void read_edge(const TomlValue& t, const std::string& source, EdgeOptions& o) {
  TableReader r(t, "scenario.edge", source);
  Extra x{r, t};
  if (auto w = x.strings("weights")) {
    std::vector<std::string> keys;
    for (size_t i = 0; i < w->size(); ++i) {
      std::string why;
      auto f = parse_weight_format((*w)[i], &why);
      if (!f) r.fail_at(t.get("weights")->array[i], "weights", why);
      keys.push_back(format_name(*f));
    }
    x.no_repeats("weights", keys);
    o.weights = *w;
  }
  o.prompt = r.get_int("prompt", 1, 1 << 24).value_or(o.prompt);
  o.gen = r.get_int("gen", 1, 1 << 24).value_or(o.gen);
  o.os_reserve_gb = r.get_double("os_reserve_gb", 0, 1e6).value_or(o.os_reserve_gb);
  o.cpu_bandwidth_share =
      r.get_double("cpu_bandwidth_share", 0, 0.95).value_or(o.cpu_bandwidth_share);
  if (auto k = x.strings("kv_dtypes")) {
    std::vector<std::string> keys;
    for (size_t i = 0; i < k->size(); ++i) {
      std::string why;
      auto d = parse_kv_dtype((*k)[i], &why);
      if (!d) r.fail_at(t.get("kv_dtypes")->array[i], "kv_dtypes", why);
      keys.emplace_back(dtype_name(*d));
    }
    x.no_repeats("kv_dtypes", keys);
    o.kv_dtypes = *k;
  }
  o.kv_context = r.get_int("kv_context", 1, 1 << 24).value_or(o.kv_context);
  if (auto b = x.integers("beams", 1, 64)) {
    std::vector<std::string> keys;
    for (int64_t v : *b) keys.push_back(std::to_string(v));
    x.no_repeats("beams", keys);
    o.beams = *b;
  }
  r.allow("claims");
  if (const TomlValue* c = t.get("claims")) {
    if (c->kind != TomlValue::Kind::array)
      r.fail_at(*c, "claims", "expected [[scenario.edge.claims]] tables");
    for (size_t i = 0; i < c->array.size(); ++i) {
      const TomlValue& e = c->array[i];
      if (e.kind != TomlValue::Kind::table)
        r.fail_at(e, "claims", "expected [[scenario.edge.claims]] tables");
      TableReader cr(e, "scenario.edge.claims[" + std::to_string(i) + "]", source);
      Claim cl;
      cl.label = cr.require_string("label");
      cl.ms_per_token = cr.get_double("ms_per_token", 0, 1e9);
      cl.memory_gb = cr.get_double("memory_gb", 0, 1e9);
      cl.memory_saved_pct = cr.get_double("memory_saved_pct", -1000, 100);
      cl.time_saved_pct = cr.get_double("time_saved_pct", -1000, 100);
      cl.source = cr.get_string("source").value_or("");
      cr.finish();
      o.claims.push_back(cl);
    }
  }
  r.finish();
}

}  // namespace

ScenarioSpec parse_scenario_toml(std::string_view text, std::string_view source_sv) {
  std::string source(source_sv);
  TomlValue root = parse_toml(text, source);
  TableReader top(root, "", source);
  const TomlValue* tp = top.get_table("scenario");
  if (!tp) throw Error(source + ":1:1: expected a [scenario] table");
  top.finish();
  const TomlValue& t = *tp;
  TableReader r(t, "scenario", source);
  ScenarioSpec s;
  s.source = source;
  s.name = r.require_string("name");
  if (s.name.empty()) r.fail_table("name must not be empty");
  s.description = r.get_string("description").value_or("");
  std::string kind = r.require_string("kind");
  const char* tables[] = {"serve", "rag", "moe", "edge"};
  bool known = false;
  for (ScenarioKind k :
       {ScenarioKind::serve, ScenarioKind::rag, ScenarioKind::moe, ScenarioKind::edge})
    if (scenario_kind_name(k) == kind) s.kind = k, known = true;
  if (!known)
    r.fail_at(*t.get("kind"), "kind", "expected serve, rag, moe or edge, got \"" + kind + "\"");
  s.model = r.get_string("model");
  s.hardware = r.get_string("hardware");
  if (s.model) s.model = resolve_spec_reference(*s.model, source);
  if (s.hardware) s.hardware = resolve_spec_reference(*s.hardware, source);
  if (s.model) check_spec_reference(r, *t.get("model"), "model", "models", *s.model);
  if (s.hardware) check_spec_reference(r, *t.get("hardware"), "hardware", "hardware", *s.hardware);
  read_plan_options(r, t, s.options);
  // Only the table of the scenario's own kind (and arrivals for serve) may appear.
  for (const char* name : tables) {
    const TomlValue* sub = r.get_table(name);
    if (!sub) continue;
    if (kind != name)
      r.fail_at(*sub, name,
                "a scenario of kind \"" + kind + "\" takes [scenario." + kind +
                    "], not [scenario." + name + "]");
    if (s.kind == ScenarioKind::serve) read_serve(*sub, source, s.serve);
    if (s.kind == ScenarioKind::rag) read_rag(*sub, source, s.rag);
    if (s.kind == ScenarioKind::moe) read_moe(*sub, source, s.moe);
    if (s.kind == ScenarioKind::edge) read_edge(*sub, source, s.edge);
  }
  if (const TomlValue* a = r.get_table("arrivals")) {
    if (s.kind != ScenarioKind::serve)
      r.fail_at(*a, "arrivals", "only serve scenarios take [scenario.arrivals]");
    read_arrivals(*a, source, s.arrivals, s.arrivals_csv);
  }
  r.finish();
  return s;
}

ScenarioSpec load_scenario(std::string_view name_or_path) {
  std::string arg(name_or_path);
  for (const BuiltinSpec& b : builtin_specs("scenarios"))
    if (b.name == arg) return parse_scenario_toml(b.text, "<built-in>/" + b.path);
  std::error_code ec;
  if (looks_like_path(arg) || std::filesystem::exists(arg, ec)) {
    if (!std::filesystem::exists(arg, ec)) throw Error(arg + ": no such file");
    return parse_scenario_toml(read_file(arg), arg);
  }
  std::vector<std::string> names = builtin_names("scenarios");
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  std::string hint = closest_match(arg, names);
  throw Error("unknown scenario '" + arg + "'" +
              (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
              "; built-in scenarios: " + list + "; or give a path to a TOML file");
}

}  // namespace lathe
