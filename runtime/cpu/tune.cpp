#include "runtime/cpu/tune.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "ir/assert.h"
#include "runtime/cpu/probe.h"
#include "runtime/cpu/session.h"

namespace lathe {

namespace {

using Clock = std::chrono::steady_clock;

struct Key {
  Phase phase;
  std::string kind, shape;
  bool operator<(const Key& o) const {
    return std::tie(phase, kind, shape) < std::tie(o.phase, o.kind, o.shape);
  }
};

std::vector<std::vector<int32_t>> synthetic_prompts(const Plan& plan) {
  int64_t vocab = plan.decode.attrs.i("vocab");
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t s = 0; s < plan.workload.batch; ++s) {
    std::vector<int32_t> t;
    for (int64_t i = 0; i < plan.workload.prompt; ++i)
      t.push_back(int32_t((i * 7919 + 13 + s * 101) % vocab));
    prompts.push_back(t);
  }
  return prompts;
}

struct StepTimes {
  double prefill = 0, decode = 0;  // seconds: one prefill, mean decode step
};

// One repetition: prefill, then decode steps; per-kernel timings accumulate in the session.
StepTimes run_once(CpuSession& s, const std::vector<std::vector<int32_t>>& prompts, int steps) {
  StepTimes t;
  StepResult r = s.prefill(prompts);
  t.prefill = r.seconds;
  std::vector<int32_t> next(prompts.size(), 1);
  for (int i = 0; i < steps; ++i) {
    if (r.argmax.size() == next.size()) next = r.argmax;
    r = s.decode(next);
    t.decode += r.seconds;
  }
  t.decode /= std::max(1, steps);
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int apply_tuning(Plan& plan, const TuningFile& t) {
  return apply_tuning(plan.prefill, t, "cpu") + apply_tuning(plan.decode, t, "cpu");
}

TuneResult tune_cpu(const Plan& base, const WeightStore& weights, CpuJit& jit,
                    const TuneOptions& o) {
  TuneResult res;
  int threads = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  // Gen steps the sessions may run: the plan's capacity bounds them.
  int steps = int(std::min<int64_t>(o.decode_steps, std::max<int64_t>(0, base.workload.gen - 1)));
  auto prompts = synthetic_prompts(base);

  // ---- 1. keys and their nodes ----
  std::map<Key, std::vector<std::map<std::string, int64_t>>> keys;
  for (const Graph* g : {&base.prefill, &base.decode})
    for (NodeId id : g->topo_order())
      if (auto k = tuning_key(*g, id, "cpu"))
        keys.try_emplace(Key{g->phase, k->kind, k->shape}, tuning_candidates(k->kind));
  size_t rounds = 0;
  for (const auto& [k, c] : keys) rounds = std::max(rounds, c.size());

  // ---- 2. rounds: every key at its r-th candidate ----
  std::map<Key, std::vector<double>> per_call;  // seconds per call of each candidate
  JitStats before = jit.stats();
  for (size_t r = 0; r < rounds; ++r) {
    Plan plan = base;
    for (const auto& [k, cands] : keys) {
      if (r >= cands.size()) continue;
      Graph& g = k.phase == Phase::prefill ? plan.prefill : plan.decode;
      apply_params(g, k.kind, k.shape, cands[r], "cpu");
    }
    SessionOptions so;
    so.threads = threads;
    CpuSession s(plan, weights, jit, so);
    ++res.sessions;
    run_once(s, prompts, steps);  // warm-up: first touches, caches
    std::map<Key, double> best;
    for (int rep = 0; rep < o.reps; ++rep) {
      s.reset_timings();
      run_once(s, prompts, steps);
      std::map<Key, std::pair<double, int64_t>> sum;
      for (const KernelTiming& t : s.timings()) {
        const Graph& g = t.phase == Phase::prefill ? plan.prefill : plan.decode;
        auto k = tuning_key(g, t.node, "cpu");
        if (!k || t.calls == 0) continue;
        auto& e = sum[Key{t.phase, k->kind, k->shape}];
        e.first += t.measured_s;
        e.second += t.calls;
      }
      for (const auto& [k, v] : sum) {
        double x = v.first / double(v.second);
        auto it = best.find(k);
        if (it == best.end() || x < it->second) best[k] = x;
      }
    }
    for (const auto& [k, cands] : keys)
      if (r < cands.size()) per_call[k].push_back(best.count(k) ? best[k] : 0.0);
  }
  const JitStats& after = jit.stats();
  res.kernels_compiled = after.compiled - before.compiled;
  res.compile_s = (after.compile_s - before.compile_s) + (after.load_s - before.load_s);

  // ---- 3. the best candidate per key ----
  res.file.backend = "cpu";
  res.file.machine =
      cpu_model_name() + " (" + jit.host_cpu() + "), " + std::to_string(threads) + " threads";
  res.file.model = base.model;
  res.file.target = base.target.name;
  res.file.batch = base.workload.batch;
  res.file.prompt = base.workload.prompt;
  res.file.gen = base.workload.gen;
  for (const auto& [k, cands] : keys) {
    const std::vector<double>& t = per_call[k];
    TuningEntry e;
    e.kind = k.kind;
    e.shape = k.shape;
    e.default_us = t[0] * 1e6;
    size_t best = 0;
    for (size_t i = 1; i < t.size(); ++i)
      if (t[i] > 0 && t[i] < t[best]) best = i;
    if (best != 0 && t[best] > t[0] * (1.0 - o.margin))
      best = 0;  // within the noise: keep the default
    e.params = cands[best];
    e.best_us = t[best] * 1e6;
    for (size_t i = 0; i < t.size(); ++i) e.candidates.push_back({cands[i], t[i] * 1e6});
    res.all.push_back(e);
    // One entry per (kind, shape): a key tuned in both phases keeps the first winner.
    bool present = false;
    for (const TuningEntry& x : res.file.entries) present |= x.kind == e.kind && x.shape == e.shape;
    if (best != 0 && !present) res.file.entries.push_back(e);
  }

  // ---- 4. default vs tuned, alternating (nothing to compare when no key changed) ----
  if (res.file.entries.empty()) return res;
  Plan tuned = base;
  apply_tuning(tuned, res.file);
  SessionOptions so;
  so.threads = threads;
  so.time_kernels = false;
  CpuSession sd(base, weights, jit, so), st(tuned, weights, jit, so);
  res.sessions += 2;
  run_once(sd, prompts, steps);
  run_once(st, prompts, steps);
  std::vector<double> pd, pt, dd, dt;
  for (int rep = 0; rep < std::max(3, o.reps); ++rep) {
    StepTimes a = run_once(sd, prompts, steps), b = run_once(st, prompts, steps);
    pd.push_back(a.prefill), dd.push_back(a.decode), pt.push_back(b.prefill),
        dt.push_back(b.decode);
  }
  res.prefill_default_s = median(pd);
  res.prefill_tuned_s = median(pt);
  res.decode_default_s = median(dd);
  res.decode_tuned_s = median(dt);
  return res;
}

}  // namespace lathe
