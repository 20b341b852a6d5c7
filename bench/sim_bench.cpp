// Simulator speed: one full scenario (Llama-3-70B, prefill 2048 + decode 512, per-op
// rows) on lowered graphs, and the build + lowering that precedes it.
// Run: build/bench/sim_bench (figures go to docs/performance.md).
#include <benchmark/benchmark.h>

#include "frontend/builder.h"
#include "frontend/specs.h"
#include "passes/pipeline.h"
#include "simulator/prepared.h"
#include "simulator/simulate.h"
#include "sweep/sweep.h"

#include <algorithm>
#include <cstdlib>

namespace lathe {
namespace {

struct Scenario {
  ModelSpec model = load_model("llama-3-70b");
  Target target = load_target("h100-sxm");
  Workload w{1, 2048, 512};
  PlanOptions o;
  Lowered lowered;
  Scenario() {
    o.tp = 4;
    LowerHooks h;
    h.record = false;
    lowered = lower(build_graph(model, build_options(model, target, o, w, Phase::prefill)),
                    build_graph(model, build_options(model, target, o, w, Phase::decode)), o, target, w, h);
  }
};

void BM_Simulate70B_PerOp(benchmark::State& state) {
  static Scenario s;
  SimOptions so;
  so.per_op = true;
  for (auto _ : state) benchmark::DoNotOptimize(simulate(s.lowered.prefill, s.lowered.decode, s.target, s.w, so));
  state.SetLabel("llama-3-70b tp4 on h100-sxm, prefill 2048 + decode 512, per-op rows");
}
BENCHMARK(BM_Simulate70B_PerOp)->Unit(benchmark::kMicrosecond);

void BM_Simulate70B_Summary(benchmark::State& state) {
  static Scenario s;
  SimOptions so;
  so.per_op = false;
  for (auto _ : state) benchmark::DoNotOptimize(simulate(s.lowered.prefill, s.lowered.decode, s.target, s.w, so));
}
BENCHMARK(BM_Simulate70B_Summary)->Unit(benchmark::kMicrosecond);

// One sweep point: a prepared Llama-3-8B plan (int4 weights) re-costed at a workload,
// summary only (what `lathe sweep` does per plan, before formatting the row).
void BM_PreparedSimulate8B(benchmark::State& state) {
  ModelSpec m = load_model("llama-3-8b");
  Target t = load_target("a100-80g");
  Workload w{8, 1024, 256};
  PlanOptions o;
  o.weights = parse_weight_format("int4:g128");
  LowerHooks h;
  h.record = false;
  Lowered l = lower(build_graph(m, build_options(m, t, o, w, Phase::prefill)),
                    build_graph(m, build_options(m, t, o, w, Phase::decode)), o, t, w, h);
  PreparedPlan plan(l.prefill, l.decode);
  SimOptions so;
  so.per_op = false;
  for (auto _ : state) benchmark::DoNotOptimize(plan.simulate(t, w, so));
  state.SetLabel("llama-3-8b int4:g128 on a100-80g, batch 8, prompt 1024, gen 256");
}
BENCHMARK(BM_PreparedSimulate8B)->Unit(benchmark::kMicrosecond);

// The same plan over a grid in a sweep's order (32 batches x 14 prompts x 4 gens,
// gen fastest) with a SimReuse, as each `lathe sweep` worker runs it: time per call.
void BM_PreparedSimulate8B_SweepOrder(benchmark::State& state) {
  ModelSpec m = load_model("llama-3-8b");
  Target t = load_target("a100-80g");
  PlanOptions o;
  o.weights = parse_weight_format("int4:g128");
  LowerHooks h;
  h.record = false;
  Workload ref{8, 1024, 256};
  Lowered l = lower(build_graph(m, build_options(m, t, o, ref, Phase::prefill)),
                    build_graph(m, build_options(m, t, o, ref, Phase::decode)), o, t, ref, h);
  PreparedPlan plan(l.prefill, l.decode);
  SimOptions so;
  so.per_op = false;
  SimReuse reuse;
  int64_t i = 0;
  for (auto _ : state) {
    Workload w{1 + (i / 56) % 32, 256 * (1 + (i / 4) % 14), int64_t(64) << (i % 4)};
    benchmark::DoNotOptimize(plan.simulate(t, w, so, &reuse));
    ++i;
  }
  state.SetLabel("llama-3-8b int4:g128 on a100-80g, sweep order, SimReuse");
}
BENCHMARK(BM_PreparedSimulate8B_SweepOrder)->Unit(benchmark::kMicrosecond);

// The costing of a whole sweep file, warm: `lathe sweep FILE --threads 1` (JSONL rows
// into memory) run again and again in one process, timing only its costing (the plan
// shapes are lowered in each iteration but not timed). Per plan, against the first
// (cold) iteration. The file comes from $LATHE_BENCH_SWEEP (bench/llm_analysis_compare.py
// sets it to its 48 configurations); skipped when unset.
void BM_SweepFileCosting(benchmark::State& state) {
  const char* path = std::getenv("LATHE_BENCH_SWEEP");
  if (!path || !*path) {
    state.SkipWithError("set LATHE_BENCH_SWEEP to a sweep file");
    return;
  }
  SweepSpace space = expand_sweep(load_sweep(path));
  SweepOptions o;
  o.threads = 1;
  o.format = RowFormat::jsonl;
  size_t bytes = 0;
  // Arg 1: JSONL rows formatted (into memory), as `lathe sweep -o rows.jsonl`; arg 0: the
  // figures only (each plan's SweepRow, tallies and front), as a library call returns them.
  const bool rows = state.range(0) != 0;
  if (rows) o.sink = [&](const std::string& chunk) { bytes += chunk.size(); };
  double first = -1, plans = 0;
  for (auto _ : state) {
    SweepSummary sum = run_sweep(space, o);
    state.SetIterationTime(sum.cost_s);
    if (first < 0) first = sum.cost_s;
    plans = double(sum.evaluated);
  }
  state.counters["plans"] = plans;
  state.counters["cold_us_per_plan"] = first * 1e6 / std::max(1.0, plans);
  state.SetItemsProcessed(int64_t(plans) * state.iterations());
  state.SetLabel(std::string(path) + (rows ? ", " + std::to_string(bytes / std::max<int64_t>(1, state.iterations())) +
                                                 " bytes of JSONL rows per pass"
                                           : ", no rows written"));
}
BENCHMARK(BM_SweepFileCosting)->Arg(1)->Arg(0)->UseManualTime()->Iterations(25)->Unit(benchmark::kMicrosecond);

void BM_BuildAndLower70B(benchmark::State& state) {
  ModelSpec m = load_model("llama-3-70b");
  Target t = load_target("h100-sxm");
  Workload w{1, 2048, 512};
  PlanOptions o;
  o.tp = 4;
  LowerHooks h;
  h.record = false;
  h.verify_each_pass = state.range(0) != 0;  // 0: as simulate and sweep lower
  for (auto _ : state)
    benchmark::DoNotOptimize(lower(build_graph(m, build_options(m, t, o, w, Phase::prefill)),
                                   build_graph(m, build_options(m, t, o, w, Phase::decode)), o, t, w, h));
}
BENCHMARK(BM_BuildAndLower70B)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lathe

BENCHMARK_MAIN();
