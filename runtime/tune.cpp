#include "runtime/tune.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "ir/host.h"
#include "ir/assert.h"
#include "runtime/cpu/jit.h"
#include "runtime/cpu/probe.h"
#include "runtime/cpu/session.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/cuda/cuda_session.h"

namespace lathe {

namespace {

using Clock = std::chrono::steady_clock;

// A tuning key: the same kernel in prefill and decode (lm_head at small batches, every
// GEMV when batch x prompt fits the GEMV rows) is one key, timed over both phases, so
// one winner is chosen from all of its calls.
struct Key {
  std::string kind, shape;
  bool operator<(const Key& o) const { return std::tie(kind, shape) < std::tie(o.kind, o.shape); }
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
StepTimes run_once(TuneSession& s, const std::vector<std::vector<int32_t>>& prompts, int steps) {
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
  return apply_tuning(plan.prefill, t, t.backend) + apply_tuning(plan.decode, t, t.backend);
}

TuneResult tune_plan(const Plan& base, const TuneBackend& backend, const TuneOptions& o) {
  TuneResult res;
  const std::string& be = backend.name;
  // Gen steps the sessions may run: the plan's capacity bounds them.
  int steps = int(std::min<int64_t>(o.decode_steps, std::max<int64_t>(0, base.workload.gen - 1)));
  auto prompts = synthetic_prompts(base);

  // ---- 1. keys and their nodes ----
  std::map<Key, std::vector<std::map<std::string, int64_t>>> keys;
  for (const Graph* g : {&base.prefill, &base.decode})
    for (NodeId id : g->topo_order())
      if (auto k = tuning_key(*g, id, be))
        keys.try_emplace(Key{k->kind, k->shape}, tuning_candidates(k->kind, be, k->shape));
  size_t rounds = 0;
  for (const auto& [k, c] : keys) rounds = std::max(rounds, c.size());

  // ---- 2. rounds: every key at its r-th candidate ----
  // One session of `plan`: a warm-up repetition, then each key's fastest time per call
  // over `o.reps` repetitions.
  auto time_session = [&](const Plan& plan) {
    std::unique_ptr<TuneSession> s = backend.open(plan, true);
    ++res.sessions;
    run_once(*s, prompts, steps);  // warm-up: first touches, caches
    std::map<Key, double> best;
    for (int rep = 0; rep < o.reps; ++rep) {
      s->reset_timings();
      run_once(*s, prompts, steps);
      std::map<Key, std::pair<double, int64_t>> sum;
      for (const KernelTiming& t : s->timings()) {
        const Graph& g = t.phase == Phase::prefill ? plan.prefill : plan.decode;
        auto k = tuning_key(g, t.node, be);
        if (!k || t.calls == 0) continue;
        auto& e = sum[Key{k->kind, k->shape}];
        e.first += t.measured_s;
        e.second += t.calls;
      }
      for (const auto& [k, v] : sum) {
        double x = v.first / double(v.second);
        auto it = best.find(k);
        if (it == best.end() || x < it->second) best[k] = x;
      }
    }
    return best;
  };
  // The defaults are timed in the first round and again after the last (when there are
  // candidates): each key keeps the faster of the two, so a first round slowed by a
  // cold start or a busy machine does not hand the candidates a win they did not earn.
  const int total = int(rounds) + (rounds > 1 ? 1 : 0) + 2;
  std::map<Key, std::vector<double>> per_call;  // seconds per call of each candidate
  const auto before = backend.compile_stats();
  for (size_t r = 0; r < rounds; ++r) {
    Plan plan = base;
    for (const auto& [k, cands] : keys) {
      if (r >= cands.size()) continue;
      for (Graph* g : {&plan.prefill, &plan.decode}) apply_params(*g, k.kind, k.shape, cands[r], be);
    }
    std::map<Key, double> best = time_session(plan);
    for (const auto& [k, cands] : keys)
      if (r < cands.size()) per_call[k].push_back(best.count(k) ? best[k] : 0.0);
    if (o.progress) o.progress(int(r + 1), total);
  }
  if (rounds > 1) {
    std::map<Key, double> again = time_session(base);
    for (auto& [k, t] : per_call)
      if (again.count(k) && again[k] > 0 && (t[0] <= 0 || again[k] < t[0])) t[0] = again[k];
    if (o.progress) o.progress(int(rounds) + 1, total);
  }
  const auto after = backend.compile_stats();
  res.kernels_compiled = after.first - before.first;
  res.compile_s = after.second - before.second;

  // ---- 3. the best candidate per key ----
  res.file.backend = be;
  res.file.machine = backend.machine;
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
    if (best != 0) res.file.entries.push_back(e);
  }

  // ---- 4. default vs tuned, alternating (nothing to compare when no key changed) ----
  if (res.file.entries.empty()) {
    if (o.progress) o.progress(total, total);
    return res;
  }
  Plan tuned = base;
  apply_tuning(tuned, res.file);
  std::vector<double> pd, pt, dd, dt;
  const int reps = std::max(3, o.reps);
  std::unique_ptr<TuneSession> sd = backend.open(base, false), st;
  res.sessions += 2;
  try {
    st = backend.open(tuned, false);
  } catch (const OutOfDeviceMemory&) {
    // Two copies of the weights do not fit (a large model on one GPU): time the
    // default plan, close it, then open the tuned one again.
    ++res.sessions;
    run_once(*sd, prompts, steps);
    for (int rep = 0; rep < reps; ++rep) {
      StepTimes a = run_once(*sd, prompts, steps);
      pd.push_back(a.prefill), dd.push_back(a.decode);
    }
    sd.reset();
    st = backend.open(tuned, false);
  }
  if (sd) run_once(*sd, prompts, steps);
  run_once(*st, prompts, steps);
  for (int rep = 0; rep < reps; ++rep) {
    if (sd) {
      StepTimes a = run_once(*sd, prompts, steps);
      pd.push_back(a.prefill), dd.push_back(a.decode);
    }
    StepTimes b = run_once(*st, prompts, steps);
    pt.push_back(b.prefill), dt.push_back(b.decode);
  }
  if (o.progress) o.progress(total, total);
  res.prefill_default_s = median(pd);
  res.prefill_tuned_s = median(pt);
  res.decode_default_s = median(dd);
  res.decode_tuned_s = median(dt);
  const double whole_default = res.prefill_default_s + steps * res.decode_default_s;
  const double whole_tuned = res.prefill_tuned_s + steps * res.decode_tuned_s;
  if (whole_tuned > whole_default * (1.0 + o.margin)) {
    res.discarded = std::move(res.file.entries);
    res.file.entries.clear();
  }
  return res;
}

namespace {

template <typename S>
class SessionAdapter final : public TuneSession {
 public:
  explicit SessionAdapter(std::unique_ptr<S> s) : s_(std::move(s)) {}
  StepResult prefill(const std::vector<std::vector<int32_t>>& p) override { return s_->prefill(p); }
  StepResult decode(const std::vector<int32_t>& t) override { return s_->decode(t); }
  const std::vector<KernelTiming>& timings() const override { return s_->timings(); }
  void reset_timings() override { s_->reset_timings(); }

 private:
  std::unique_ptr<S> s_;
};

}  // namespace

TuneResult tune_cpu(const Plan& base, const WeightStore& weights, CpuJit& jit,
                    const TuneOptions& o) {
  const int threads =
      o.threads > 0 ? o.threads : available_cpus();
  TuneBackend b;
  b.name = "cpu";
  b.machine = cpu_model_name() + " (" + jit.host_cpu() + "), " + std::to_string(threads) + " threads";
  b.open = [&](const Plan& plan, bool time_kernels) -> std::unique_ptr<TuneSession> {
    SessionOptions so;
    so.threads = threads;
    so.time_kernels = time_kernels;
    return std::make_unique<SessionAdapter<CpuSession>>(std::make_unique<CpuSession>(plan, weights, jit, so));
  };
  b.compile_stats = [&jit] {
    const JitStats& s = jit.stats();
    return std::pair<int, double>(int(s.compiled), s.compile_s + s.load_s);
  };
  return tune_plan(base, b, o);
}

TuneResult tune_cuda(const Plan& base, const WeightStore& weights, const std::string& cache_dir,
                     const TuneOptions& o) {
  std::string why;
  if (!CudaApi::device_available(&why)) throw Error(why);
  int compiled = 0;
  double compile_s = 0;
  TuneBackend b;
  b.name = "cuda";
  b.open = [&](const Plan& plan, bool time_kernels) -> std::unique_ptr<TuneSession> {
    CudaSessionOptions so;
    so.time_kernels = time_kernels;  // events around each kernel; otherwise decode runs as graphs
    so.nvrtc.cache_dir = cache_dir;
    auto s = std::make_unique<CudaSession>(plan, weights, so);
    compiled += s->kernels_compiled();
    compile_s += s->compile_s();
    return std::make_unique<SessionAdapter<CudaSession>>(std::move(s));
  };
  b.compile_stats = [&] { return std::pair<int, double>(compiled, compile_s); };
  {
    CudaApi api(0);
    b.machine = api.device().name + " (sm_" + std::to_string(api.device().compute_capability) + ")";
  }
  return tune_plan(base, b, o);
}

}  // namespace lathe
