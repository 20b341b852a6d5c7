#include "sweep/sweep.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "ir/hash.h"
#include "ir/host.h"
#include "frontend/builder.h"
#include "frontend/specs.h"
#include "ir/assert.h"
#include "passes/pipeline.h"
#include "simulator/prepared.h"
#include "simulator/random.h"

namespace lathe {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}


// Axis order of the mixed-radix point index, slowest first.
enum Axis {
  kModel,
  kTarget,
  kWeights,
  kKv,
  kLayout,
  kFusion,
  kTp,
  kAct,
  kBatch,
  kPrompt,
  kGen,
  kAxes
};

// Every field of a model spec that planning reads, as text.
std::string model_fingerprint(const ModelSpec& m) {
  std::string s = m.name + "|" + m.arch + "|" + std::string(dtype_name(m.dtype));
  auto add = [&s](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "|%.17g", v);
    s += buf;
  };
  for (int64_t v : {m.hidden, m.layers, m.heads, m.kv_heads, m.head_dim, m.ffn, m.vocab, m.max_context})
    add(double(v));
  add(m.norm_eps), add(m.rope_theta), add(m.tie_embeddings ? 1 : 0);
  if (m.moe) add(double(m.moe->experts)), add(double(m.moe->top_k)), add(double(m.moe->expert_ffn));
  if (m.rope_scaling) {
    s += "|" + m.rope_scaling->type;
    add(m.rope_scaling->factor), add(m.rope_scaling->low_freq_factor), add(m.rope_scaling->high_freq_factor);
    add(double(m.rope_scaling->original_max_context));
    for (double f : m.rope_scaling->factors) add(f);
  }
  return s;
}

std::string weights_name(const std::optional<Format>& f, const ModelSpec& m) {
  return f ? format_name(*f) : std::string(dtype_name(m.dtype));
}

}  // namespace

bool sweep_uses_metric(const SweepSpec& spec, SweepMetric m) {
  for (const Objective& o : spec.objectives)
    if (o.metric == m) return true;
  for (const Constraint& c : spec.constraints)
    if (c.metric == m) return true;
  return false;
}

void check_sweep_spec(const SweepSpec& spec) {
  // The count saturates: 7 what-if axes of 1024 values are above the bound, not 0.
  if (sweep_point_count(spec) > (uint64_t(1) << 60))
    throw Error(spec.source + ": the sweep has more than 2^60 points; narrow the axes");
  // Metrics of generated tokens have no value where none is generated, only a
  // convention that would win: cost 0 at gen = 0; tpot_ms and decode_tokens_per_s are
  // figures of decode steps, and gen = 0 and 1 run none (the prefill makes the first
  // token), so theirs are one step right after the prompt.
  const bool gen0 = std::find(spec.gen.begin(), spec.gen.end(), int64_t(0)) != spec.gen.end();
  if (gen0 && sweep_uses_metric(spec, SweepMetric::cost_per_mtok))
    throw Error(spec.source + ": cost_per_mtok is the price of generated tokens, and gen = 0 generates none "
                "(its cost would read 0, the best); drop 0 from the gen axis");
  const bool no_decode = std::any_of(spec.gen.begin(), spec.gen.end(), [](int64_t g) { return g <= 1; });
  for (SweepMetric m : {SweepMetric::tpot_ms, SweepMetric::decode_tokens_per_s}) {
    if (!no_decode || !sweep_uses_metric(spec, m)) continue;
    bool objective = false;
    for (const Objective& o : spec.objectives) objective = objective || o.metric == m;
    throw Error(spec.source + ": " + std::string(metric_name(m)) +
                " is a figure of decode steps, and gen = 0 or 1 runs none (the prefill makes the first token); "
                "its value there is a convention, one step right after the prompt, which " +
                (objective ? "would win the objective" : "the constraint would judge") + "; drop 0 and 1 from the gen axis");
  }
}

SweepSpace expand_sweep(const SweepSpec& spec, int64_t samples, uint64_t seed) {
  SweepSpace s;
  s.spec = spec;
  for (const std::string& m : spec.models) s.models.push_back(load_model(m));
  // Before the hardware x what-if list is built (2^70 combinations ran out of memory
  // before the count was checked).
  check_sweep_spec(spec);
  // Hardware x what-if values (the first what-if axis slowest).
  std::vector<std::string> specs = spec.hardware;
  for (const WhatifAxis& a : spec.whatif) {
    std::vector<std::string> next;
    for (const std::string& base : specs)
      for (const std::string& v : a.values) next.push_back(base + "+" + a.field + "=" + v);
    specs = std::move(next);
  }
  for (const std::string& t : specs) {
    s.targets.push_back(load_target_spec(t));
    s.target_specs.push_back(t);
    if (s.targets.back().hbm_bandwidth_gbs <= 0)
      throw Error(t + ": memory bandwidth must be positive");
  }
  // Rows name their model and hardware: two specs of one name would give rows that
  // cannot be told apart (and messages naming the wrong one).
  auto unique_names = [&](const char* axis, const std::vector<std::string>& refs,
                          const std::vector<std::string>& names) {
    for (size_t i = 0; i < names.size(); ++i)
      for (size_t j = i + 1; j < names.size(); ++j)
        if (names[i] == names[j])
          throw Error(spec.source + ": " + axis + " '" + refs[i] + "' and '" + refs[j] + "' are both named '" +
                      names[i] + "', so their rows could not be told apart; give one another name");
  };
  std::vector<std::string> model_names, target_names;
  for (const ModelSpec& m : s.models) model_names.push_back(m.name);
  for (const Target& t : s.targets) target_names.push_back(t.name);
  unique_names("models", spec.models, model_names);
  unique_names("hardware", s.target_specs, target_names);
  const bool uses_cost = sweep_uses_metric(spec, SweepMetric::cost_per_mtok);
  if (uses_cost)
    for (const Target& t : s.targets)
      if (t.price_per_hour <= 0)
        throw Error(spec.source + ": cost_per_mtok needs a price: hardware " + t.name +
                    " has no price_per_hour (set it in its spec, or add '+price_per_hour=2.5' to "
                    "its name)");
  s.radix = {
      uint64_t(s.models.size()),    uint64_t(s.targets.size()),      uint64_t(spec.weights.size()),
      uint64_t(spec.kv.size()),     uint64_t(spec.kv_layout.size()), uint64_t(spec.fusion.size()),
      uint64_t(spec.tp.size()),     uint64_t(spec.act.size()),       uint64_t(spec.batch.size()),
      uint64_t(spec.prompt.size()), uint64_t(spec.gen.size())};
  s.size = 1;
  for (uint64_t r : s.radix) {
    LATHE_ASSERT(r > 0 && s.size <= (uint64_t(1) << 60) / r, "sweep size beyond check_sweep_spec's bound");
    s.size *= r;
  }
  // The id names the rows' content: the sweep file's text and what its model and
  // hardware references resolve to (a model file edited between two shards changes it,
  // so merge refuses to join their rows).
  uint64_t h = fnv1a(spec.text);
  for (const ModelSpec& m : s.models) h = fnv1a(model_fingerprint(m), h);
  for (const Target& t : s.targets) h = fnv1a(target_to_toml(t), h);
  // A sample is another set of points; the whole space is the same whatever the seed.
  if (samples > 0 && uint64_t(samples) < s.size) h = fnv1a(std::to_string(samples) + "/" + std::to_string(seed), h);
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
  s.id = buf;
  return s;
}

PointAxes point_axes(const SweepSpace& s, uint64_t point) {
  int idx[kAxes];
  for (int a = kAxes - 1; a >= 0; --a) {
    idx[a] = int(point % s.radix[size_t(a)]);
    point /= s.radix[size_t(a)];
  }
  PointAxes p;
  p.model = idx[kModel];
  p.target = idx[kTarget];
  p.weights = idx[kWeights];
  p.kv = idx[kKv];
  p.kv_layout = idx[kLayout];
  p.fusion = idx[kFusion];
  p.tp = idx[kTp];
  p.act = idx[kAct];
  p.batch = idx[kBatch];
  p.prompt = idx[kPrompt];
  p.gen = idx[kGen];
  return p;
}

namespace {

DType resolved_act(const SweepSpace& s, const PointAxes& p) {
  const auto& a = s.spec.act[size_t(p.act)];
  if (a) return *a;
  return s.targets[size_t(p.target)].is_gpu() ? s.models[size_t(p.model)].dtype : DType::f32;
}

}  // namespace

PointFormats point_formats(const SweepSpace& s, uint64_t point) {
  const PointAxes p = point_axes(s, point);
  PointFormats f;
  f.weights = weights_name(s.spec.weights[size_t(p.weights)], s.models[size_t(p.model)]);
  const DType act = resolved_act(s, p);
  f.act = dtype_name(act);
  const auto& kv = s.spec.kv[size_t(p.kv)];
  f.kv = kv ? dtype_name(*kv) : dtype_name(act);
  if (const auto& l = s.spec.kv_layout[size_t(p.kv_layout)]) f.kv_layout = kv_layout_name(*l);
  return f;
}

namespace {

PlanOptions plan_options(const SweepSpace& s, const PointAxes& p) {
  PlanOptions o;
  o.weights = s.spec.weights[size_t(p.weights)];
  o.kv_dtype = s.spec.kv[size_t(p.kv)];
  o.kv_layout = s.spec.kv_layout[size_t(p.kv_layout)];
  o.act_dtype = s.spec.act[size_t(p.act)];
  o.tp = s.spec.tp[size_t(p.tp)];
  const FusionSet& f = s.spec.fusion[size_t(p.fusion)];
  if (!f.all)
    for (const std::string& pass : fusion_pass_names())
      if (std::find(f.enabled.begin(), f.enabled.end(), pass) == f.enabled.end())
        o.pass_enabled[pass] = false;
  return o;
}

// A plan shape: everything the lowered graphs depend on.
struct ShapeKey {
  int model, weights, kv, kv_layout, fusion, tp;
  DType act;
  bool operator==(const ShapeKey&) const = default;
};
struct ShapeKeyHash {
  size_t operator()(const ShapeKey& k) const {
    uint64_t h = 0;
    for (int v : {k.model, k.weights, k.kv, k.kv_layout, k.fusion, k.tp, int(k.act)})
      h = (h ^ uint64_t(v)) * 0x100000001b3ULL;
    return size_t(h);
  }
};

struct PlanShape {
  ShapeKey key;
  int lower_target = -1;  // the target it is lowered for (the first that supports it)
  Workload reference;
  std::string error;  // lowering failed: why (every point of the shape is skipped)
  std::unique_ptr<Lowered> lowered;
  std::unique_ptr<PreparedPlan> prepared;
  std::string kv_layout;  // chosen layout name
  std::string weights_name;  // as the rows write it
};

// Why a point cannot be planned on its target, or "" (checks that do not need graphs).
std::string point_problem(const SweepSpace& s, const PointAxes& p) {
  const Target& t = s.targets[size_t(p.target)];
  const ModelSpec& m = s.models[size_t(p.model)];
  auto unsupported = [&](const char* what, DType d) {
    return std::string(what) + " " + std::string(dtype_name(d)) + " not supported on " +
           t.name.substr(0, t.name.find('+')) +
           (t.is_gpu() ? unsupported_reason(t, d) : std::string(" (CPU)"));
  };
  if (const auto& w = s.spec.weights[size_t(p.weights)]; w && !t.supports(w->dtype))
    return unsupported("weights", w->dtype);
  DType act = resolved_act(s, p);
  if (!t.supports(act)) return unsupported("activations", act);
  if (std::string why = tp_problem(t, s.spec.tp[size_t(p.tp)]); !why.empty())
    return t.name.substr(0, t.name.find('+')) + ": " + why;
  if (const auto& k = s.spec.kv[size_t(p.kv)]; k && !t.supports(*k)) return unsupported("KV", *k);
  int64_t ctx = s.spec.prompt[size_t(p.prompt)] + s.spec.gen[size_t(p.gen)];
  if (ctx > m.max_context)
    return "prompt + gen exceeds " + m.name + "'s max_context (" + std::to_string(m.max_context) +
           ")";
  return "";
}

ShapeKey shape_key(const SweepSpace& s, const PointAxes& p) {
  return {p.model, p.weights, p.kv, p.kv_layout, p.fusion, p.tp, resolved_act(s, p)};
}

// The points this run costs: the full space or a seeded sample, then one shard.
struct Selection {
  bool all = true;
  uint64_t total = 0;            // size of the full space or the sample
  std::vector<uint64_t> points;  // the sample (sorted), when !all
  int shard = 0, shards = 1;
  uint64_t count() const {
    return total <= uint64_t(shard)
               ? 0
               : (total - uint64_t(shard) + uint64_t(shards) - 1) / uint64_t(shards);
  }
  uint64_t at(uint64_t i) const {
    uint64_t pos = i * uint64_t(shards) + uint64_t(shard);
    return all ? pos : points[pos];
  }
};

Selection select_points(const SweepSpace& s, const SweepOptions& o) {
  Selection sel;
  sel.shard = o.shard;
  sel.shards = o.shards;
  if (o.samples <= 0 || uint64_t(o.samples) >= s.size) {
    sel.total = s.size;
    return sel;
  }
  // Distinct uniform draws (Floyd's algorithm), sorted so the rows come in point order.
  sel.all = false;
  Random rng(o.seed);
  std::set<uint64_t> chosen;
  uint64_t n = s.size, k = uint64_t(o.samples);
  for (uint64_t j = n - k; j < n; ++j) {
    uint64_t t = uint64_t(rng.integer(0, int64_t(j)));
    if (!chosen.insert(t).second) chosen.insert(j);
  }
  sel.points.assign(chosen.begin(), chosen.end());
  sel.total = sel.points.size();
  return sel;
}

// Fills `row` (reused across points: its strings keep their capacity).
void fill_row(SweepRow& row, const SweepSpace& s, uint64_t point, const PointAxes& p,
              const PlanShape& sh, const SimResult& r) {
  const ModelSpec& m = s.models[size_t(p.model)];
  const Target& t = s.targets[size_t(p.target)];
  row.sweep_id = s.id;
  row.point = point;
  row.model = m.name;
  row.hardware = t.name;
  row.batch = s.spec.batch[size_t(p.batch)];
  row.prompt = s.spec.prompt[size_t(p.prompt)];
  row.gen = s.spec.gen[size_t(p.gen)];
  row.weights = sh.weights_name;
  const auto& kv = s.spec.kv[size_t(p.kv)];
  row.act = dtype_name(sh.key.act);
  row.kv = kv ? dtype_name(*kv) : dtype_name(sh.key.act);
  row.kv_layout = sh.kv_layout;
  row.fusion = s.spec.fusion[size_t(p.fusion)].name;
  row.tp = s.spec.tp[size_t(p.tp)];
  row.ttft_ms = r.ttft_s * 1e3;
  row.tpot_ms = r.tpot_s * 1e3;
  row.e2e_ms = r.e2e_s * 1e3;
  row.prefill_ms = r.prefill.time_s * 1e3;
  row.decode_ms = r.decode.time_s * 1e3;
  row.tokens_per_s = r.tokens_per_s;
  row.decode_tokens_per_s = r.decode_tokens_per_s;
  row.prefill_tokens_per_s = r.prefill_tokens_per_s;
  row.prefill_bound = bound_name(r.prefill.bound);
  row.decode_bound = r.decode.steps ? bound_name(r.decode.bound) : "";  // gen <= 1: no decode step runs
  row.weights_gb = r.mem.weights / 1e9;
  row.kv_gb = r.mem.kv / 1e9;
  row.activations_gb = r.mem.activations / 1e9;
  row.memory_gb = r.mem.total / 1e9;
  row.capacity_gb = r.mem.capacity / 1e9;
  row.fits = r.mem.fits;
  row.max_batch = r.mem.max_batch;
  row.devices = row.tp;
  row.cost_per_mtok = t.price_per_hour > 0 && r.tokens_per_s > 0
                          ? double(row.devices) * t.price_per_hour / 3600.0 / r.tokens_per_s * 1e6
                          : 0.0;
}

// Applies the constraints; returns the mask of violated ones (bit 0: fits).
uint32_t apply_constraints(const SweepSpec& spec, SweepRow& row) {
  uint32_t mask = 0;
  row.violates.clear();
  if (spec.fits && !row.fits) {
    mask |= 1;
    row.violates = "fits";
  }
  for (size_t i = 0; i < spec.constraints.size(); ++i) {
    const Constraint& c = spec.constraints[i];
    double v = row.metric(c.metric);
    bool ok = metric_lower_is_better(c.metric) ? v <= c.bound : v >= c.bound;
    if (ok) continue;
    mask |= 1u << (i + 1);
    row.violates += (row.violates.empty() ? "" : ";") + std::string(metric_name(c.metric));
  }
  row.feasible = mask == 0;
  return mask;
}

// What one worker accumulates over its blocks.
struct Tally {
  int64_t evaluated = 0, feasible = 0;
  std::map<std::string, int64_t> skipped;
  std::vector<int64_t> violations;
  std::vector<SweepRow> front;
  std::vector<std::optional<SweepRow>> best;
};

bool better(const SweepRow& a, const SweepRow& b, const Objective& o) {
  double x = a.metric(o.metric), y = b.metric(o.metric);
  if (x != y) return o.minimize ? x < y : x > y;
  return a.point < b.point;
}

void add_feasible(Tally& t, const SweepRow& row, const std::vector<Objective>& objectives) {
  for (size_t i = 0; i < objectives.size(); ++i)
    if (!t.best[i] || better(row, *t.best[i], objectives[i])) t.best[i] = row;
  for (const SweepRow& f : t.front)
    if (dominates(f, row, objectives)) return;
  std::erase_if(t.front, [&](const SweepRow& f) { return dominates(row, f, objectives); });
  t.front.push_back(row);
}

std::vector<std::pair<std::string, int64_t>> violation_list(const SweepSpec& spec,
                                                            const std::vector<int64_t>& counts) {
  std::vector<std::pair<std::string, int64_t>> out;
  if (spec.fits) out.push_back({"fits in memory", counts[0]});
  for (size_t i = 0; i < spec.constraints.size(); ++i)
    out.push_back({spec.constraints[i].text(), counts[i + 1]});
  return out;
}

}  // namespace

SweepSummary run_sweep(const SweepSpace& s, const SweepOptions& o) {
  LATHE_ASSERT(o.shards >= 1 && o.shard >= 0 && o.shard < o.shards, "bad shard");
  SweepSummary sum;
  Selection sel = select_points(s, o);
  const uint64_t count = sel.count();
  sum.selected = int64_t(count);
  int threads = o.threads > 0 ? o.threads : available_cpus();

  // ---- 1. the plan shapes the selected points need ----
  auto t_lower = Clock::now();
  std::unordered_map<ShapeKey, int, ShapeKeyHash> shape_index;
  std::vector<std::unique_ptr<PlanShape>> shapes;
  const Workload reference{s.spec.batch[0], s.spec.prompt[0], s.spec.gen[0]};
  for (uint64_t i = 0; i < count; ++i) {
    PointAxes p = point_axes(s, sel.at(i));
    if (!point_problem(s, p).empty()) continue;
    ShapeKey k = shape_key(s, p);
    if (shape_index.count(k)) continue;
    shape_index.emplace(k, int(shapes.size()));
    auto sh = std::make_unique<PlanShape>();
    sh->key = k;
    sh->lower_target = p.target;
    sh->reference = reference;
    sh->weights_name = weights_name(s.spec.weights[size_t(p.weights)], s.models[size_t(p.model)]);
    shapes.push_back(std::move(sh));
  }
  {
    // Shapes that differ only in weight format, KV dtype or layout share their graphs up
    // to the end of the structural passes (the fusions, which read neither formats nor
    // target): those are built and fused once per (model, tp, activations, fusion set)
    // -- a "front" -- and each shape finishes a copy with the format and memory passes.
    struct Front {
      int shape = -1;  // the shape whose options build it
      size_t passes = 0;
      std::string error;
      std::unique_ptr<Lowered> lowered;
    };
    auto shape_options = [&](const PlanShape& sh) {
      PointAxes p;
      p.model = sh.key.model;
      p.target = sh.lower_target;
      p.weights = sh.key.weights;
      p.kv = sh.key.kv;
      p.kv_layout = sh.key.kv_layout;
      p.fusion = sh.key.fusion;
      p.tp = sh.key.tp;
      PlanOptions opts = plan_options(s, p);
      opts.act_dtype = sh.key.act;
      return opts;
    };
    const std::vector<std::string> structural = fusion_pass_names();
    std::vector<Front> fronts;
    std::vector<int> front_of(shapes.size(), -1);
    std::vector<size_t> used_fronts;  // fronts shared by two shapes or more
    {
      std::map<std::string, int> index;
      std::vector<int> members;
      for (size_t i = 0; i < shapes.size(); ++i) {
        const PlanShape& sh = *shapes[i];
        std::vector<std::string> pipeline = pipeline_for(shape_options(sh));
        size_t n = 0;
        while (n < pipeline.size() && std::find(structural.begin(), structural.end(), pipeline[n]) != structural.end())
          ++n;
        if (n == 0) continue;
        std::string key = std::to_string(sh.key.model) + "/" + std::to_string(sh.key.tp) + "/" +
                          std::to_string(int(sh.key.act)) + "/" + std::to_string(sh.key.fusion);
        for (size_t k = 0; k < n; ++k) key += "/" + pipeline[k];
        auto [it, fresh] = index.emplace(key, int(fronts.size()));
        if (fresh) {
          fronts.push_back(Front{int(i), n, "", nullptr});
          members.push_back(0);
        }
        front_of[i] = it->second;
        ++members[size_t(it->second)];
      }
      for (int& f : front_of)  // a front of one shape saves nothing
        if (f >= 0 && members[size_t(f)] < 2) f = -1;
      for (size_t f = 0; f < fronts.size(); ++f)
        if (members[f] >= 2) used_fronts.push_back(f);
    }
    LowerHooks hooks;
    hooks.record = false;
    hooks.verify_each_pass = false;
    auto built = [&](const PlanShape& sh, const PlanOptions& opts, Phase phase) {
      const ModelSpec& m = s.models[size_t(sh.key.model)];
      return build_graph(m, build_options(m, s.targets[size_t(sh.lower_target)], opts, sh.reference, phase));
    };
    auto parallel = [&](size_t n, const std::function<void(size_t)>& f) {
      std::atomic<size_t> next{0};
      auto work = [&] {
        for (size_t i = next++; i < n; i = next++) f(i);
      };
      std::vector<std::thread> pool;
      start_threads(pool, std::min<int>(threads, int(n)) - 1, [&](int) { work(); });  // as many as start
      work();
      for (std::thread& th : pool) th.join();
    };
    parallel(used_fronts.size(), [&](size_t i) {
      Front& fr = fronts[used_fronts[i]];
      const PlanShape& sh = *shapes[size_t(fr.shape)];
      PlanOptions opts = shape_options(sh);
      try {
        fr.lowered = std::make_unique<Lowered>(lower_passes(built(sh, opts, Phase::prefill), built(sh, opts, Phase::decode),
                                                            opts, s.targets[size_t(sh.lower_target)], sh.reference,
                                                            hooks, 0, fr.passes));
      } catch (const Error& e) {
        fr.error = e.what();
      }
    });
    parallel(shapes.size(), [&](size_t i) {
      PlanShape& sh = *shapes[i];
      PlanOptions opts = shape_options(sh);
      const Target& t = s.targets[size_t(sh.lower_target)];
      try {
        if (front_of[i] >= 0) {
          const Front& fr = fronts[size_t(front_of[i])];
          if (!fr.error.empty()) throw Error(fr.error);
          sh.lowered = std::make_unique<Lowered>(
              lower_passes(fr.lowered->prefill, fr.lowered->decode, opts, t, sh.reference, hooks, fr.passes, SIZE_MAX));
        } else {
          sh.lowered = std::make_unique<Lowered>(
              lower(built(sh, opts, Phase::prefill), built(sh, opts, Phase::decode), opts, t, sh.reference, hooks));
        }
        sh.prepared = std::make_unique<PreparedPlan>(sh.lowered->prefill, sh.lowered->decode);
        sh.kv_layout = sh.lowered->decode.attrs.s("kv_layout");
      } catch (const Error& e) {
        sh.error = e.what();
      }
    });
  }
  sum.shapes = int(shapes.size());
  sum.lower_s = seconds_since(t_lower);
  if (o.lowered) o.lowered(sum.shapes, sum.lower_s);

  // ---- 2. cost the points on worker threads, write blocks in order ----
  auto t_cost = Clock::now();
  const int64_t block = std::max<int64_t>(1, o.block);
  const int64_t blocks = int64_t((count + uint64_t(block) - 1) / uint64_t(block));
  const size_t n_cons = s.spec.constraints.size() + 1;
  std::vector<std::string> out(static_cast<size_t>(blocks));
  std::vector<char> ready(size_t(blocks), 0);
  std::vector<std::vector<SweepRow>> kept(o.keep_rows ? size_t(blocks) : 0);
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int64_t> next_block{0}, done_points{0};
  std::vector<Tally> tallies(static_cast<size_t>(threads));
  std::atomic<bool> failed{false};
  std::string failure;

  SimOptions so;
  so.per_op = false;
  so.ideal = s.spec.ideal;
  // Costs block b into out[b] (and the worker's tally), then marks it ready.
  // Block texts go back to `spare` once written, so their memory is reused instead of
  // being freed and faulted in again for every block.
  std::vector<std::string> spare;
  auto cost_block = [&](Tally& tally, SweepRow& row, SimReuse& reuse, int64_t b) {
    std::string text;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!spare.empty()) {
        text = std::move(spare.back());
        spare.pop_back();
      }
    }
    text.clear();
    uint64_t lo = uint64_t(b * block), hi = std::min<uint64_t>(count, lo + uint64_t(block));
    if (o.sink) text.reserve(size_t(hi - lo) * 400);  // about 330 bytes a CSV row
    for (uint64_t i = lo; i < hi; ++i) {
      uint64_t point = sel.at(i);
      PointAxes p = point_axes(s, point);
      std::string why = point_problem(s, p);
      const PlanShape* sh = nullptr;
      if (why.empty()) {
        sh = shapes[size_t(shape_index.at(shape_key(s, p)))].get();
        if (!sh->error.empty()) why = sh->error;
      }
      if (!why.empty()) {
        ++tally.skipped[why];
        continue;
      }
      Workload wl{s.spec.batch[size_t(p.batch)], s.spec.prompt[size_t(p.prompt)],
                  s.spec.gen[size_t(p.gen)]};
      SimResult r = sh->prepared->simulate(s.targets[size_t(p.target)], wl, so, &reuse);
      fill_row(row, s, point, p, *sh, r);
      uint32_t mask = apply_constraints(s.spec, row);
      ++tally.evaluated;
      for (size_t c = 0; c < n_cons; ++c)
        if (mask & (1u << c)) ++tally.violations[c];
      if (row.feasible) {
        ++tally.feasible;
        add_feasible(tally, row, s.spec.objectives);
      }
      if (o.sink) append_row(text, row, o.format);
      if (o.keep_rows) kept[size_t(b)].push_back(row);
    }
    done_points += int64_t(hi - lo);
    {
      std::lock_guard<std::mutex> lock(mu);
      out[size_t(b)] = std::move(text);
      ready[size_t(b)] = 1;
    }
    cv.notify_one();
  };
  auto start_tally = [&](Tally& tally) {
    tally.violations.assign(n_cons, 0);
    tally.best.assign(s.spec.objectives.size(), std::nullopt);
  };
  auto worker = [&](int w) {
    Tally& tally = tallies[size_t(w)];
    start_tally(tally);
    SweepRow row;  // reused: its strings keep their capacity
    SimReuse reuse;
    try {
      for (int64_t b = next_block++; b < blocks && !failed; b = next_block++)
        cost_block(tally, row, reuse, b);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      if (!failed) failure = e.what();
      failed = true;
      cv.notify_one();
    }
  };

  if (o.sink) o.sink(row_header(o.format));
  int64_t written = 0;
  auto last_progress = Clock::now();
  // Hands the blocks that are ready to the sink, in order, from the calling thread.
  auto write_ready = [&](bool wait) {
    std::vector<std::string> chunks;  // moved out of `out`, not copied
    {
      std::unique_lock<std::mutex> lock(mu);
      if (wait)
        cv.wait_for(lock, std::chrono::milliseconds(100),
                    [&] { return failed || ready[size_t(written)]; });
      while (written < blocks && ready[size_t(written)]) {
        chunks.push_back(std::move(out[size_t(written)]));
        ++written;
      }
    }
    if (o.sink)
      for (const std::string& chunk : chunks)
        if (!chunk.empty()) o.sink(chunk);
    {
      std::lock_guard<std::mutex> lock(mu);
      for (std::string& chunk : chunks)
        if (chunk.capacity() > 0 && spare.size() < size_t(2 * threads + 2)) spare.push_back(std::move(chunk));
    }
    if (o.progress && seconds_since(last_progress) > 0.1) {
      o.progress(done_points.load(), int64_t(count));
      last_progress = Clock::now();
    }
  };
  std::vector<std::thread> pool;
  if (threads == 1) {
    // One thread: the calling thread costs each block and writes it (no pool, no
    // hand-off between threads per block).
    Tally& tally = tallies[0];
    start_tally(tally);
    SweepRow row;
    SimReuse reuse;
    for (int64_t b = 0; b < blocks; ++b) {
      try {
        cost_block(tally, row, reuse, b);
      } catch (const std::exception& e) {
        throw Error("sweep failed: " + std::string(e.what()));
      }
      write_ready(false);
    }
  } else {
    // As many workers as start (the others' tallies stay unstarted); none: an error.
    if (start_threads(pool, threads, worker) == 0)
      throw Error("sweep: could not start a worker thread (give fewer --threads)");
    while (written < blocks && !failed) write_ready(true);
  }
  for (std::thread& th : pool) th.join();
  if (failed) throw Error("sweep failed: " + failure);
  if (o.progress) o.progress(int64_t(count), int64_t(count));
  sum.cost_s = seconds_since(t_cost);

  // ---- 3. merge the workers' tallies ----
  std::vector<int64_t> violations(n_cons, 0);
  std::vector<SweepRow> candidates;
  sum.best.assign(s.spec.objectives.size(), std::nullopt);
  for (Tally& t : tallies) {
    if (t.violations.empty()) continue;  // a worker that never started
    sum.evaluated += t.evaluated;
    sum.feasible += t.feasible;
    for (auto& [k, v] : t.skipped) sum.skipped[k] += v;
    for (size_t c = 0; c < n_cons; ++c) violations[c] += t.violations[c];
    for (SweepRow& r : t.front) candidates.push_back(std::move(r));
    for (size_t i = 0; i < t.best.size(); ++i)
      if (t.best[i] && (!sum.best[i] || better(*t.best[i], *sum.best[i], s.spec.objectives[i])))
        sum.best[i] = t.best[i];
  }
  sum.violations = violation_list(s.spec, violations);
  sum.front = pareto_front(candidates, s.spec.objectives);
  for (auto& k : kept)
    for (SweepRow& r : k) sum.rows.push_back(std::move(r));
  return sum;
}

SweepSummary summarize_rows(const SweepSpec& spec, const std::vector<SweepRow>& rows) {
  SweepSummary sum;
  sum.selected = int64_t(rows.size());
  sum.evaluated = int64_t(rows.size());
  std::vector<int64_t> violations(spec.constraints.size() + 1, 0);
  std::vector<SweepRow> feasible;
  sum.best.assign(spec.objectives.size(), std::nullopt);
  for (const SweepRow& row : rows) {
    // The rows' own verdict: the sweep applied the constraints to exact values, and the
    // rows hold 7 significant digits, so applying them again could flip a row at its
    // bound (a sweep with no feasible plan merged into one with a feasible plan).
    uint32_t mask = 0;  // bit 0: fits; bit i + 1: constraint i (as apply_constraints)
    std::string_view rest = row.violates;
    while (!rest.empty()) {
      const size_t end = std::min(rest.find(';'), rest.size());
      const std::string_view name = rest.substr(0, end);
      rest.remove_prefix(std::min(end + 1, rest.size()));
      if (name == "fits") mask |= 1;
      for (size_t i = 0; i < spec.constraints.size(); ++i)
        if (name == metric_name(spec.constraints[i].metric)) mask |= 1u << (i + 1);
    }
    for (size_t c = 0; c < violations.size(); ++c)
      if (mask & (1u << c)) ++violations[c];
    if (!row.feasible) continue;
    ++sum.feasible;
    for (size_t i = 0; i < spec.objectives.size(); ++i)
      if (!sum.best[i] || better(row, *sum.best[i], spec.objectives[i])) sum.best[i] = row;
    feasible.push_back(row);
  }
  sum.violations = violation_list(spec, violations);
  sum.front = pareto_front(feasible, spec.objectives);
  return sum;
}

PointPlan point_plan(const SweepSpace& s, uint64_t point) {
  LATHE_ASSERT(point < s.size, "point out of range");
  PointAxes p = point_axes(s, point);
  PointPlan pp;
  pp.model = s.spec.models[size_t(p.model)];
  pp.hardware = s.target_specs[size_t(p.target)];
  pp.workload = {s.spec.batch[size_t(p.batch)], s.spec.prompt[size_t(p.prompt)],
                 s.spec.gen[size_t(p.gen)]};
  pp.options = plan_options(s, p);
  return pp;
}

SimResult simulate_point(const SweepSpace& s, uint64_t point) {
  PointPlan pp = point_plan(s, point);
  PointAxes p = point_axes(s, point);
  const ModelSpec& m = s.models[size_t(p.model)];
  const Target& t = s.targets[size_t(p.target)];
  LowerHooks h;
  h.record = false;
  h.verify_each_pass = false;
  Lowered l = lower(build_graph(m, build_options(m, t, pp.options, pp.workload, Phase::prefill)),
                    build_graph(m, build_options(m, t, pp.options, pp.workload, Phase::decode)), pp.options, t,
                    pp.workload, h);
  SimOptions so;
  so.per_op = false;
  return simulate(l.prefill, l.decode, t, pp.workload, so);
}

}  // namespace lathe
