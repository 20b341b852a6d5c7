#include "simulator/calibrate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "ir/assert.h"
#include "simulator/cost.h"
#include "simulator/node_groups.h"

namespace lathe {

namespace {

// A run reduced to kernel groups: one representative node per group of identical
// kernels, how many nodes it stands for, their measured total.
struct Group {
  NodeId rep = kNone;
  CostForm form;  // the representative's cost form, built once
  int count = 0;        // nodes of the graph in this group
  double measured = 0;  // measured seconds of the group's measured nodes
  int measured_nodes = 0;
};
struct PreparedPhase {
  const Graph* g = nullptr;
  std::vector<Group> groups;
  double measured = 0;
};
struct Prepared {
  const MeasuredRun* run = nullptr;
  PreparedPhase phase[2];  // prefill, decode
};

PreparedPhase prepare_phase(const Graph& g, const std::vector<MeasuredKernel>& kernels,
                            double measured_total) {
  PreparedPhase p;
  p.g = &g;
  NodeGroups gr = group_nodes(g);
  std::map<NodeId, int> group_of;
  for (size_t i = 0; i < gr.order.size(); ++i) group_of[gr.order[i]] = gr.group_of[i];
  p.groups.resize(gr.representative.size());
  for (size_t i = 0; i < gr.representative.size(); ++i) {
    p.groups[i].rep = gr.representative[i];
    p.groups[i].form = cost_form(g, g.node(gr.representative[i]));
    p.groups[i].count = gr.count[i];
  }
  double sum = 0;
  for (const MeasuredKernel& k : kernels) {
    auto it = group_of.find(k.node);
    if (it == group_of.end()) continue;
    p.groups[size_t(it->second)].measured += k.measured_s;
    p.groups[size_t(it->second)].measured_nodes += 1;
    sum += k.measured_s;
  }
  p.measured = measured_total > 0 ? measured_total : sum;
  return p;
}

Prepared prepare(const MeasuredRun& r) {
  LATHE_ASSERT(r.prefill && r.decode, "measured run without graphs");
  Prepared p;
  p.run = &r;
  p.phase[0] = prepare_phase(*r.prefill, r.prefill_kernels, r.prefill_s);
  p.phase[1] = prepare_phase(*r.decode, r.decode_kernels, r.decode_s);
  return p;
}

// Predicted seconds of one node of a group over all its calls in the run: each decode
// step at its own context, except for kernels whose cost does not read the context.
double node_seconds(const Prepared& p, int phase, const Group& gr, const Target& t) {
  const MeasuredRun& r = *p.run;
  if (phase == 0) return cost_node(gr.form, t, {r.batch, r.prompt, r.prompt}).time_s;
  if (r.decode_steps <= 0) return 0;
  bool reads_context = true;
  double s = cost_node(gr.form, t, {r.batch, 1, r.prompt + 1}, {}, &reads_context).time_s;
  if (!reads_context) return s * double(r.decode_steps);
  for (int64_t i = 2; i <= r.decode_steps; ++i) s += cost_node(gr.form, t, {r.batch, 1, r.prompt + i}).time_s;
  return s;
}

struct Eval {
  double loss = 0;
  double phase_pred[2] = {0, 0};
};

Eval evaluate(const Prepared& p, const Target& t) {
  Eval e;
  for (int ph = 0; ph < 2; ++ph) {
    const PreparedPhase& pp = p.phase[ph];
    if (ph == 1 && p.run->decode_steps == 0) continue;
    double total = 0;
    for (const Group& gr : pp.groups) {
      double per_node = node_seconds(p, ph, gr, t);
      total += per_node * gr.count;
      if (gr.measured_nodes > 0 && gr.measured > 0 && pp.measured > 0) {
        double l = std::log(per_node * gr.measured_nodes / gr.measured);
        e.loss += (gr.measured / pp.measured) * l * l;
      }
    }
    e.phase_pred[ph] = total;
    if (pp.measured > 0 && total > 0) {
      double l = std::log(total / pp.measured);
      e.loss += l * l;
    }
  }
  return e;
}

struct Param {
  const char* key;
  double lo, hi;
  bool log_scale;
};
const Param kParams[] = {
    {"efficiency.gemm", 0.005, 1.5, true},     {"efficiency.attention", 0.005, 1.5, true},
    {"efficiency.memory", 0.005, 1.5, true},   {"efficiency.elementwise", 0.005, 1.5, true},
    {"efficiency.dequant", 0.05, 16.0, true},  {"efficiency.scalar", 0.005, 1.5, true},
    {"efficiency.int_dot", 0.005, 1.5, true},  {"efficiency.int8_dot", 0.005, 1.5, true},
    {"efficiency.int_dot_gemv", 0.005, 1.5, true}, {"efficiency.int8_dot_gemv", 0.005, 1.5, true},
    {"efficiency.gemv", 0.005, 1.5, true},
    {"launch_overhead_us", 0.0, 200.0, false},
    // The CPU cost model's size dependences (0 = flat; `lathe probe` measures them).
    {"gemm_half_rows", 0.0, 1024.0, false},    {"int_dot_half_k", 0.0, 8192.0, false},
    {"int8_dot_half_k", 0.0, 8192.0, false},   {"int_dot_half_rows", 0.0, 1024.0, false},
    {"int8_dot_half_rows", 0.0, 1024.0, false}, {"int_dot_gemv_half_k", 0.0, 8192.0, false},
    {"int8_dot_gemv_half_k", 0.0, 8192.0, false},
    // How far compute and memory time overlap (1: they add; large: the max).
    {"roofline_exponent", 1.0, 16.0, false},
};

double get(const Target& t, const char* key) {
  return get_field(t, *find_target_field(key));
}
void set(Target& t, const char* key, double v) {
  set_field(t, *find_target_field(key), v);
}

std::vector<PhaseError> phase_errors(const std::vector<Prepared>& runs, const Target& before,
                                     const Target& after) {
  std::vector<PhaseError> out;
  for (const Prepared& p : runs) {
    Eval b = evaluate(p, before), a = evaluate(p, after);
    for (int ph = 0; ph < 2; ++ph) {
      if (ph == 1 && p.run->decode_steps == 0) continue;
      if (p.phase[ph].measured <= 0) continue;
      out.push_back({p.run->label, ph == 0 ? "prefill" : "decode", p.phase[ph].measured,
                     b.phase_pred[ph], a.phase_pred[ph]});
    }
  }
  return out;
}

}  // namespace

double predict_phase(const MeasuredRun& run, Phase phase, const Target& t) {
  Prepared p = prepare(run);
  return evaluate(p, t).phase_pred[phase == Phase::prefill ? 0 : 1];
}

double mean_abs_error(const std::vector<PhaseError>& e, bool after) {
  if (e.empty()) return 0;
  double s = 0;
  for (const PhaseError& x : e)
    s += std::fabs((after ? x.after_s : x.before_s) - x.measured_s) / x.measured_s;
  return s / double(e.size());
}

CalibrationResult calibrate(const Target& start, const std::vector<MeasuredRun>& train,
                            const std::vector<MeasuredRun>& test, const Target* before) {
  if (train.empty()) throw Error("calibrate: no training runs");
  std::vector<Prepared> tr, te;
  for (const MeasuredRun& r : train) tr.push_back(prepare(r));
  for (const MeasuredRun& r : test) te.push_back(prepare(r));
  bool timed = false;
  for (const Prepared& p : tr)
    for (int ph = 0; ph < 2; ++ph) timed |= p.phase[ph].measured > 0 && (ph == 0 || p.run->decode_steps > 0);
  if (!timed) throw Error("calibrate: every training run's measured times are 0; nothing to fit");
  CalibrationResult res;
  auto loss = [&](const Target& t) {
    ++res.evaluations;
    double l = 0;
    for (const Prepared& p : tr) l += evaluate(p, t).loss;
    return l;
  };
  Target cur = start;
  // Start from the values the factors stand for (an unset GEMV factor: the GEMMs'),
  // inside the fitted ranges.
  for (const Param& p : kParams)
    set(cur, p.key, std::clamp(effective_field(cur, *find_target_field(p.key)), p.lo, p.hi));
  double best = loss(cur);
  std::vector<bool> used(std::size(kParams), false);
  for (size_t i = 0; i < std::size(kParams); ++i) {
    Target probe = cur;
    const Param& p = kParams[i];
    double v = get(cur, p.key);
    // Move away from the bound the value sits at (a factor at its lower bound, as
    // earlier calibrations often leave one, is probed upwards).
    double w = std::clamp(p.log_scale ? v * 0.5 : v + 10.0, p.lo, p.hi);
    if (w == v) w = std::clamp(p.log_scale ? v * 2.0 : v - 10.0, p.lo, p.hi);
    set(probe, p.key, w);
    used[i] = std::fabs(loss(probe) - best) > 1e-12 * std::max(1.0, best);
  }
  auto to_u = [](const Param& p, double v) { return p.log_scale ? std::log(v) : v; };
  auto from_u = [](const Param& p, double u) { return p.log_scale ? std::exp(u) : u; };
  // Coordinate descent, each round followed by a pattern move (Hooke-Jeeves): pairs
  // such as a factor and its half-size trade off along a valley that single
  // coordinates only zig-zag down; stepping along the round's overall move (x1, x2,
  // x4, ... while the loss falls) follows it.
  auto u_of = [&](const Target& t) {
    std::vector<double> u(std::size(kParams));
    for (size_t i = 0; i < u.size(); ++i) u[i] = to_u(kParams[i], get(t, kParams[i].key));
    return u;
  };
  auto moved = [&](const std::vector<double>& from, const std::vector<double>& to, double alpha) {
    Target t = cur;
    for (size_t i = 0; i < from.size(); ++i) {
      if (!used[i]) continue;
      const Param& p = kParams[i];
      double u = std::clamp(to[i] + alpha * (to[i] - from[i]), to_u(p, p.lo), to_u(p, p.hi));
      set(t, p.key, from_u(p, u));
    }
    return t;
  };
  for (int round = 0; round < 100; ++round) {
    double round_start = best;
    std::vector<double> u_start = u_of(cur);
    for (size_t i = 0; i < std::size(kParams); ++i) {
      if (!used[i]) continue;
      const Param& p = kParams[i];
      double ulo = to_u(p, p.lo), uhi = to_u(p, p.hi);
      auto at = [&](double u) {
        Target t = cur;
        set(t, p.key, from_u(p, u));
        return loss(t);
      };
      // Coarse grid, then golden section between the best point's neighbours.
      const int n = 17;
      double best_u = to_u(p, get(cur, p.key)), best_l = best;
      for (int k = 0; k < n; ++k) {
        double u = ulo + (uhi - ulo) * double(k) / double(n - 1);
        double l = at(u);
        if (l < best_l - 1e-15 * std::max(1.0, best_l)) best_l = l, best_u = u;
      }
      double step = (uhi - ulo) / double(n - 1);
      double a = std::max(ulo, best_u - step), b = std::min(uhi, best_u + step);
      const double phi = 0.5 * (std::sqrt(5.0) - 1.0);
      double c = b - phi * (b - a), d = a + phi * (b - a);
      double fc = at(c), fd = at(d);
      for (int it = 0; it < 20; ++it) {
        if (fc < fd) {
          b = d, d = c, fd = fc;
          c = b - phi * (b - a);
          fc = at(c);
        } else {
          a = c, c = d, fc = fd;
          d = a + phi * (b - a);
          fd = at(d);
        }
      }
      if (fc < best_l) best_l = fc, best_u = c;
      if (fd < best_l) best_l = fd, best_u = d;
      if (best_l < best) {
        set(cur, p.key, from_u(p, best_u));
        best = best_l;
      }
    }
    if (std::getenv("LATHE_DEBUG")) std::fprintf(stderr, "calibrate: round %d loss %.9g\n", round, best);
    if (round_start - best <= 1e-9 * std::max(1e-12, round_start)) break;
    std::vector<double> u_end = u_of(cur);
    for (double alpha = 1; alpha <= 64; alpha *= 2) {
      Target t = moved(u_start, u_end, alpha);
      double l = loss(t);
      if (!(l < best)) break;
      cur = t;
      best = l;
    }
  }
  // A factor no kernel depends on keeps the value it came with (not the clamped or
  // effective one: a GEMV factor left at 0 follows the fitted GEMM factor).
  for (size_t i = 0; i < std::size(kParams); ++i)
    if (!used[i]) set(cur, kParams[i].key, get(start, kParams[i].key));
  res.fitted = cur;
  for (size_t i = 0; i < std::size(kParams); ++i) {
    const Param& p = kParams[i];
    const double after = get(cur, p.key);
    const bool at_bound = used[i] && (after >= p.hi * (1 - 1e-9) || (p.log_scale && after <= p.lo * (1 + 1e-9)));
    res.factors.push_back({p.key, get(start, p.key), after, bool(used[i]), at_bound});
  }
  res.train = phase_errors(tr, before ? *before : start, cur);
  res.test = phase_errors(te, before ? *before : start, cur);
  res.train_before = mean_abs_error(res.train, false);
  res.train_after = mean_abs_error(res.train, true);
  res.test_before = mean_abs_error(res.test, false);
  res.test_after = mean_abs_error(res.test, true);
  return res;
}

}  // namespace lathe
