#include "simulator/prepared.h"

#include <algorithm>
#include <cmath>

#include "ir/assert.h"
#include "ir/buffers.h"

namespace lathe {

namespace {

double ipow(int64_t x, int e) {
  double r = 1;
  for (int i = 0; i < e; ++i) r *= double(x);
  return r;
}

void add_share(PhaseSummary& p, Bound b, double t) {
  switch (b) {
    case Bound::compute:
      p.compute_share += t;
      break;
    case Bound::memory:
      p.memory_share += t;
      break;
    case Bound::launch:
      p.launch_share += t;
      break;
    case Bound::network:
      p.network_share += t;
      break;
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

PreparedPhase prepare_phase(const Graph& g) {
  PreparedPhase p;
  p.g = &g;
  p.groups = group_nodes(g);
  for (NodeId rep : p.groups.representative) {
    p.labels.push_back(kernel_label(g.node(rep)));
    p.forms.push_back(cost_form(g, g.node(rep)));
  }
  p.live = LivePeak(g);
  p.has_arena = g.attrs.has("arena_bytes");
  if (p.has_arena) {
    p.arena_bindings = graph_bindings(g);
    p.arena_bytes = double(g.attrs.i("arena_bytes"));
  }
  return p;
}

double phase_activations(const PreparedPhase& p, const Bindings& b) {
  if (p.has_arena && p.arena_bindings == b) return p.arena_bytes;
  return p.live.at(b);
}

}  // namespace

// ---- LivePeak ----

LivePeak::LivePeak(const Graph& g) {
  std::vector<NodeId> order = g.topo_order();
  std::vector<LiveRange> live = live_ranges(g, order);
  // Each live value's monomial (B^b S^s T^t) and bytes coefficient.
  struct Term {
    size_t first, end, m;  // live over positions [first, end)
    double coef;
  };
  std::vector<Term> terms;
  for (size_t v = 0; v < live.size(); ++v) {
    if (live[v].first < 0) continue;
    const Value& val = g.value(ValueId(v));
    Dim d = product(val.shape);
    size_t m = 0;
    while (m < monomials_.size() &&
           !(monomials_[m].b == d.b && monomials_[m].s == d.s && monomials_[m].t == d.t))
      ++m;
    if (m == monomials_.size()) monomials_.push_back({d.b, d.s, d.t});
    terms.push_back({size_t(live[v].first), size_t(live[v].last) + 1, m,
                     double(d.coef) * dtype_bits(val.dtype) / 8.0});
  }
  // Row p holds the coefficients live at position p: prefix sums of the deltas, in one
  // flat array (M coefficients a row).
  const size_t M = monomials_.size(), R = order.size() + 1;
  std::vector<double> rows(R * M, 0.0);
  for (const Term& t : terms) {
    rows[t.first * M + t.m] += t.coef;
    rows[t.end * M + t.m] -= t.coef;
  }
  for (size_t p = 1; p < R; ++p)
    for (size_t m = 0; m < M; ++m) rows[p * M + m] += rows[(p - 1) * M + m];
  auto row = [&](size_t p) { return rows.data() + p * M; };
  // Identical layers give identical rows: exact duplicates go first (sort + unique),
  // then the non-dominated rows are kept by a quadratic test over the distinct ones.
  std::vector<size_t> idx(R);
  for (size_t p = 0; p < R; ++p) idx[p] = p;
  auto less = [&](size_t a, size_t b) { return std::lexicographical_compare(row(a), row(a) + M, row(b), row(b) + M); };
  auto equal = [&](size_t a, size_t b) { return std::equal(row(a), row(a) + M, row(b)); };
  std::sort(idx.begin(), idx.end(), less);
  idx.erase(std::unique(idx.begin(), idx.end(), equal), idx.end());
  auto dominated = [&](size_t a, size_t b) {
    // row a <= row b everywhere (with a relative tolerance for the running sums)
    for (size_t m = 0; m < M; ++m)
      if (row(a)[m] > row(b)[m] + 1e-9 * std::fabs(row(b)[m])) return false;
    return true;
  };
  for (size_t i = 0; i < idx.size(); ++i) {
    bool keep = true;
    for (size_t j = 0; j < idx.size() && keep; ++j) {
      if (i == j || !dominated(idx[i], idx[j])) continue;
      // Rows equal within the tolerance: keep the first of them only.
      keep = !(dominated(idx[j], idx[i]) ? j < i : true);
    }
    if (keep) rows_.emplace_back(row(idx[i]), row(idx[i]) + M);
  }
  if (rows_.empty()) rows_.push_back(std::vector<double>(M, 0.0));
}

double LivePeak::at(const Bindings& b) const {
  double value[16];
  size_t n = std::min<size_t>(monomials_.size(), 16);
  LATHE_ASSERT(monomials_.size() <= 16, "more than 16 distinct activation size monomials");
  for (size_t m = 0; m < n; ++m)
    value[m] = ipow(b.B, monomials_[m].b) * ipow(b.S, monomials_[m].s) * ipow(b.T, monomials_[m].t);
  double peak = 0;
  for (const auto& row : rows_) {
    double s = 0;
    for (size_t m = 0; m < n; ++m) s += row[m] * value[m];
    peak = std::max(peak, s);
  }
  return peak;
}

// ---- PreparedPlan ----

PreparedPlan::PreparedPlan(const Graph& prefill, const Graph& decode)
    : prefill_(prepare_phase(prefill)), decode_(prepare_phase(decode)) {
  // Weights have constant shapes: their bytes do not depend on the bindings.
  for (ValueId v : decode.values_of(ValueKind::weight))
    weight_bytes_ += value_bytes(decode.value(v), {1, 1, 1});
  for (ValueId v : decode.values_of(ValueKind::state))
    state_sizes_.push_back(value_size(decode.value(v)));
  kv_block_ = kv_block_of(decode);
}

double PreparedPlan::kv_bytes(const Workload& w) const {
  Bindings final_ctx{w.batch, 1, in_whole_kv_blocks(w.final_context(), kv_block_)};
  double kv = 0;
  for (const ValueSize& v : state_sizes_) kv += v.bytes(final_ctx);
  return kv;
}

double PreparedPlan::activation_bytes(const Workload& w, int64_t prefill_chunk) const {
  // A chunk's activations grow with its tokens and its context: the last full chunk, at
  // the whole prompt's context, bounds every chunk's.
  const int64_t chunk = prefill_chunk > 0 ? std::min(prefill_chunk, w.prompt) : w.prompt;
  Bindings pb{w.batch, chunk, w.prompt};
  return std::max(phase_activations(prefill_, pb),
                  phase_activations(decode_, Bindings{w.batch, 1, w.final_context()}));
}

void PreparedPlan::prefill_pass(SimResult& r, const Target& t, const Workload& w, int64_t chunk,
                                const CostOptions& co, bool per_op) const {
  const NodeGroups& gr = prefill_.groups;
  const int64_t B = w.batch, P = w.prompt, K = (P + chunk - 1) / chunk;
  std::vector<NodeCost> sums;  // per group, for the per-op rows
  if (per_op) sums.reserve(gr.representative.size());
  r.prefill.steps = 1;
  for (size_t i = 0; i < gr.representative.size(); ++i) {
    const CostForm& form = prefill_.forms[i];
    // Over chunks, a kernel whose FLOPs and bytes are the same at one token and context
    // as at two runs once per sequence (the LM head reads each sequence's last row;
    // sampling): with the last chunk. (Two chunks of one size are no test: a GEMM's cost
    // does not read T.)
    bool per_sequence = false;
    if (K > 1) {
      const NodeCost one = cost_node(form, t, {B, 1, 1}, co), two = cost_node(form, t, {B, 2, 2}, co);
      per_sequence = one.flops == two.flops && one.bytes == two.bytes;
    }
    NodeCost sum;
    double longest = -1;
    for (int64_t k = per_sequence ? K - 1 : 0; k < K; ++k) {
      const int64_t n = std::min(chunk, P - k * chunk);
      const NodeCost c = cost_node(form, t, {B, n, k * chunk + n}, co);
      if (longest < 0) {
        sum = c;  // its class, math and figures; later chunks add their figures
      } else {
        sum.flops += c.flops, sum.bytes += c.bytes, sum.compute_s += c.compute_s, sum.memory_s += c.memory_s;
        sum.network_s += c.network_s, sum.launch_s += c.launch_s, sum.busy_s += c.busy_s, sum.time_s += c.time_s;
      }
      if (c.time_s > longest) longest = c.time_s, sum.bound = c.bound;  // the bound of its longest chunk
    }
    const double count = double(gr.count[i]);
    r.prefill.time_s += count * sum.time_s;
    r.prefill.flops += count * sum.flops;
    r.prefill.bytes += count * sum.bytes;
    add_share(r.prefill, sum.bound, count * sum.time_s);
    if (per_op) sums.push_back(sum);
  }
  if (per_op)
    for (size_t i = 0; i < gr.order.size(); ++i)
      r.ops.push_back(make_row(*prefill_.g, gr.order[i], Phase::prefill, sums[size_t(gr.group_of[i])],
                               prefill_.labels[size_t(gr.group_of[i])]));
  r.prefill.kernels = int(gr.order.size());
  finish_shares(r.prefill);
}

SimResult PreparedPlan::simulate(const Target& t, const Workload& w, const SimOptions& o,
                                 SimReuse* reuse) const {
  const Graph& decode = *decode_.g;
  SimResult r;
  r.workload = w;
  if (o.per_op) r.ops.reserve(prefill_.groups.order.size() + decode_.groups.order.size());
  CostOptions co;
  co.ideal = o.ideal;
  if (o.per_op) reuse = nullptr;
  if (reuse && (reuse->plan != this || reuse->target != &t || reuse->ideal != o.ideal)) {
    *reuse = SimReuse{};
    reuse->plan = this;
    reuse->target = &t;
    reuse->ideal = o.ideal;
    reuse->reads_context.assign(decode_.groups.representative.size(), 1);
    reuse->decode_cost.assign(decode_.groups.representative.size(), NodeCost{});
  }

  // ---- prefill: one pass over the prompt, or chunks of it ----
  // Totals by group (count x cost), so that they do not depend on per_op; the costs
  // are kept only for the per-op rows.
  Bindings pb{w.batch, w.prompt, w.prompt};
  const int64_t chunk = o.prefill_chunk > 0 && o.prefill_chunk < w.prompt ? o.prefill_chunk : 0;
  if (!chunk && reuse && reuse->prefill_bindings == pb) {
    r.prefill = reuse->prefill;
  } else {
    prefill_pass(r, t, w, chunk ? chunk : w.prompt, co, o.per_op);
    if (!chunk && reuse) {
      reuse->prefill_bindings = pb;
      reuse->prefill = r.prefill;
    }
  }

  // ---- decode: steps at contexts P+1 .. P+gen-1, summed in closed form ----
  int64_t steps = std::max<int64_t>(0, w.gen - 1);
  int64_t t0 = w.prompt + 1, t1 = w.prompt + std::max<int64_t>(1, steps);
  {
    const NodeGroups& gr = decode_.groups;
    r.decode.steps = int(steps);
    r.decode.kernels = int(gr.order.size());
    struct Summed {
      NodeCost mid;  // at the mean context (bound, per-step figures)
      double time, flops, bytes, compute, memory, network, launch;
    };
    std::vector<Summed> sums;  // per group, for the per-op rows
    if (o.per_op) sums.reserve(gr.representative.size());
    double one_step = 0;  // one step at P+1, for gen <= 1
    Bindings lo{w.batch, 1, t0}, hi{w.batch, 1, t1}, mid{w.batch, 1, (t0 + t1 + 1) / 2};
    bool reused = reuse && reuse->decode_batch == w.batch;
    for (size_t g = 0; g < gr.representative.size(); ++g) {
      const CostForm& form = decode_.forms[g];
      // Kernels whose cost does not read T (GEMMs, norms) cost the same at every step
      // (and at every prompt length).
      bool reads_context = true;
      NodeCost a;
      if (reused && !reuse->reads_context[g]) {
        a = reuse->decode_cost[g];
        reads_context = false;
      } else {
        a = cost_node(form, t, lo, co, &reads_context);
        if (reuse) {
          reuse->reads_context[g] = reads_context;
          reuse->decode_cost[g] = a;
        }
      }
      NodeCost z = t1 > t0 && reads_context ? cost_node(form, t, hi, co) : a;
      Summed s;
      s.mid = reads_context ? cost_node(form, t, mid, co) : a;
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
        busy = n_steps * (a.busy_s + 4.0 * s.mid.busy_s + z.busy_s) / 6.0;
      }
      s.launch = a.launch_s * n_steps;
      s.time = busy + s.launch;
      s.flops = 0.5 * (a.flops + z.flops) * n_steps;
      s.bytes = 0.5 * (a.bytes + z.bytes) * n_steps;
      s.compute = 0.5 * (a.compute_s + z.compute_s) * n_steps;
      s.memory = 0.5 * (a.memory_s + z.memory_s) * n_steps;
      s.network = 0.5 * (a.network_s + z.network_s) * n_steps;
      double n = double(gr.count[g]);
      r.decode.time_s += n * s.time;
      r.decode.flops += n * s.flops;
      r.decode.bytes += n * s.bytes;
      add_share(r.decode, s.mid.bound, n * s.time);
      one_step += n * s.mid.time_s;
      if (o.per_op) sums.push_back(s);
    }
    for (size_t i = 0; i < gr.order.size() && o.per_op; ++i) {
      const Summed& s = sums[size_t(gr.group_of[i])];
      OpRow row = make_row(decode, gr.order[i], Phase::decode, s.mid,
                           decode_.labels[size_t(gr.group_of[i])]);
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
    finish_shares(r.decode);
    if (reuse) reuse->decode_batch = w.batch;
    // No decode step runs; still report what one step at P+1 would take.
    if (steps == 0) r.tpot_s = one_step;
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
  m.weights = weight_bytes_;
  m.kv = kv_bytes(w);
  m.activations = activation_bytes(w, chunk);
  m.total = m.weights + m.kv + m.activations;
  m.capacity = t.capacity_bytes();
  m.fits = m.total <= m.capacity;
  double per_seq = (m.kv + m.activations) / batch;
  m.max_batch = per_seq > 0 && m.capacity > m.weights
                    ? int64_t(std::floor((m.capacity - m.weights) / per_seq))
                    : 0;
  return r;
}

}  // namespace lathe
