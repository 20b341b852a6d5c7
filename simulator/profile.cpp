#include "simulator/profile.h"

#include <algorithm>
#include <cmath>

#include "ir/buffers.h"

namespace lathe {

namespace {

double compute_peak(const OpRow& o, const Target& t) {
  switch (o.cls) {
    case KernelClass::attention_decode:
    case KernelClass::elementwise:
      return t.peak_fp32 * 1e12;
    case KernelClass::collective:
      return 0;
    default: {
      double p = t.matrix_peak_flops(o.math);
      return p > 0 ? p : t.peak_fp32 * 1e12;
    }
  }
}

std::optional<double> gemm_hit(const Graph& g, const Node& n, const Target& t, const Bindings& b,
                               double unique) {
  auto p = gemm_parts(n.kind, n.attrs, n.inputs.size());
  if (!p) return std::nullopt;
  const Value& x = g.value(n.inputs[size_t(p->x)]);
  double K = double(x.shape.back().eval(b));
  double rows = double(num_elements(x.shape, b)) / K;
  if (n.kind == OpKind::lm_head) rows = double(b.B);
  double tokens = double(b.B) * double(b.S);
  double sumN = 0, w_bytes = 0;
  for (int w = 0; w < p->num_weights; ++w) {
    const Value& wv = g.value(n.inputs[size_t(p->first_weight + w)]);
    sumN += double(wv.shape[wv.shape.size() - 2].eval(b));
    w_bytes += value_bytes(wv, b);
  }
  double M = rows, x_rows = rows;
  if (n.kind == OpKind::expert_matmul) {
    double k = double(g.value(n.inputs[size_t(p->idx)]).shape[2].eval(b));
    double E = double(g.value(n.inputs[size_t(p->first_weight)]).shape[0].eval(b));
    double touched = expected_experts_touched(E, k, tokens);
    w_bytes *= touched / E;
    M = tokens * k / std::max(1.0, touched);  // rows per expert
    x_rows = tokens * k;
  }
  double x_bytes = x_rows * K * dtype_bits(x.dtype) / 8.0;
  double tm = M <= 64 ? (M <= 16 ? 16 : (M <= 32 ? 32 : 64)) : t.gemm_tile_m;
  double tn = M <= 64 ? 128 : t.gemm_tile_n;
  double requested =
      unique - x_bytes - w_bytes + x_bytes * std::ceil(sumN / tn) + w_bytes * std::ceil(M / tm);
  if (requested <= 0 || unique <= 0) return std::nullopt;
  return std::clamp(1.0 - unique / requested, 0.0, 1.0);
}

std::optional<double> attention_hit(const Graph& g, const Node& n, const Bindings& b,
                                    double unique) {
  double h = double(n.attrs.i("heads")), kvh = double(n.attrs.i("kv_heads"));
  double S = double(b.S), T = double(b.T);
  if (h <= 0 || kvh <= 0 || T <= 0) return std::nullopt;
  const Value& q = g.value(n.inputs[0]);
  double other = value_bytes(q, b);
  for (ValueId v : n.outputs) other += value_bytes(g.value(v), b);
  double kv = std::max(0.0, unique - other);
  double pairs = S * (T - S) + S * (S + 1) / 2.0;
  double causal = pairs / (S * T);
  double requested = other + kv * std::ceil(S / 128.0) * (h / kvh) * causal;
  if (requested <= unique) return 0.0;
  return 1.0 - unique / requested;
}

}  // namespace

std::optional<double> l2_hit_rate(const Graph& g, const Node& n, const Target& t, const Bindings& b,
                                  const NodeCost& c) {
  if (!t.is_gpu() || t.l2_mb <= 0) return std::nullopt;
  if (is_gemm(n.kind)) return gemm_hit(g, n, t, b, c.bytes);
  if (n.kind == OpKind::flash_attention) return attention_hit(g, n, b, c.bytes);
  return std::nullopt;
}

std::vector<KernelProfile> profile_ops(const SimResult& r, const Graph& prefill,
                                       const Graph& decode, const Target& t) {
  const Workload& w = r.workload;
  int64_t steps = std::max<int64_t>(0, w.gen - 1);
  int64_t t0 = w.prompt + 1, t1 = w.prompt + std::max<int64_t>(1, steps);
  Bindings pb{w.batch, w.prompt, w.prompt}, db{w.batch, 1, (t0 + t1 + 1) / 2};
  std::vector<KernelProfile> out;
  out.reserve(r.ops.size());
  for (const OpRow& o : r.ops) {
    KernelProfile k;
    double busy = o.time_s - o.launch_s;
    if (busy > 0) {
      k.achieved_flops_per_s = o.flops / busy;
      k.achieved_bytes_per_s = o.bytes / busy;
    }
    double peak = compute_peak(o, t);
    if (peak > 0) k.compute_utilization = k.achieved_flops_per_s / peak;
    double bw = o.cls == KernelClass::collective ? t.link_bytes_per_s() : t.bandwidth_bytes_per_s();
    if (bw > 0) k.bandwidth_utilization = k.achieved_bytes_per_s / bw;
    bool pre = o.phase == Phase::prefill;
    const Graph& g = pre ? prefill : decode;
    if (o.node >= 0 && size_t(o.node) < g.node_capacity()) {
      Bindings b = pre ? pb : db;
      NodeCost c = cost_node(g, g.node(o.node), t, b);
      k.l2_hit_rate = l2_hit_rate(g, g.node(o.node), t, b, c);
    }
    out.push_back(k);
  }
  return out;
}

}  // namespace lathe
