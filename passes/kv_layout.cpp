#include "passes/kv_layout.h"

#include <cstdio>

#include "ir/assert.h"
#include "simulator/cost.h"

namespace lathe {

// 1. A forced layout (plan option) wins.
// 2. Otherwise each candidate is scored by the time decode attention needs to read
//    one layer's K and V at the mean decode context: bytes / (bandwidth x memory
//    efficiency x contiguity(run)), where run is the contiguous bytes one kv head of
//    one sequence reads in that layout (simulator/cost.h). The same attributes go
//    into the prefill and the decode graph, so both phases choose alike.
// 3. Ties keep the earlier candidate: LHTD, paged:16, LTHD, TLHD.
PassResult kv_layout(Graph& g, const PassContext& ctx) {
  std::string before = g.attrs.s("kv_layout", "LHTD");
  if (ctx.options.kv_layout) {
    std::string name = kv_layout_name(*ctx.options.kv_layout);
    g.attrs.set("kv_layout", name);
    g.attrs.set("kv_layout_reason", std::string("forced by the plan"));
    return {before != name, name + ": forced by the plan"};
  }
  int64_t kvh = g.attrs.i("kv_heads"), d = g.attrs.i("head_dim");
  int64_t prompt = g.attrs.i("prompt", 1), final_ctx = g.attrs.i("final_context", prompt + 1);
  int64_t mean_ctx = std::max<int64_t>(1, (prompt + final_ctx) / 2);
  double bits = 16;
  for (ValueId v : g.values_of(ValueKind::state)) bits = g.value(v).format.bits_per_element(double(d));
  const KvLayout candidates[] = {{KvLayoutKind::LHTD, 16},
                                 {KvLayoutKind::paged, 16},
                                 {KvLayoutKind::LTHD, 16},
                                 {KvLayoutKind::TLHD, 16}};
  const KvLayout* best = nullptr;
  double best_eff = -1;
  std::string table;
  for (const KvLayout& l : candidates) {
    double run = kv_read_run_bytes(l, mean_ctx, kvh, d, bits);
    double eff = contiguity_efficiency(run, ctx.target);
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s%s %.0f B runs (x%.2f)", table.empty() ? "" : ", ", kv_layout_name(l).c_str(),
                  run, eff);
    table += buf;
    if (eff > best_eff + 1e-12) {
      best_eff = eff;
      best = &l;
    }
  }
  std::string name = kv_layout_name(*best);
  std::string reason = "decode attention reads at context " + std::to_string(mean_ctx) + " on " + ctx.target.name +
                       ": " + table + "; " + name + " reads fastest";
  g.attrs.set("kv_layout", name);
  g.attrs.set("kv_layout_reason", reason);
  return {before != name, reason};
}

}  // namespace lathe
