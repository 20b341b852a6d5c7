#include "passes/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "ir/assert.h"
#include "ir/verifier.h"
#include "passes/flash_attention.h"
#include "passes/fuse_epilogue.h"
#include "passes/fuse_gate_up.h"
#include "passes/fuse_moe.h"
#include "passes/fuse_norm_matmul.h"
#include "passes/fuse_qkv.h"
#include "passes/fuse_rope_kvwrite.h"
#include "passes/kv_layout.h"
#include "passes/memory_plan.h"
#include "passes/quantize_kv.h"
#include "passes/quantize_weights.h"

namespace lathe {

namespace {
// The default pipeline. Fusion first (it only looks at structure), then formats,
// then the layout (it depends on the KV dtype), then memory (it depends on all).
constexpr PassInfo kPasses[] = {
    {"fuse-qkv", fuse_qkv},
    {"fuse-gate-up", fuse_gate_up},
    {"fuse-norm-matmul", fuse_norm_matmul},
    {"fuse-epilogue", fuse_epilogue},
    {"fuse-rope-kvwrite", fuse_rope_kvwrite},
    {"flash-attention", flash_attention},
    {"fuse-moe", fuse_moe},
    {"quantize-weights", quantize_weights},
    {"quantize-kv", quantize_kv},
    {"kv-layout", kv_layout},
    {"memory-plan", memory_plan},
};
}  // namespace

std::span<const PassInfo> pass_registry() { return kPasses; }

const PassInfo* find_pass(std::string_view name) {
  for (const PassInfo& p : kPasses)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string> pipeline_for(const PlanOptions& o) {
  std::vector<std::string> names;
  if (o.passes && *o.passes != "default") {
    if (*o.passes != "none") {
      for (std::string& p : split_pass_list(*o.passes)) {
        if (!find_pass(p)) throw Error("unknown pass '" + p + "' in the pipeline");
        // As every other list lathe takes: a repeat is most likely a typo.
        if (std::find(names.begin(), names.end(), p) != names.end())
          throw Error("pass '" + p + "' appears twice in the pipeline");
        names.push_back(std::move(p));
      }
    }
  } else {
    for (const PassInfo& p : kPasses) names.emplace_back(p.name);
  }
  std::vector<std::string> out;
  for (const std::string& n : names)
    if (o.pass_on(n)) out.push_back(n);
  // memory-plan places the final graph's buffers: a pass after it changes the graph
  // under the plan (the verifier then aborted on overlapping live buffers).
  if (auto mp = std::find(out.begin(), out.end(), "memory-plan"); mp != out.end() && mp + 1 != out.end())
    throw Error("pass 'memory-plan' must come last in the pipeline (it places the final graph's buffers), but '" +
                *(mp + 1) + "' comes after it");
  return out;
}

namespace {
PassRecord record_of(const std::string& pass, const Graph& prefill, const Graph& decode, const Target& t,
                     const Workload& w, bool ideal) {
  PassRecord r;
  r.pass = pass;
  SimOptions so;
  so.per_op = false;
  so.ideal = ideal;
  SimResult s = simulate(prefill, decode, t, w, so);
  r.prefill_kernels = s.prefill.kernels;
  r.decode_kernels = s.decode.kernels;
  r.prefill_bytes = s.prefill.bytes;
  r.decode_bytes_per_step = s.decode.steps > 0 ? s.decode.bytes / s.decode.steps : 0;
  r.prefill_s = s.prefill.time_s;
  r.decode_s = s.decode.time_s;
  r.tpot_s = s.tpot_s;
  r.weight_bytes = s.mem.weights;
  r.kv_bytes = s.mem.kv;
  r.activation_bytes = s.mem.activations;
  return r;
}
}  // namespace

Lowered lower(Graph prefill, Graph decode, const PlanOptions& o, const Target& t, const Workload& w,
              const LowerHooks& hooks) {
  return lower_passes(std::move(prefill), std::move(decode), o, t, w, hooks, 0, SIZE_MAX);
}

Lowered lower_passes(Graph prefill, Graph decode, const PlanOptions& o, const Target& t, const Workload& w,
                     const LowerHooks& hooks, size_t begin, size_t end) {
  Lowered out;
  out.pipeline = pipeline_for(o);
  end = std::min(end, out.pipeline.size());
  begin = std::min(begin, end);
  bool debug = std::getenv("LATHE_DEBUG") != nullptr;
  const char* force = std::getenv("LATHE_VERIFY");
  bool each = hooks.verify_each_pass || (force && *force && std::string_view(force) != "0");
  // What produced the graphs after the first n passes: for verifier messages.
  auto after = [&](size_t n) { return n == 0 ? std::string("build") : "pass " + out.pipeline[n - 1]; };
  if (each) {
    verify_or_die(prefill, after(begin) + " (prefill)");
    verify_or_die(decode, after(begin) + " (decode)");
  }
  if (hooks.record && begin == 0) out.records.push_back(record_of("input", prefill, decode, t, w, hooks.ideal));
  if (hooks.after_pass && begin == 0) {
    hooks.after_pass("input", 0, prefill, true);
    hooks.after_pass("input", 0, decode, true);
  }
  PassContext ctx{o, t};
  int index = int(begin);
  for (size_t pi = begin; pi < end; ++pi) {
    const std::string& name = out.pipeline[pi];
    const PassInfo* p = find_pass(name);
    LATHE_ASSERT(p != nullptr, "pass vanished: " + name);
    auto t0 = std::chrono::steady_clock::now();
    // A pass that reports no change left the graph as it was verified last.
    PassResult rp = p->fn(prefill, ctx);
    if (each && rp.changed) verify_or_die(prefill, name + " (prefill)");
    PassResult rd = p->fn(decode, ctx);
    if (each && rd.changed) verify_or_die(decode, name + " (decode)");
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ++index;
    if (debug) std::fprintf(stderr, "lathe: pass %-18s %7.2f ms  %s\n", name.c_str(), ms, rd.note.c_str());
    if (hooks.after_pass) {
      hooks.after_pass(name, index, prefill, rp.changed);
      hooks.after_pass(name, index, decode, rd.changed);
    }
    if (hooks.record) {
      PassRecord r = record_of(name, prefill, decode, t, w, hooks.ideal);
      r.changed = rp.changed || rd.changed;
      r.note = rd.note;
      if (rp.note != rd.note && !rp.note.empty()) r.note = "prefill: " + rp.note + "; decode: " + rd.note;
      r.pass_ms = ms;
      out.records.push_back(std::move(r));
    }
  }
  if (!each) {
    verify_or_die(prefill, after(end) + " (prefill; LATHE_VERIFY=1 verifies after each pass)");
    verify_or_die(decode, after(end) + " (decode; LATHE_VERIFY=1 verifies after each pass)");
  }
  out.prefill = std::move(prefill);
  out.decode = std::move(decode);
  return out;
}

}  // namespace lathe
