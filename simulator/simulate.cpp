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

SimResult simulate(const Graph& prefill, const Graph& decode, const Target& t, const Workload& w,
                   const SimOptions& o) {
  return PreparedPlan(prefill, decode).simulate(t, w, o);
}

}  // namespace lathe
