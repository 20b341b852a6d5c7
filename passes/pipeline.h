// The pass manager: the default pipeline (one list, in order, like Halide's
// Lower.cpp), textual pipelines, and lowering of a plan's two graphs with the
// verifier after every pass and a record of what each pass bought.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "passes/pass.h"
#include "simulator/simulate.h"

namespace lathe {

struct PassInfo {
  std::string_view name;  // pipeline name, e.g. "fuse-qkv"
  PassFn fn;
};

// Every pass in default pipeline order.
std::span<const PassInfo> pass_registry();
const PassInfo* find_pass(std::string_view name);

// The passes a plan runs: its explicit pipeline ("none" = no pass; a comma list) or
// the default one, minus passes switched off. Throws lathe::Error on unknown names.
std::vector<std::string> pipeline_for(const PlanOptions& o);

// What one pass did, and the plan's figures after it (simulated on the target).
struct PassRecord {
  std::string pass;  // "input" for the graphs as built
  bool changed = false;
  std::string note;
  int prefill_kernels = 0, decode_kernels = 0;
  double prefill_bytes = 0, decode_bytes_per_step = 0;
  double prefill_s = 0, decode_s = 0, tpot_s = 0;
  double weight_bytes = 0, kv_bytes = 0, activation_bytes = 0;
  double pass_ms = 0;  // time the pass itself took (both graphs)
};

struct Lowered {
  Graph prefill, decode;
  std::vector<std::string> pipeline;
  std::vector<PassRecord> records;  // "input" first, then one per pass run
};

struct LowerHooks {
  // Called with the built graphs (pass "input", index 0) and after each pass on each
  // graph (for --print-ir-after, --dump-dir).
  std::function<void(const std::string& pass, int index, const Graph& g, bool changed)> after_pass;
  bool record = true;  // simulate after each pass for the report
  bool ideal = false;  // ... as the pure roofline (an ideal sweep's emitted plan)
  // Verify the graphs after building and after every pass (tests, compile, run), or
  // only the final graphs (simulate, whatif, sweep: the passes are verified in tests,
  // and verification is a third of lowering). LATHE_VERIFY=1 forces every pass.
  bool verify_each_pass = true;
};

// Runs the pipeline on both phases in lockstep, verifying after every pass (or only
// at the end; see LowerHooks::verify_each_pass).
Lowered lower(Graph prefill, Graph decode, const PlanOptions& o, const Target& t, const Workload& w,
              const LowerHooks& hooks = {});

// Runs passes [begin, end) of the pipeline for `o` (end clamped to its length) on graphs
// that already went through the passes before `begin` (a sweep lowers the structural
// passes once for every weight and KV format of a model). lower() is begin 0, end all;
// the result names the whole pipeline.
Lowered lower_passes(Graph prefill, Graph decode, const PlanOptions& o, const Target& t, const Workload& w,
                     const LowerHooks& hooks, size_t begin, size_t end);

}  // namespace lathe
