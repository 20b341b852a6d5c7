#include "simulator/simulate.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "ir/assert.h"
#include "ir/buffers.h"
#include "simulator/prepared.h"

namespace lathe {

double sum_max_affine(double a0, double a1, double b0, double b1, double c0, double c1, int64_t t0, int64_t t1) {
  if (t1 < t0) return 0;
  const double n = double(t1 - t0 + 1);
  // Kernels whose cost does not read the context (most of a decode step): constants.
  if (a1 == 0 && b1 == 0 && c1 == 0) return n * std::max({a0, b0, c0});
  const double k[3][2] = {{a0, a1}, {b0, b1}, {c0, c1}};
  // The pieces between the crossings of the three lines (at most three crossings),
  // kept sorted by insertion in a fixed array.
  int64_t cuts[5] = {t0 - 1};
  int nc = 1;
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j) {
      double db = k[i][1] - k[j][1];
      if (std::fabs(db) < 1e-300) continue;
      double x = (k[j][0] - k[i][0]) / db;
      if (!(x > double(t0) && x < double(t1))) continue;
      int64_t c = int64_t(std::floor(x));
      int at = nc;
      while (at > 0 && cuts[at - 1] > c) --at;
      if (cuts[at - 1] == c) continue;  // already a cut (every crossing is above t0 - 1)
      for (int m = nc; m > at; --m) cuts[m] = cuts[m - 1];
      cuts[at] = c;
      ++nc;
    }
  if (cuts[nc - 1] != t1) cuts[nc++] = t1;
  double total = 0;
  for (int s = 0; s + 1 < nc; ++s) {
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

SimResult simulate(const Graph& prefill, const Graph& decode, const Target& t, const Workload& w,
                   const SimOptions& o) {
  return PreparedPlan(prefill, decode).simulate(t, w, o);
}

std::optional<Format> layer_weight_format(const Graph& g) {
  for (ValueId v : g.values_of(ValueKind::weight))
    if (g.value(v).shape.size() == 2 && g.value(v).name.starts_with("layers.0.")) return g.value(v).format;
  return std::nullopt;
}

}  // namespace lathe
