#include "sweep/advise.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>

#include "frontend/specs.h"
#include "ir/assert.h"

namespace lathe {

namespace {

std::string num(double v, int prec = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

double per_device(const SweepRow& r) {
  return r.tokens_per_s / double(std::max<int64_t>(1, r.devices));
}

std::string config_key(const SweepRow& r) {
  return r.weights + "|" + r.kv + "|" + r.kv_layout + "|" + std::to_string(r.tp);
}

// The best feasible row of each configuration and its largest feasible batch.
struct Config {
  SweepRow best;          // most tokens/s per device
  int64_t max_batch = 0;  // largest feasible batch on the grid
  SweepRow at_max;
  // The smallest batch whose compiled plan settle() found not to fit (INT64_MAX: none);
  // a row at or above it fits only by the sweep's estimate of the activations.
  int64_t compiled_too_big = INT64_MAX;
};

std::map<std::string, Config> score(const std::vector<SweepRow>& rows) {
  std::map<std::string, Config> out;
  for (const SweepRow& r : rows) {
    if (!r.feasible) continue;
    auto [it, fresh] = out.try_emplace(config_key(r));
    Config& c = it->second;
    if (fresh || per_device(r) > per_device(c.best)) c.best = r;
    if (fresh || r.batch > c.max_batch) {
      c.max_batch = r.batch;
      c.at_max = r;
    }
  }
  return out;
}

// The rows' activation memory is the peak of live values (an ideal planner); the plan
// lathe compiles has its memory planner's arena, which is larger (up to 1.20x the rows'
// figure in a review's 3,000 rows, mixtral-8x22b at tp 4). A configuration's best row
// and its largest batch near the memory limit are held to their compiled plans: where
// one does not fit, the row at a smaller batch whose plan fits takes its place (the
// winner was scored at a batch it could not run, and runner-ups cited grid batches that
// did not fit). Rows with room for half their activations again are taken as they are.
// Returns how many configurations no compiled plan fits (dropped); `plans` counts the
// plans simulated here.
int settle(std::map<std::string, Config>& configs, const std::vector<SweepRow>& rows, const SweepSpec& spec,
           int64_t& plans) {
  std::map<std::string, std::vector<const SweepRow*>> by_config;
  for (const SweepRow& r : rows)
    if (r.feasible) by_config[config_key(r)].push_back(&r);
  std::optional<SweepSpace> space;
  int dropped = 0;
  for (auto it = configs.begin(); it != configs.end();) {
    std::vector<const SweepRow*>& cand = by_config[it->first];
    int64_t too_big = INT64_MAX;  // the smallest batch whose compiled plan does not fit
    // The first row of `order` (best first) whose plan fits, below too_big.
    auto first_fitting = [&](auto order) -> const SweepRow* {
      std::stable_sort(cand.begin(), cand.end(), order);
      for (const SweepRow* r : cand) {
        if (r->batch >= too_big) continue;
        if (r->memory_gb + 0.5 * r->activations_gb <= r->capacity_gb) return r;
        if (!space) space = expand_sweep(spec);
        ++plans;
        if (simulate_point(*space, r->point).mem.fits) return r;
        too_big = r->batch;
      }
      return nullptr;
    };
    const SweepRow* at_max =
        first_fitting([](const SweepRow* x, const SweepRow* y) { return x->batch > y->batch; });
    const SweepRow* best =
        first_fitting([](const SweepRow* x, const SweepRow* y) { return per_device(*x) > per_device(*y); });
    if (!best || !at_max) {
      it = configs.erase(it);
      ++dropped;
      continue;
    }
    it->second.best = *best;
    it->second.at_max = *at_max;
    it->second.max_batch = at_max->batch;
    it->second.compiled_too_big = too_big;
    ++it;
  }
  return dropped;
}

SweepSpec base_spec(const AdviseRequest& a, const Target& t, const ModelSpec& m) {
  SweepSpec s;
  s.name = "advise";
  s.source = "lathe advise";
  s.models = {a.model};
  s.hardware = {a.hardware};
  s.prompt = {a.prompt};
  s.gen = {a.gen};
  if (a.max_batch < 1) throw Error("advise: max batch must be at least 1");
  s.batch.clear();
  for (int64_t b = 1; b <= a.max_batch; b *= 2) {
    s.batch.push_back(b);
    if (b >= 2 && b * 3 / 2 <= a.max_batch) s.batch.push_back(b * 3 / 2);
  }
  std::sort(s.batch.begin(), s.batch.end());
  if (s.batch.back() != a.max_batch) s.batch.push_back(a.max_batch);  // the grid ends at the limit
  s.weights = {std::nullopt, parse_weight_format("int8"), parse_weight_format("int4:g128")};
  s.kv = {std::nullopt, DType::int8, DType::int4};
  if (t.supports(DType::fp8_e4m3)) {
    s.weights.push_back(parse_weight_format("fp8"));
    s.kv.push_back(DType::fp8_e4m3);
  }
  (void)m;
  // TP only where devices can talk (a Jetson has no link: every tp > 1 point skipped).
  s.tp = t.is_gpu() && t.link_bytes_per_s() > 0 ? std::vector<int64_t>{1, 2, 4, 8} : std::vector<int64_t>{1};
  s.fits = true;
  if (a.slo_ttft_ms) s.constraints.push_back({SweepMetric::ttft_ms, *a.slo_ttft_ms});
  if (a.slo_tpot_ms) s.constraints.push_back({SweepMetric::tpot_ms, *a.slo_tpot_ms});
  s.objectives = {Objective{SweepMetric::tokens_per_s, false}};
  s.text = "advise " + a.model + " " + a.hardware + " " + std::to_string(a.prompt) + " " +
           std::to_string(a.gen);
  return s;
}

SweepSummary run_all(const SweepSpec& s, int threads, Advice& advice) {
  SweepSpace space = expand_sweep(s);
  SweepOptions o;
  o.threads = threads;
  o.keep_rows = true;
  SweepSummary sum = run_sweep(space, o);
  advice.plans += sum.evaluated;
  advice.shapes += sum.shapes;
  return sum;
}

std::string what_stops(const SweepRow& next) {
  std::string v = next.violates;
  std::string out;
  size_t start = 0;
  while (start <= v.size()) {
    size_t semi = v.find(';', start);
    if (semi == std::string::npos) semi = v.size();
    std::string c = v.substr(start, semi - start);
    start = semi + 1;
    if (c.empty()) continue;
    std::string text = c == "fits" ? "memory (" + num(next.memory_gb, 2) + " of " +
                                         num(next.capacity_gb, 2) + " GB)"
                       : c == "tpot_ms" ? "the TPOT SLO (" + num(next.tpot_ms, 2) + " ms)"
                       : c == "ttft_ms" ? "the TTFT SLO (" + num(next.ttft_ms, 1) + " ms)"
                                        : c;
    out += (out.empty() ? "" : " and ") + text;
  }
  return out;
}

// Describes a configuration's score.
std::string figure(const Config& c) {
  return num(per_device(c.best), 0) + " tok/s per device at batch " + std::to_string(c.best.batch);
}

}  // namespace

Advice advise(const AdviseRequest& a) {
  auto t0 = std::chrono::steady_clock::now();
  Advice advice;
  ModelSpec m = load_model(a.model);
  Target t = load_target_spec(a.hardware);

  // ---- 1-2. formats x TP x batch, the layout left to the kv-layout pass ----
  SweepSpec spec = base_spec(a, t, m);
  SweepSummary sum = run_all(spec, a.threads, advice);
  std::map<std::string, Config> configs = score(sum.rows);
  const int dropped = settle(configs, sum.rows, spec, advice.plans);
  if (configs.empty()) {
    std::string msg = "no plan of " + m.name + " on " + t.name +
                      " meets the constraints at prompt " + std::to_string(a.prompt) + ", gen " +
                      std::to_string(a.gen);
    if (dropped > 0)
      msg += " (" + std::to_string(dropped) + " configuration(s) fit by the sweep's estimate of the activations, "
             "but not as compiled: the memory planner's arena is larger)";
    double best_tpot = 1e300, best_ttft = 1e300, least_mem = 1e300;
    for (const SweepRow& r : sum.rows) {
      best_tpot = std::min(best_tpot, r.tpot_ms);
      best_ttft = std::min(best_ttft, r.ttft_ms);
      least_mem = std::min(least_mem, r.memory_gb);
    }
    if (!sum.rows.empty())
      msg += ": the fastest plans reach TPOT " + num(best_tpot, 2) + " ms and TTFT " +
             num(best_ttft, 1) + " ms, the smallest needs " + num(least_mem, 1) + " GB (of " +
             num(t.capacity_bytes() / 1e9, 0) + ")";
    // Every reason, most points first (the first alone hid a prompt past max_context
    // behind "tp 2 needs a link").
    std::vector<std::pair<int64_t, std::string>> why;
    for (const auto& [reason, points] : sum.skipped) why.emplace_back(points, reason);
    std::stable_sort(why.begin(), why.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t i = 0; i < why.size(); ++i)
      msg += (i ? "; " : "; skipped: ") + why[i].second + " (" + std::to_string(why[i].first) + " plans)";
    throw Error(msg);
  }
  std::vector<const Config*> ranked;
  for (const auto& [k, c] : configs) ranked.push_back(&c);
  std::stable_sort(ranked.begin(), ranked.end(), [](const Config* x, const Config* y) {
    return per_device(x->best) > per_device(y->best);
  });
  const Config& win = *ranked[0];

  // ---- 4a. the KV layout for the winner ----
  SweepSpec layouts = spec;
  layouts.weights = {win.best.weights == std::string(dtype_name(m.dtype))
                         ? std::nullopt
                         : parse_weight_format(win.best.weights)};
  layouts.kv = {parse_kv_dtype(win.best.kv)};
  layouts.tp = {win.best.tp};
  layouts.kv_layout = {KvLayout{KvLayoutKind::LHTD, 16}, KvLayout{KvLayoutKind::paged, 16},
                       KvLayout{KvLayoutKind::LTHD, 16}, KvLayout{KvLayoutKind::TLHD, 16}};
  SweepSummary lay = run_all(layouts, a.threads, advice);
  std::map<std::string, Config> lay_configs = score(lay.rows);
  settle(lay_configs, lay.rows, layouts, advice.plans);
  std::vector<const Config*> lay_ranked;
  for (const auto& [k, c] : lay_configs) lay_ranked.push_back(&c);
  std::stable_sort(lay_ranked.begin(), lay_ranked.end(), [](const Config* x, const Config* y) {
    return per_device(x->best) > per_device(y->best);
  });

  // ---- 4b. the exact max batch of the winner (with the best layout) ----
  const Config& chosen = lay_ranked.empty() ? win : *lay_ranked[0];
  SweepSpec fine = layouts;
  fine.kv_layout = {parse_kv_layout(chosen.best.kv_layout)};
  int64_t lo = chosen.max_batch;
  auto next_grid = std::upper_bound(spec.batch.begin(), spec.batch.end(), lo);
  int64_t hi = next_grid == spec.batch.end() ? lo : *next_grid;  // never past --max-batch
  fine.batch.clear();
  for (int64_t b = lo; b <= hi; ++b) fine.batch.push_back(b);
  SweepSummary fs = run_all(fine, a.threads, advice);
  SweepRow at_max = chosen.at_max;
  std::optional<SweepRow> first_bad;
  for (const SweepRow& r : fs.rows) {
    if (r.feasible && r.batch >= at_max.batch) at_max = r;
    if (!r.feasible && (!first_bad || r.batch < first_bad->batch)) first_bad = r;
  }
  // ---- 4c. the batch must fit the plan lathe compiles ----
  // The rows' activation memory is the peak of live values (an ideal planner); the
  // compiled plan has its memory planner's arena, up to ~20% more, which `lathe
  // simulate` and `compile` check. Step down to the largest batch whose own plan fits.
  struct Probe {
    SweepRow row;           // the sweep's figures at this batch
    MemoryFootprint mem;    // its compiled plan's memory
    bool ok() const { return row.feasible && mem.fits; }
  };
  auto probe_at = [&](int64_t b) {
    SweepSpec one = fine;
    one.batch = {b};
    SweepSpace sp = expand_sweep(one);
    SweepOptions o;
    o.threads = 1;
    o.keep_rows = true;
    SweepSummary s1 = run_sweep(sp, o);
    advice.plans += s1.evaluated;
    LATHE_ASSERT(s1.rows.size() == 1, "advise: one configuration at one batch");
    return Probe{s1.rows[0], simulate_point(sp, s1.rows[0].point).mem};
  };
  std::string exact_limit;
  Probe top = probe_at(at_max.batch);
  if (!top.ok()) {
    // Bisect between the largest batch known to fit (0: none yet) and the smallest
    // known not to; the gap is at most ~20%, so 85% is tried first.
    int64_t good_batch = 0;
    Probe good, bad = top;
    int64_t b = std::max<int64_t>(1, bad.row.batch * 85 / 100);
    while (b > good_batch && b < bad.row.batch) {
      Probe p = probe_at(b);
      if (p.ok()) {
        good = p;
        good_batch = b;
      } else {
        bad = p;
      }
      b = good_batch + (bad.row.batch - good_batch) / 2;
    }
    if (good_batch == 0)
      throw Error("advise: even batch 1 of the recommended configuration does not fit its compiled plan");
    exact_limit = bad.mem.fits ? what_stops(bad.row)  // an SLO
                               : "memory (its compiled plan needs " + num(bad.mem.total / 1e9, 2) + " of " +
                                     num(bad.mem.capacity / 1e9, 2) + " GB)";
    top = good;
  }
  at_max = top.row;
  at_max.activations_gb = top.mem.activations / 1e9;
  at_max.memory_gb = top.mem.total / 1e9;
  advice.plan = at_max;
  advice.best_row = chosen.best;

  // ---- 3. recommendations and runners-up ----
  auto runner = [&](auto differs) -> const Config* {
    for (const Config* c : ranked)
      if (differs(c->best)) return c;
    return nullptr;
  };
  auto ratio = [&](const Config& a1, const Config* b1) {
    if (!b1) return std::string("");
    double r = per_device(a1.best) / std::max(1e-12, per_device(b1->best));
    return "; " + num(r, 2) + "x the runner-up (" + figure(*b1) + ")";
  };
  const SweepRow& w = win.best;
  std::string limit = !exact_limit.empty() ? exact_limit
                     : first_bad
                          ? what_stops(*first_bad)
                          : (next_grid == spec.batch.end()
                                 ? "the batch grid (it ends at " + std::to_string(a.max_batch) + ")"
                                 : "nothing found");
  {
    Recommendation r;
    r.parameter = "max batch";
    r.value = std::to_string(at_max.batch);
    r.reason = "the largest batch that fits" +
               std::string(a.slo_ttft_ms || a.slo_tpot_ms ? " and meets the SLOs" : "") +
               ": TTFT " + num(at_max.ttft_ms, 1) + " ms, " +
               (a.gen < 2 ? std::string("no decode step (gen ") + std::to_string(a.gen) + ")"
                          : "TPOT " + num(at_max.tpot_ms, 2) + " ms") +
               ", " + num(at_max.tokens_per_s, 0) + " tok/s, " + num(at_max.memory_gb, 1) +
               " GB; batch " + std::to_string(at_max.batch + 1) + " is stopped by " + limit;
    // Only when it does: the largest batch is found off the grid and can beat every grid
    // batch (batch 88 at 10016 tok/s against the grid's best, 64 at 9310).
    if (chosen.best.batch < at_max.batch && per_device(chosen.best) > per_device(at_max))
      r.reason +=
          "; throughput per device peaks earlier, at batch " + std::to_string(chosen.best.batch);
    const Config* ru = ranked.size() > 1 ? ranked[1] : nullptr;
    r.runner_up = ru ? std::to_string(ru->max_batch) + " on the batch grid, the runner-up configuration's largest (weights " + ru->best.weights +
                           ", KV " + ru->best.kv + ", tp " + std::to_string(ru->best.tp) + ")"
                     : "-";
    advice.items.push_back(r);
  }
  // `swept`: how many values of the parameter the sweep tried; `note(ru)` the reason's
  // last clause given the runner-up (nullptr when none).
  auto add = [&](const char* parameter, const std::string& value, auto differs, auto show, size_t swept,
                 auto note) {
    Recommendation r;
    r.parameter = parameter;
    r.value = value;
    const Config* ru = runner(differs);
    r.runner_up = ru ? show(ru->best) : "-";
    r.reason = figure(win) + ratio(win, ru);
    if (!ru) r.reason += swept > 1 ? "; no other value meets the constraints" : "; the only value tried";
    std::string n = note(ru);
    if (!n.empty()) r.reason += "; " + n;
    advice.items.push_back(r);
  };
  bool quantized_w = w.weights != std::string(dtype_name(m.dtype));
  add(
      "weights", w.weights, [&](const SweepRow& r) { return r.weights != w.weights; },
      [](const SweepRow& r) { return r.weights; }, spec.weights.size(), [&](const Config*) {
        return quantized_w ? std::string("decode reads fewer weight bytes; accuracy is not modelled: check the "
                                         "quantized model's quality")
                           : std::string();
      });
  add(
      "KV dtype", w.kv, [&](const SweepRow& r) { return r.kv != w.kv; },
      [](const SweepRow& r) { return r.kv; }, spec.kv.size(), [&](const Config* ru) {
        if (w.kv == w.act) return std::string();
        // The batch only when the runner-up's best batch was smaller, and memory only when
        // memory stopped the runner-up there: its row at the winner's batch did not fit
        // (a TPOT SLO stops the larger cache sooner too, by its KV reads, not its size).
        // Without a decode step (gen 1) only the cache's size counts.
        std::string why = a.gen < 2 ? std::string("a smaller cache") : std::string("decode reads fewer KV bytes a step");
        const SweepRow* there = nullptr;  // the runner-up at the winner's batch
        if (ru && ru->best.batch < w.batch)
          for (const SweepRow& r : sum.rows)
            if (r.batch == w.batch && config_key(r) == config_key(ru->best)) there = &r;
        // Memory stopped it too where its compiled plan did not fit there (settle()
        // lowered its batch), though the sweep's row did.
        const bool memory = there && (!there->fits || w.batch >= ru->compiled_too_big);
        if (there && (!there->feasible || memory))
          why = (memory ? "a smaller cache fits a larger batch ("
                              : "fewer KV bytes a step keep a larger batch within the SLOs (") +
                std::to_string(w.batch) + " against " + std::to_string(ru->best.batch) + ")";
        return why + "; accuracy is not modelled";
      });
  {
    Recommendation r;
    r.parameter = "KV layout";
    r.value = chosen.best.kv_layout;
    if (lay_ranked.size() > 1) {
      const Config& ru = *lay_ranked[1];
      r.runner_up = ru.best.kv_layout;
      double gain = per_device(chosen.best) / std::max(1e-12, per_device(ru.best));
      r.reason = figure(chosen) + "; " + num(gain, 3) + "x " + ru.best.kv_layout +
                 (a.gen < 2 ? std::string(" (no decode step reads the cache at gen 1)")
                            : std::string(" (decode attention reads longer contiguous runs of each head's K and V)"));
    } else {
      r.runner_up = "-";
      r.reason = figure(chosen);
    }
    advice.items.push_back(r);
  }
  add(
      "TP degree", std::to_string(w.tp), [&](const SweepRow& r) { return r.tp != w.tp; },
      [](const SweepRow& r) { return std::to_string(r.tp); }, spec.tp.size(), [&](const Config*) {
        return spec.tp.size() > 1
                   ? std::string("scored per device: more devices cut latency but rarely raise throughput per device")
                   : std::string(t.is_gpu() ? "the target has no link between devices" : "a CPU target runs on one device");
      });
  advice.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return advice;
}

}  // namespace lathe
