#include "simulator/simulate.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "ir/assert.h"
#include "ir/buffers.h"
#include "simulator/node_groups.h"

namespace lathe {

double sum_max_affine(double a0, double a1, double b0, double b1, double c0, double c1, int64_t t0, int64_t t1) {
  if (t1 < t0) return 0;
  const double k[3][2] = {{a0, a1}, {b0, b1}, {c0, c1}};
  std::vector<int64_t> cuts = {t0 - 1, t1};
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j) {
      double db = k[i][1] - k[j][1];
      if (std::fabs(db) < 1e-300) continue;
      double x = (k[j][0] - k[i][0]) / db;
      if (x > double(t0) && x < double(t1)) cuts.push_back(int64_t(std::floor(x)));
    }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  double total = 0;
  for (size_t s = 0; s + 1 < cuts.size(); ++s) {
    int64_t lo = cuts[s] + 1, hi = cuts[s + 1];
    if (hi < lo) continue;
    double mid = 0.5 * double(lo + hi);
    int best = 0;
    for (int i = 1; i < 3; ++i)
      if (k[i][0] + k[i][1] * mid > k[best][0] + k[best][1] * mid) best = i;
    double f_lo = k[best][0] + k[best][1] * double(lo), f_hi = k[best][0] + k[best][1] * double(hi);
    total += double(hi - lo + 1) * 0.5 * (f_lo + f_hi);
  }
  return total;
}

double peak_live_bytes(const Graph& g, const Bindings& b) {
  std::vector<NodeId> order = g.topo_order();
  std::vector<LiveRange> live = live_ranges(g, order);
  std::vector<double> delta(order.size() + 1, 0.0);
  for (size_t v = 0; v < live.size(); ++v) {
    if (live[v].first < 0) continue;
    double bytes = value_bytes(g.value(ValueId(v)), b);
    delta[size_t(live[v].first)] += bytes;
    delta[size_t(live[v].last) + 1] -= bytes;
  }
  double cur = 0, peak = 0;
  for (double d : delta) {
    cur += d;
    peak = std::max(peak, cur);
  }
  return peak;
}

namespace {

void add_share(PhaseSummary& p, Bound b, double t) {
  switch (b) {
    case Bound::compute: p.compute_share += t; break;
    case Bound::memory: p.memory_share += t; break;
    case Bound::launch: p.launch_share += t; break;
    case Bound::network: p.network_share += t; break;
  }
}

void finish_shares(PhaseSummary& p) {
  if (p.time_s <= 0) return;
  p.compute_share /= p.time_s;
  p.memory_share /= p.time_s;
  p.launch_share /= p.time_s;
  p.network_share /= p.time_s;
  double best = p.memory_share;
  p.bound = Bound::memory;
  if (p.compute_share > best) best = p.compute_share, p.bound = Bound::compute;
  if (p.launch_share > best) best = p.launch_share, p.bound = Bound::launch;
  if (p.network_share > best) p.bound = Bound::network;
}

OpRow make_row(const Graph& g, NodeId id, Phase ph, const NodeCost& c, const std::string& label) {
  OpRow r;
  const Node& n = g.node(id);
  r.node = id;
  r.name = n.name;
  r.kernel = label;
  r.phase = ph;
  r.cls = c.cls;
  r.bound = c.bound;
  r.math = c.math;
  r.flops = c.flops;
  r.bytes = c.bytes;
  r.time_s = c.time_s;
  r.step_time_s = c.time_s;
  r.compute_s = c.compute_s;
  r.memory_s = c.memory_s;
  r.network_s = c.network_s;
  r.launch_s = c.launch_s;
  return r;
}

}  // namespace

SimResult simulate(const Graph& prefill, const Graph& decode, const Target& t, const Workload& w,
                   const SimOptions& o) {
  SimResult r;
  r.workload = w;
  if (o.per_op) r.ops.reserve(prefill.num_nodes() + decode.num_nodes());
  CostOptions co;
  co.ideal = o.ideal;

  // ---- prefill: one pass over the prompt ----
  Bindings pb{w.batch, w.prompt, w.prompt};
  {
    NodeGroups gr = group_nodes(prefill);
    std::vector<NodeCost> costs;
    std::vector<std::string> labels;
    for (NodeId rep : gr.representative) {
      costs.push_back(cost_node(prefill, prefill.node(rep), t, pb, co));
      if (o.per_op) labels.push_back(kernel_label(prefill.node(rep)));
    }
    r.prefill.steps = 1;
    for (size_t i = 0; i < gr.order.size(); ++i) {
      const NodeCost& c = costs[size_t(gr.group_of[i])];
      r.prefill.time_s += c.time_s;
      r.prefill.flops += c.flops;
      r.prefill.bytes += c.bytes;
      add_share(r.prefill, c.bound, c.time_s);
      if (o.per_op) r.ops.push_back(make_row(prefill, gr.order[i], Phase::prefill, c, labels[size_t(gr.group_of[i])]));
    }
    r.prefill.kernels = int(gr.order.size());
    finish_shares(r.prefill);
  }

  // ---- decode: steps at contexts P+1 .. P+gen-1, summed in closed form ----
  int64_t steps = std::max<int64_t>(0, w.gen - 1);
  int64_t t0 = w.prompt + 1, t1 = w.prompt + std::max<int64_t>(1, steps);
  {
    NodeGroups gr = group_nodes(decode);
    r.decode.steps = int(steps);
    r.decode.kernels = int(gr.order.size());
    struct Summed {
      NodeCost mid;     // at the mean context (bound, per-step figures)
      std::string label;
      double time, flops, bytes, compute, memory, network, launch;
    };
    std::vector<Summed> sums;
    Bindings lo{w.batch, 1, t0}, hi{w.batch, 1, t1}, mid{w.batch, 1, (t0 + t1 + 1) / 2};
    for (NodeId rep : gr.representative) {
      const Node& n = decode.node(rep);
      NodeCost a = cost_node(decode, n, t, lo, co);
      NodeCost z = t1 > t0 ? cost_node(decode, n, t, hi, co) : a;
      Summed s;
      s.mid = cost_node(decode, n, t, mid, co);
      if (o.per_op) s.label = kernel_label(n);
      double span = double(t1 - t0);
      auto slope = [&](double va, double vz) { return span > 0 ? (vz - va) / span : 0.0; };
      auto icpt = [&](double va, double vz) { return va - slope(va, vz) * double(t0); };
      double n_steps = double(steps);
      double busy = 0;
      if (o.ideal) {
        // Pure roofline: the sum of a max of affine functions, exactly.
        busy = sum_max_affine(icpt(a.compute_s, z.compute_s), slope(a.compute_s, z.compute_s),
                              icpt(a.memory_s, z.memory_s), slope(a.memory_s, z.memory_s),
                              icpt(a.network_s, z.network_s), slope(a.network_s, z.network_s), t0,
                              t0 + steps - 1);
      } else {
        // Smooth roofline: busy(T) is smooth and convex in T; Simpson's rule over the
        // steps (exact for the affine parts, within a fraction of a percent elsewhere).
        auto f = [&](const NodeCost& c) { return std::max(overlap_time(c.compute_s, c.memory_s, t, co), c.network_s); };
        busy = n_steps * (f(a) + 4.0 * f(s.mid) + f(z)) / 6.0;
      }
      s.launch = a.launch_s * n_steps;
      s.time = busy + s.launch;
      s.flops = 0.5 * (a.flops + z.flops) * n_steps;
      s.bytes = 0.5 * (a.bytes + z.bytes) * n_steps;
      s.compute = 0.5 * (a.compute_s + z.compute_s) * n_steps;
      s.memory = 0.5 * (a.memory_s + z.memory_s) * n_steps;
      s.network = 0.5 * (a.network_s + z.network_s) * n_steps;
      sums.push_back(s);
    }
    for (size_t i = 0; i < gr.order.size(); ++i) {
      const Summed& s = sums[size_t(gr.group_of[i])];
      r.decode.time_s += s.time;
      r.decode.flops += s.flops;
      r.decode.bytes += s.bytes;
      add_share(r.decode, s.mid.bound, s.time);
      if (o.per_op) {
        OpRow row = make_row(decode, gr.order[i], Phase::decode, s.mid, s.label);
        row.time_s = s.time;
        row.flops = s.flops;
        row.bytes = s.bytes;
        row.compute_s = s.compute;
        row.memory_s = s.memory;
        row.network_s = s.network;
        row.launch_s = s.launch;
        row.step_time_s = steps > 0 ? s.time / double(steps) : s.mid.time_s;
        r.ops.push_back(std::move(row));
      }
    }
    finish_shares(r.decode);
    if (steps == 0) {
      // No decode step runs; still report what one step at P+1 would take.
      double one = 0;
      for (size_t i = 0; i < gr.order.size(); ++i) one += sums[size_t(gr.group_of[i])].mid.time_s;
      r.tpot_s = one;
    }
  }

  r.ttft_s = r.prefill.time_s;
  if (steps > 0) r.tpot_s = r.decode.time_s / double(steps);
  r.e2e_s = r.ttft_s + r.decode.time_s;
  double batch = double(w.batch);
  r.tokens_per_s = r.e2e_s > 0 ? batch * double(w.gen) / r.e2e_s : 0;
  r.decode_tokens_per_s = r.tpot_s > 0 ? batch / r.tpot_s : 0;
  r.prefill_tokens_per_s = r.prefill.time_s > 0 ? batch * double(w.prompt) / r.prefill.time_s : 0;

  // ---- memory ----
  MemoryFootprint& m = r.mem;
  for (ValueId v : decode.values_of(ValueKind::weight)) m.weights += value_bytes(decode.value(v), pb);
  Bindings final_ctx{w.batch, 1, w.final_context()};
  for (ValueId v : decode.values_of(ValueKind::state)) m.kv += value_bytes(decode.value(v), final_ctx);
  auto acts = [&](const Graph& g, const Bindings& b) {
    if (g.attrs.has("arena_bytes") && graph_bindings(g) == b) return double(g.attrs.i("arena_bytes"));
    return peak_live_bytes(g, b);
  };
  m.activations = std::max(acts(prefill, pb), acts(decode, Bindings{w.batch, 1, w.final_context()}));
  m.total = m.weights + m.kv + m.activations;
  m.capacity = t.capacity_bytes();
  m.fits = m.total <= m.capacity;
  double per_seq = (m.kv + m.activations) / batch;
  m.max_batch = per_seq > 0 && m.capacity > m.weights ? int64_t(std::floor((m.capacity - m.weights) / per_seq)) : 0;
  return r;
}

}  // namespace lathe
