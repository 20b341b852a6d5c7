#include "simulator/rag.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "ir/assert.h"
#include "simulator/random.h"

namespace lathe {

double amdahl_time(double f, double threads) {
  return (1.0 - f) + f / std::max(1.0, threads);
}

namespace {

struct Stages {
  // base: the base prompt's prefill, emitting the first token (timeout's fallback);
  // base_silent: the same without the LM head and sampling (overlapped mode's, whose
  // first token comes after the appended chunk).
  double base = 0, base_silent = 0, appended = 0, full = 0, decode_full = 0, decode_base = 0;
};

Stages stage_times(StepCoster& c, const RagOptions& o) {
  Stages s;
  int64_t b = o.base_tokens, k = o.context_tokens;
  s.base = c.prefill_s(1, b);
  StepShape silent;
  silent.chunks.push_back({b, b, 1});
  silent.emitting = 0;
  // With no context to append the base prefill emits the first token itself.
  s.base_silent = k > 0 ? c.step_s(silent) : s.base;
  s.full = c.prefill_s(1, b + k);
  if (k > 0) {
    StepShape chunk;
    chunk.chunks.push_back({k, b + k, 1});
    s.appended = c.step_s(chunk);
  }
  // Steps i = 1 .. output_tokens - 1 (sampled evenly above 4096 of them).
  const int64_t steps = std::max<int64_t>(0, o.output_tokens - 1);
  s.decode_full = c.decode_sum_s(1, b + k + 1, steps);
  s.decode_base = c.decode_sum_s(1, b + 1, steps);
  return s;
}

struct Draw {
  double retrieval_ref_s;  // at the reference thread count
  double u;                // prefetch: used when u < prefetch_hit
};

std::vector<RagModeResult> run_modes(const Stages& st, const std::vector<Draw>& draws, double scale,
                                     const RagOptions& o) {
  double cpu = (o.preprocess_ms + o.assembly_ms) * 1e-3;
  std::vector<RagModeResult> out;
  for (RagMode m : o.modes) {
    RagModeResult r;
    r.mode = m;
    std::vector<double> ttft;
    int64_t fallback = 0, abandoned = 0, used = 0;
    for (const Draw& d : draws) {
      double retrieval = d.retrieval_ref_s * scale;
      double first = 0, decode = st.decode_full;
      switch (m) {
        case RagMode::sequential:
          first = retrieval + cpu + st.full;
          break;
        case RagMode::overlapped: {
          double ready = retrieval + cpu;  // the CPU side, while the base prefill runs
          if (ready >= st.base_silent) {
            first = ready + st.appended;
          } else {
            double keep = st.base_silent + st.appended, restart = ready + st.full;
            first = std::min(keep, restart);
            if (restart < keep) ++abandoned;
          }
          break;
        }
        case RagMode::prefetch: {
          bool hit = d.u < o.prefetch_hit;
          if (hit) ++used;
          double wait = hit ? std::max(0.0, retrieval - o.prefetch_lead_ms * 1e-3) : retrieval;
          first = wait + cpu + st.full;
          break;
        }
        case RagMode::timeout: {
          double limit = o.timeout_ms * 1e-3;
          if (retrieval > limit) {
            ++fallback;
            first = limit + o.assembly_ms * 1e-3 + st.base;
            decode = st.decode_base;
          } else {
            first = retrieval + cpu + st.full;
          }
          break;
        }
      }
      ttft.push_back(first);
      r.e2e_s.push_back(first + decode);
    }
    double n = double(draws.size());
    r.fallback_share = double(fallback) / n;
    r.abandoned_share = double(abandoned) / n;
    r.prefetch_used_share = double(used) / n;
    r.ttft = percentiles(std::move(ttft));
    r.e2e = percentiles(r.e2e_s);
    out.push_back(std::move(r));
  }
  return out;
}

// The runtime's threads set the model's speed only on a CPU target: its compute peaks
// (every dtype's: int8 GEMMs run at the 8-bit dot-product peak) scale with the cores it
// gets (bandwidth is assumed saturated by fewer cores).
Target runtime_target(const Target& t, int64_t runtime_threads, int64_t cores) {
  Target x = t;
  if (!t.is_gpu()) {
    const double share = std::min(1.0, double(runtime_threads) / double(std::max<int64_t>(1, cores)));
    for (double* peak : {&x.peak_fp32, &x.peak_tf32, &x.peak_fp16, &x.peak_bf16, &x.peak_fp8, &x.peak_int8})
      *peak *= share;
  }
  return x;
}

}  // namespace

RagResult simulate_rag(const Graph& prefill, const Graph& decode, const Target& t,
                       const RagOptions& given, bool ideal) {
  RagOptions o = given;
  if (o.cpu_cores == 0) o.cpu_cores = t.is_gpu() ? 16 : int64_t(t.sm_count);  // unset: the host's
  // On a CPU target the runtime's cores are the target's: another count would split a
  // machine the cost model does not describe (8 runtime threads of a "64-core" cpu-host
  // got an eighth of its 8 cores' peak).
  if (!t.is_gpu() && o.cpu_cores != int64_t(t.sm_count))
    throw Error("rag: cpu_cores " + std::to_string(o.cpu_cores) + " differs from " + t.name + "'s " +
                std::to_string(int64_t(t.sm_count)) + " cores; on a CPU target they are its cores (change them with "
                "--set sm_count=N)");
  if (o.modes.empty()) throw Error("rag: no modes to simulate");
  if (o.cpu_cores < 2)
    throw Error("rag: need at least 2 CPU cores (one for the runtime, one for retrieval)");
  if (o.samples < 1) throw Error("rag: samples must be >= 1");
  RagResult r;
  r.cores = o.cpu_cores;
  r.runtime_threads =
      o.runtime_threads > 0
          ? o.runtime_threads
          : std::clamp<int64_t>(std::llround(0.6 * double(o.cpu_cores)), 1, o.cpu_cores - 1);
  if (r.runtime_threads >= o.cpu_cores)
    throw Error("rag: the runtime's " + std::to_string(r.runtime_threads) +
                " threads leave no thread of the " + std::to_string(o.cpu_cores) +
                " cores for retrieval");
  r.retrieval_threads = o.cpu_cores - r.runtime_threads;
  auto scale_for = [&](int64_t retrieval_threads) {
    return amdahl_time(o.retrieval_parallel_fraction, double(retrieval_threads)) /
           amdahl_time(o.retrieval_parallel_fraction, double(o.retrieval_ref_threads));
  };
  r.retrieval_scale = scale_for(r.retrieval_threads);

  Random rng(o.seed);
  std::vector<Draw> draws(size_t(o.samples));
  for (Draw& d : draws) {
    d.retrieval_ref_s = std::max(0.0, rng.sample(o.retrieval_ms, false)) * 1e-3;
    d.u = rng.uniform();
  }
  CostOptions co;
  co.ideal = ideal;
  auto stages_at = [&](int64_t runtime_threads) {
    StepCoster c(prefill, decode, runtime_target(t, runtime_threads, o.cpu_cores), co);
    return stage_times(c, o);
  };
  Stages st = stages_at(r.runtime_threads);
  r.base_prefill_s = st.base;
  r.appended_prefill_s = st.appended;
  r.full_prefill_s = st.full;
  r.decode_s = st.decode_full;
  r.decode_base_only_s = st.decode_base;
  r.modes = run_modes(st, draws, r.retrieval_scale, o);

  // How the split of the cores between the runtime and retrieval moves the latency.
  std::set<int64_t> counts = {r.runtime_threads};
  for (double share : {0.25, 0.5, 0.6, 0.7, 0.9})
    counts.insert(
        std::clamp<int64_t>(std::llround(share * double(o.cpu_cores)), 1, o.cpu_cores - 1));
  RagOptions two = o;
  two.modes = {RagMode::sequential, RagMode::overlapped};
  for (int64_t n : counts) {
    RagThreadRow row;
    row.runtime_threads = n;
    row.retrieval_threads = o.cpu_cores - n;
    double share = double(n) / double(o.cpu_cores);
    row.advised = share >= 0.5 - 1e-9 && share <= 0.7 + 1e-9;
    double scale = scale_for(row.retrieval_threads);
    std::vector<double> ret;
    for (const Draw& d : draws) ret.push_back(d.retrieval_ref_s * scale);
    row.retrieval_p50_s = percentiles(std::move(ret)).p50;
    std::vector<RagModeResult> m = run_modes(t.is_gpu() ? st : stages_at(n), draws, scale, two);
    row.sequential_e2e_p50_s = m[0].e2e.p50;
    row.overlapped_e2e_p50_s = m[1].e2e.p50;
    r.threads.push_back(row);
  }
  return r;
}

}  // namespace lathe
