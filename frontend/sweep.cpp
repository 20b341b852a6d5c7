#include "frontend/sweep.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "frontend/plan_keys.h"
#include "frontend/specs.h"
#include "frontend/toml_doc.h"
#include "ir/assert.h"

namespace lathe {

// ---- metrics, objectives, constraints ----

namespace {
struct MetricInfo {
  SweepMetric metric;
  std::string_view name;
  bool lower_is_better;
};
constexpr MetricInfo kMetrics[] = {
    {SweepMetric::ttft_ms, "ttft_ms", true},
    {SweepMetric::tpot_ms, "tpot_ms", true},
    {SweepMetric::e2e_ms, "e2e_ms", true},
    {SweepMetric::tokens_per_s, "tokens_per_s", false},
    {SweepMetric::decode_tokens_per_s, "decode_tokens_per_s", false},
    {SweepMetric::prefill_tokens_per_s, "prefill_tokens_per_s", false},
    {SweepMetric::memory_gb, "memory_gb", true},
    {SweepMetric::cost_per_mtok, "cost_per_mtok", true},
};
}  // namespace

std::string_view metric_name(SweepMetric m) {
  for (const MetricInfo& i : kMetrics)
    if (i.metric == m) return i.name;
  return "?";
}

std::optional<SweepMetric> parse_metric(std::string_view s) {
  for (const MetricInfo& i : kMetrics)
    if (i.name == s) return i.metric;
  return std::nullopt;
}

bool metric_lower_is_better(SweepMetric m) {
  for (const MetricInfo& i : kMetrics)
    if (i.metric == m) return i.lower_is_better;
  return true;
}

std::vector<std::string> metric_names() {
  std::vector<std::string> out;
  for (const MetricInfo& i : kMetrics) out.emplace_back(i.name);
  return out;
}

std::string Objective::text() const {
  return std::string(minimize ? "min " : "max ") + std::string(metric_name(metric));
}

std::string Constraint::text() const {
  // The shortest spelling that reads back as the bound: %g rounded a bound of 41.09088
  // to 41.0909, which a violating row's 41.09088 reads as meeting.
  char num[40];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(num, sizeof num, "%.*g", digits, bound);
    if (std::strtod(num, nullptr) == bound) break;
  }
  return std::string(metric_name(metric)) + (metric_lower_is_better(metric) ? " <= " : " >= ") + num;
}

std::optional<Objective> parse_objective(std::string_view s, std::string* why) {
  auto trim = [](std::string_view x) {
    while (!x.empty() && x.front() == ' ') x.remove_prefix(1);
    while (!x.empty() && x.back() == ' ') x.remove_suffix(1);
    return x;
  };
  s = trim(s);
  std::optional<bool> minimize;
  for (std::string_view dir : {"min", "max", "minimize", "maximize"}) {
    if (s.size() > dir.size() && s.starts_with(dir) &&
        (s[dir.size()] == ' ' || s[dir.size()] == ':')) {
      minimize = dir.starts_with("min");
      s = trim(s.substr(dir.size() + 1));
      break;
    }
  }
  auto m = parse_metric(s);
  if (!m) {
    if (why) {
      std::string hint = closest_match(s, metric_names());
      std::string all;
      for (const std::string& n : metric_names()) all += (all.empty() ? "" : ", ") + n;
      *why = "unknown objective metric '" + std::string(s) + "'" +
             (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
             "; write \"min METRIC\" or \"max METRIC\" with " + "METRIC one of " + all;
    }
    return std::nullopt;
  }
  return Objective{*m, minimize.value_or(metric_lower_is_better(*m))};
}

std::vector<std::string> fusion_pass_names() {
  std::vector<std::string> out;
  for (std::string_view p : known_pass_names())
    if (p.starts_with("fuse-") || p == "flash-attention") out.emplace_back(p);
  return out;
}

std::optional<FusionSet> parse_fusion_set(std::string_view s, std::string* why) {
  if (s == "all" || s == "default") return FusionSet{"all", {}, true};
  if (s == "none") return FusionSet{"none", {}, false};
  std::vector<std::string> known = fusion_pass_names();
  FusionSet f;
  f.all = false;
  f.name = std::string(s);
  size_t start = 0;
  while (start <= s.size()) {
    size_t plus = s.find('+', start);
    if (plus == std::string_view::npos) plus = s.size();
    std::string p(s.substr(start, plus - start));
    start = plus + 1;
    if (p.empty()) {  // "fuse-qkv+" was taken, and written into the rows as typed
      if (why) *why = "empty item in the fusion set '" + std::string(s) + "' (passes are joined by one '+')";
      return std::nullopt;
    }
    if (std::find(known.begin(), known.end(), p) == known.end()) {
      if (why) {
        std::string hint = closest_match(p, known);
        std::string all;
        for (const std::string& k : known) all += (all.empty() ? "" : ", ") + k;
        *why = "unknown fusion pass '" + p + "'" +
               (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
               "; a fusion set is \"all\", \"none\" or fusion passes joined by '+': " + all;
      }
      return std::nullopt;
    }
    if (std::find(f.enabled.begin(), f.enabled.end(), p) != f.enabled.end()) {
      if (why) *why = "fusion pass '" + p + "' named twice";
      return std::nullopt;
    }
    f.enabled.push_back(p);
  }
  if (f.enabled.empty()) {
    if (why) *why = "empty fusion set (write \"none\" for no fusion)";
    return std::nullopt;
  }
  return f;
}

// ---- hardware with overrides ----

Target load_target_spec(std::string_view spec_sv, const std::vector<std::string>& sets) {
  std::string spec(spec_sv);
  size_t plus = target_spec_split(spec);
  Target t = load_target(spec.substr(0, plus));
  std::string suffix;  // the overrides, in the order applied
  for (const std::string& s : sets) {
    std::string err = apply_override(t, s);
    if (!err.empty()) throw Error("--set " + s + ": " + err);
    suffix += "+" + s;
  }
  if (plus != std::string::npos) {
    std::string rest = spec.substr(plus + 1);
    size_t start = 0;
    while (start <= rest.size()) {
      size_t p = rest.find('+', start);
      if (p == std::string::npos) p = rest.size();
      if (p == start) throw Error(spec + ": empty override after '+' (expected name+key=value, e.g. a100-80g+hbm_bandwidth_gbs=x1.5)");
      std::string o = rest.substr(start, p - start);
      std::string err = apply_override(t, o);
      if (!err.empty()) throw Error(spec + ": " + err);
      suffix += "+" + o;
      start = p + 1;
    }
  }
  t.name += suffix;
  if (std::string why = target_problem(t); !why.empty()) throw Error(t.name + ": " + why);
  return t;
}

// ---- the sweep file ----

namespace {

constexpr int64_t kMaxAxis = int64_t(1) << 24;

// Reads one axis: a scalar, an array, or (for integers) a range table
// { from, to, step } / { from, to, mul }.
struct AxisReader {
  TableReader& r;
  const TomlValue& t;
  const std::string& source;

  const TomlValue* get(std::string_view key) {
    r.allow(key);
    return t.get(key);
  }
  [[noreturn]] void fail(const TomlValue& v, std::string_view key, const std::string& why) {
    r.fail_at(v, key, why);
  }

  std::vector<const TomlValue*> elements(const TomlValue& v, std::string_view key) {
    std::vector<const TomlValue*> out;
    if (v.kind == TomlValue::Kind::array) {
      if (v.array.empty()) fail(v, key, "empty axis (expected at least one value)");
      for (const TomlValue& e : v.array) out.push_back(&e);
    } else {
      out.push_back(&v);
    }
    return out;
  }

  std::optional<std::vector<std::string>> strings(std::string_view key) {
    const TomlValue* v = get(key);
    if (!v) return std::nullopt;
    std::vector<std::string> out;
    for (const TomlValue* e : elements(*v, key)) {
      if (e->kind != TomlValue::Kind::string)
        fail(*e, key,
             "expected a string or an array of strings, got " + std::string(e->kind_name()));
      if (std::find(out.begin(), out.end(), e->str) != out.end())
        fail(*e, key, "\"" + e->str + "\" appears twice in the axis");
      out.push_back(e->str);
    }
    return out;
  }

  std::optional<std::vector<int64_t>> integers(std::string_view key, int64_t lo, int64_t hi) {
    const TomlValue* v = get(key);
    if (!v) return std::nullopt;
    std::vector<int64_t> out;
    auto check = [&](const TomlValue& at, int64_t x) {
      if (x < lo || x > hi)
        fail(at, key,
             "expected integers in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                 std::to_string(x));
    };
    if (v->kind == TomlValue::Kind::table) {
      std::string path = (r.path().empty() ? "" : r.path() + ".") + std::string(key);
      TableReader rr(*v, path, source);
      int64_t from = rr.require_int("from", lo, hi), to = rr.require_int("to", lo, hi);
      auto step = rr.get_int("step", 1, hi);
      auto mul = rr.get_int("mul", 2, 1024);
      rr.finish();
      if (step && mul) fail(*v, key, "a range takes either 'step' or 'mul', not both");
      if (mul && from == 0) fail(*v, key, "a range with 'mul' must start above 0 (0 x mul stays 0)");
      if (from > to)
        fail(*v, key,
             "empty range: from = " + std::to_string(from) +
                 " is greater than to = " + std::to_string(to));
      for (int64_t x = from; x <= to;) {
        out.push_back(x);
        if (int64_t(out.size()) > kMaxAxis) fail(*v, key, "range has more than 2^24 values");
        if (mul) {
          if (x > to / *mul) break;
          x *= *mul;
        } else {
          int64_t s = step.value_or(1);
          if (x > to - s) break;
          x += s;
        }
      }
      return out;
    }
    for (const TomlValue* e : elements(*v, key)) {
      if (e->kind != TomlValue::Kind::integer)
        fail(*e, key,
             "expected an integer, an array of integers or a range { from, to, step | mul }, got " +
                 std::string(e->kind_name()));
      check(*e, e->integer);
      if (std::find(out.begin(), out.end(), e->integer) != out.end())
        fail(*e, key, std::to_string(e->integer) + " appears twice in the axis");
      out.push_back(e->integer);
    }
    return out;
  }

  // The TOML value of the i-th element of a string axis (for located errors).
  const TomlValue& element(std::string_view key, size_t i) {
    const TomlValue* v = t.get(key);
    return v->kind == TomlValue::Kind::array ? v->array[i] : *v;
  }
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

}  // namespace

SweepSpec parse_sweep_toml(std::string_view text, std::string_view source_sv) {
  std::string source(source_sv);
  TomlValue root = parse_toml(text, source);
  TableReader top(root, "", source);
  const TomlValue* tp = top.get_table("sweep");
  if (!tp) {
    std::string have;
    for (const std::string& k : root.keys) have += (have.empty() ? "" : ", ") + k;
    throw Error(source + ":1:1: expected a [sweep] table" +
                (have.empty() ? std::string(" (the file is empty)") : " (found: " + have + ")"));
  }
  top.finish();
  const TomlValue& t = *tp;
  TableReader r(t, "sweep", source);
  AxisReader ax{r, t, source};
  SweepSpec s;
  s.source = source;
  s.text = std::string(text);
  s.name = r.get_string("name").value_or(std::filesystem::path(source).stem().string());
  s.description = r.get_string("description").value_or("");
  s.ideal = r.get_bool("ideal").value_or(false);

  // Accept the singular spellings too (model = "x").
  auto either = [&](const char* plural,
                    const char* singular) -> std::optional<std::vector<std::string>> {
    if (t.get(plural) && t.get(singular))
      r.fail_at(*t.get(singular), singular,
                std::string("give either '") + plural + "' or '" + singular + "', not both");
    if (auto v = ax.strings(plural)) return v;
    return ax.strings(singular);
  };
  auto models = either("models", "model");
  if (!models) r.fail_missing("models", "a model name or path, or an array of them");
  s.models = *models;
  auto hardware = either("hardware", "hw");
  if (!hardware) r.fail_missing("hardware", "a hardware name or path, or an array of them");
  s.hardware = *hardware;
  // Paths are relative to the sweep file, as in plan and scenario files.
  for (std::string& m : s.models) m = resolve_spec_reference(m, source);
  for (std::string& h : s.hardware) h = resolve_spec_reference(h, source);
  const char* mk = t.get("models") ? "models" : "model";
  const char* hk = t.get("hardware") ? "hardware" : "hw";
  for (const std::string& m : s.models) check_spec_reference(r, *t.get(mk), mk, "models", m, false);
  for (const std::string& h : s.hardware) check_spec_reference(r, *t.get(hk), hk, "hardware", h, false);

  if (auto v = ax.integers("batch", 1, 1 << 20)) s.batch = *v;
  if (auto v = ax.integers("prompt", 1, 1 << 24)) s.prompt = *v;
  if (auto v = ax.integers("gen", 0, 1 << 24)) s.gen = *v;
  if (auto v = ax.integers("tp", 1, 1024)) s.tp = *v;

  std::string why;
  if (auto v = ax.strings("weights")) {
    s.weights.clear();
    for (size_t i = 0; i < v->size(); ++i) {
      const std::string& x = (*v)[i];
      if (x == "auto" || x == "model") {
        s.weights.push_back(std::nullopt);
        continue;
      }
      auto f = parse_weight_format(x, &why);
      if (!f)
        r.fail_at(ax.element("weights", i), "weights", why + " (or \"auto\": the model's dtype)");
      s.weights.push_back(f);
    }
  }
  if (auto v = ax.strings("kv")) {
    s.kv.clear();
    for (size_t i = 0; i < v->size(); ++i) {
      const std::string& x = (*v)[i];
      if (x == "auto") {
        s.kv.push_back(std::nullopt);
        continue;
      }
      auto d = parse_kv_dtype(x, &why);
      if (!d) r.fail_at(ax.element("kv", i), "kv", why + " (or \"auto\": the activation dtype)");
      s.kv.push_back(d);
    }
  }
  if (auto v = ax.strings("kv_layout")) {
    s.kv_layout.clear();
    for (size_t i = 0; i < v->size(); ++i) {
      const std::string& x = (*v)[i];
      if (x == "auto") {
        s.kv_layout.push_back(std::nullopt);
        continue;
      }
      auto l = parse_kv_layout(x, &why);
      if (!l) r.fail_at(ax.element("kv_layout", i), "kv_layout", why + " (or \"auto\")");
      s.kv_layout.push_back(l);
    }
  }
  if (auto v = ax.strings("fusion")) {
    s.fusion.clear();
    for (size_t i = 0; i < v->size(); ++i) {
      auto f = parse_fusion_set((*v)[i], &why);
      if (!f) r.fail_at(ax.element("fusion", i), "fusion", why);
      s.fusion.push_back(*f);
    }
  }
  if (auto v = ax.strings("act")) {
    s.act.clear();
    for (size_t i = 0; i < v->size(); ++i) {
      const std::string& x = (*v)[i];
      if (x == "auto") {
        s.act.push_back(std::nullopt);
        continue;
      }
      auto d = parse_float_dtype(x);
      if (!d)
        r.fail_at(ax.element("act", i), "act",
                  "expected f32, f16, bf16 or auto, got \"" + x + "\"");
      s.act.push_back(d);
    }
  }
  // Two spellings of one value ("int8" and "int8:g0"...) would make duplicate plans.
  auto no_dupes = [&](const char* key, auto& values, auto name) {
    std::set<std::string> seen;
    for (size_t i = 0; i < values.size(); ++i)
      if (!seen.insert(name(values[i])).second)
        r.fail_at(ax.element(key, i), key, "\"" + name(values[i]) + "\" appears twice in the axis");
  };
  no_dupes("weights", s.weights, [](const std::optional<Format>& f) {
    return f ? format_name(*f) : std::string("auto");
  });
  no_dupes("kv", s.kv, [](const std::optional<DType>& d) {
    return d ? std::string(dtype_name(*d)) : std::string("auto");
  });
  no_dupes("kv_layout", s.kv_layout, [](const std::optional<KvLayout>& l) {
    return l ? kv_layout_name(*l) : std::string("auto");
  });
  no_dupes("act", s.act, [](const std::optional<DType>& d) {
    return d ? std::string(dtype_name(*d)) : std::string("auto");
  });
  // A fusion set is the passes it turns on, in any order ("all" is every one of them).
  no_dupes("fusion", s.fusion, [](const FusionSet& f) {
    if (f.all || f.enabled.size() == fusion_pass_names().size()) return std::string("all");
    if (f.enabled.empty()) return std::string("none");
    std::vector<std::string> on = f.enabled;
    std::sort(on.begin(), on.end());
    std::string key;
    for (const std::string& p : on) key += (key.empty() ? "" : "+") + p;
    return key;
  });

  if (const TomlValue* o = t.get("objectives")) {
    r.allow("objectives");
    s.objectives.clear();
    for (const TomlValue* e : ax.elements(*o, "objectives")) {
      if (e->kind != TomlValue::Kind::string)
        r.fail_at(*e, "objectives",
                  "expected strings such as \"min tpot_ms\", got " + std::string(e->kind_name()));
      auto obj = parse_objective(e->str, &why);
      if (!obj) r.fail_at(*e, "objectives", why);
      for (const Objective& x : s.objectives)
        if (x.metric == obj->metric)
          r.fail_at(*e, "objectives",
                    "metric " + std::string(metric_name(x.metric)) + " appears twice");
      s.objectives.push_back(*obj);
    }
  }

  if (const TomlValue* w = r.get_table("whatif")) {
    std::vector<std::string> fields;
    for (const TargetField& f : target_fields()) fields.emplace_back(f.key);
    for (size_t i = 0; i < w->keys.size(); ++i) {
      const std::string& key = w->keys[i];
      const TomlValue& v = w->values[i];
      std::string at = source + ":" + std::to_string(v.line) + ":" + std::to_string(v.column) +
                       ": sweep.whatif." + key;
      if (!find_target_field(key)) {
        std::string hint = closest_match(key, fields);
        throw Error(
            at + ": unknown hardware field" +
            (hint.empty() ? "; fields: " + join(fields) : " (did you mean '" + hint + "'?)"));
      }
      WhatifAxis a;
      a.field = key;
      std::vector<const TomlValue*> els;
      if (v.kind == TomlValue::Kind::array) {
        if (v.array.empty()) throw Error(at + ": empty axis (expected at least one value)");
        for (const TomlValue& e : v.array) els.push_back(&e);
      } else {
        els.push_back(&v);
      }
      std::map<std::pair<bool, double>, size_t> seen;  // (factor, number) -> index in a.values
      for (const TomlValue* e : els) {
        std::string value;
        if (e->kind == TomlValue::Kind::string)
          value = e->str;
        else if (e->kind == TomlValue::Kind::integer)
          value = std::to_string(e->integer);
        else if (e->kind == TomlValue::Kind::floating) {
          char buf[64];
          std::snprintf(buf, sizeof buf, "%.10g", e->floating);
          value = buf;
        } else {
          throw Error(at + ": expected numbers or \"xF\" factors, got " +
                      std::string(e->kind_name()));
        }
        // A value is checked against the field's range here; a factor "xF" only for its
        // spelling, its product against each hardware entry when the points are built.
        const std::optional<OverrideValue> parsed = parse_override_value(value);
        const bool factor = !value.empty() && (value[0] == 'x' || value[0] == '*');
        Target probe;  // a scratch target the override is applied to
        probe.hbm_bandwidth_gbs = 1;
        std::string err = factor ? "" : apply_override(probe, key + "=" + value);
        if (factor && !(parsed && parsed->number >= 0))
          err = "'" + value + "': a factor is x followed by a number >= 0 (x0.5, x2)";
        if (!err.empty())
          throw Error(source + ":" + std::to_string(e->line) + ":" + std::to_string(e->column) +
                      ": sweep.whatif." + key + ": " + err);
        // Compared as numbers: "x1" and "x1.0" (or 3350 and 3350.0) are one point. A map
        // of the numbers seen (a scan of the axis for each value took 16 s at 20,000).
        auto [it, fresh] = seen.try_emplace({factor, parsed->number}, a.values.size());
        if (!fresh)
          throw Error(source + ":" + std::to_string(e->line) + ":" + std::to_string(e->column) +
                      ": sweep.whatif." + key + ": \"" + value + "\" is the same point as \"" + a.values[it->second] +
                      "\", already in the axis");
        a.values.push_back(value);
        a.where.push_back(source + ":" + std::to_string(e->line) + ":" + std::to_string(e->column));
      }
      s.whatif.push_back(std::move(a));
    }
  }

  if (const TomlValue* c = r.get_table("constraints")) {
    TableReader cr(*c, "sweep.constraints", source);
    s.fits = cr.get_bool("fits").value_or(true);
    for (const std::string& name : metric_names()) {
      auto v = cr.get_double(name, 0.0, 1e15);
      if (!v) continue;
      const TomlValue* at = c->get(name);
      if (*v <= 0) cr.fail_at(*at, name, "expected a positive bound");
      s.constraints.push_back({*parse_metric(name), *v});
    }
    cr.finish();
  }
  r.finish();

  // Names must resolve (with the location of the entry on failure).
  auto located = [&](const char* key, size_t i, auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      const TomlValue* v = t.get(key);
      if (!v) v = t.get(std::string(key) == "models" ? "model" : "hw");
      const TomlValue& el = v->kind == TomlValue::Kind::array ? v->array[i] : *v;
      throw Error(source + ":" + std::to_string(el.line) + ":" + std::to_string(el.column) +
                  ": sweep." + key + ": " + e.what());
    }
  };
  for (size_t i = 0; i < s.models.size(); ++i)
    located("models", i, [&] { load_model(s.models[i]); });
  for (size_t i = 0; i < s.hardware.size(); ++i)
    located("hardware", i, [&] { load_target_spec(s.hardware[i]); });
  // Each what-if value must leave every hardware entry usable (a bandwidth factor that
  // takes it below the range, say), named at the value rather than when the sweep runs.
  for (const WhatifAxis& a : s.whatif)
    for (size_t j = 0; j < a.values.size(); ++j)
      for (const std::string& hw : s.hardware) {
        try {
          load_target_spec(hw + "+" + a.field + "=" + a.values[j]);
        } catch (const Error& e) {
          throw Error(a.where[j] + ": sweep.whatif." + a.field + ": " + e.what());
        }
      }
  return s;
}

uint64_t sweep_point_count(const SweepSpec& s) {
  uint64_t hw = s.hardware.size();
  for (const WhatifAxis& a : s.whatif) {  // saturating, as below (7 axes of 1024 wrapped to 0)
    const uint64_t x = a.values.size();
    hw = x != 0 && hw > UINT64_MAX / x ? UINT64_MAX : hw * x;
  }
  uint64_t sizes[] = {
      s.models.size(), hw,          s.weights.size(), s.kv.size(),    s.kv_layout.size(),
      s.fusion.size(), s.tp.size(), s.act.size(),     s.batch.size(), s.prompt.size(),
      s.gen.size()};
  uint64_t n = 1;
  for (uint64_t x : sizes) {
    if (x != 0 && n > UINT64_MAX / x) return UINT64_MAX;
    n *= x;
  }
  return n;
}

SweepSpec load_sweep(std::string_view name_or_path) {
  std::string arg(name_or_path);
  for (const BuiltinSpec& b : builtin_specs("sweeps"))
    if (b.name == arg) return parse_sweep_toml(b.text, "<built-in>/" + b.path);
  std::error_code ec;
  if (std::filesystem::exists(arg, ec)) return parse_sweep_toml(read_file(arg), arg);
  std::vector<std::string> names = builtin_names("sweeps");
  std::string hint = closest_match(arg, names);
  if (looks_like_path(arg)) throw Error(arg + ": no such file");
  throw Error("unknown sweep '" + arg + "'" +
              (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
              "; built-in sweeps: " + join(names) + "; or give a path to a TOML file");
}

}  // namespace lathe
