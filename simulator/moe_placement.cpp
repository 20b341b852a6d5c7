#include "simulator/moe_placement.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <unordered_map>
#include <numeric>

#include "ir/assert.h"
#include "ir/buffers.h"
#include "simulator/cost.h"
#include "simulator/node_groups.h"
#include "simulator/random.h"

namespace lathe {

std::vector<double> expert_shares(const MoeOptions& o, int64_t experts) {
  std::vector<double> p(size_t(experts), 1.0);
  if (o.load == ExpertLoadKind::histogram) {
    if (int64_t(o.histogram.size()) != experts)
      throw Error("moe: the histogram has " + std::to_string(o.histogram.size()) +
                  " entries; the model has " + std::to_string(experts) + " experts");
    p = o.histogram;
    for (double x : p)
      if (!std::isfinite(x) || x < 0) throw Error("moe: histogram entries must be finite numbers >= 0");
  } else if (o.load == ExpertLoadKind::zipf) {
    std::vector<size_t> rank(p.size());
    std::iota(rank.begin(), rank.end(), 0);
    Random rng(o.seed ^ 0x5eedULL);
    for (size_t i = rank.size(); i > 1; --i)
      std::swap(rank[i - 1], rank[size_t(rng.integer(0, int64_t(i) - 1))]);
    for (size_t e = 0; e < p.size(); ++e) p[e] = 1.0 / std::pow(double(rank[e] + 1), o.zipf_skew);
  }
  double sum = std::accumulate(p.begin(), p.end(), 0.0);
  if (!(sum > 0)) throw Error("moe: the expert load histogram sums to zero");
  if (!std::isfinite(sum)) throw Error("moe: the expert load histogram's sum overflows; scale it down");
  for (double& x : p) x /= sum;
  return p;
}

namespace {

using Placement = std::vector<std::vector<int>>;  // devices holding each expert

// The plan's expert kernels on one device: the device's touched experts run as one
// grouped GEMM launch, as `simulate` costs them (its waves count every touched
// expert's tiles; costing the experts one by one counted each expert's waves alone,
// 15% slower prefill at one GPU). A copy of the decode graph whose expert weights,
// expert ids and gates have n experts and top_k = n computes n experts of `rows` rows
// each (per binding B = rows); a device's experts are costed at their mean rows.
class ExpertCost {
 public:
  ExpertCost(const Graph& decode, const Target& t, const CostOptions& o)
      : decode_(decode), t_(t), o_(o), layers_(std::max<int64_t>(1, decode.attrs.i("layers", 1))) {
    for (NodeId id : decode.topo_order()) {
      const Node& n = decode.node(id);
      if (n.kind != OpKind::expert_matmul) continue;
      auto p = gemm_parts(n.kind, n.attrs, n.inputs.size());
      LATHE_ASSERT(p.has_value(), "bad expert node");
      for (int w = 0; w < p->num_weights; ++w) {
        const Value& wv = decode.value(n.inputs[size_t(p->first_weight + w)]);
        expert_bytes_ += value_bytes(wv, {1, 1, 1}) /
                         double(std::max<int64_t>(1, wv.shape[0].eval({1, 1, 1}))) / double(layers_);
      }
    }
    const Graph& g1 = graph(1);
    NodeGroups gr = group_nodes(g1);
    for (size_t i = 0; i < gr.representative.size(); ++i)
      if (g1.node(gr.representative[i]).kind == OpKind::expert_matmul)
        nodes_.push_back({gr.representative[i], double(gr.count[i]) / double(layers_)});
    for (const auto& [id, per_layer] : nodes_)
      launch_ += per_layer * cost_node(g1, g1.node(id), t_, {1, 1, 1}, o_).launch_s;
  }
  // Busy time of one layer's expert kernels on a device whose `experts` touched experts
  // hold `rows` token-expert pairs in all (no launch gaps): at the whole numbers of rows
  // around the mean, interpolated.
  double busy(int64_t experts, int64_t rows) {
    if (experts <= 0 || rows <= 0) return 0;
    const std::pair<int64_t, int64_t> key{experts, rows};
    auto it = busy_cache_.find(key);
    if (it != busy_cache_.end()) return it->second;
    const double mean = double(rows) / double(experts);
    const int64_t lo = std::max<int64_t>(1, int64_t(std::floor(mean)));
    const double f = mean - double(lo), at_lo = busy_each(experts, lo);
    const double s = f > 0 ? at_lo + f * (busy_each(experts, lo + 1) - at_lo) : at_lo;
    busy_cache_.emplace(key, s);
    return s;
  }
  double launch() const { return launch_; }  // of one layer's expert kernels on a device
  double expert_bytes() const { return expert_bytes_; }

 private:
  // The decode graph with n experts, each token routed to all n.
  const Graph& graph(int64_t n) {
    auto it = graphs_.find(n);
    if (it != graphs_.end()) return it->second;
    Graph g = decode_;
    for (NodeId id : decode_.topo_order()) {
      const Node& node = decode_.node(id);
      if (node.kind != OpKind::expert_matmul) continue;
      auto p = gemm_parts(node.kind, node.attrs, node.inputs.size());
      auto resize = [&](ValueId v, size_t dim) {
        Shape& s = g.value_mut(v).shape;
        if (s.size() > dim) s[dim] = Dim::c(n);
      };
      for (int w = 0; w < p->num_weights; ++w) resize(node.inputs[size_t(p->first_weight + w)], 0);
      resize(node.inputs[size_t(p->idx)], 2);
      if (p->gates >= 0) resize(node.inputs[size_t(p->gates)], 2);
      if (g.value(node.inputs[size_t(p->x)]).shape.size() == 4) resize(node.inputs[size_t(p->x)], 2);
      for (ValueId out : node.outputs)
        if (g.value(out).shape.size() == 4) resize(out, 2);
    }
    return graphs_.emplace(n, std::move(g)).first->second;
  }
  // n experts of `each` rows in one launch, launch excluded.
  double busy_each(int64_t n, int64_t each) {
    const std::pair<int64_t, int64_t> key{n, each};
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    const Graph& g = graph(n);
    double s = 0;
    for (const auto& [id, per_layer] : nodes_) {
      NodeCost c = cost_node(g, g.node(id), t_, {each, 1, 1}, o_);
      s += per_layer * (c.time_s - c.launch_s);
    }
    cache_.emplace(key, s);
    return s;
  }

  const Graph& decode_;
  const Target& t_;
  CostOptions o_;
  int64_t layers_;
  std::map<int64_t, Graph> graphs_;
  std::vector<std::pair<NodeId, double>> nodes_;
  double launch_ = 0, expert_bytes_ = 0;
  std::map<std::pair<int64_t, int64_t>, double> cache_;
  struct PairHash {
    size_t operator()(const std::pair<int64_t, int64_t>& p) const {
      return std::hash<uint64_t>()(uint64_t(p.first) * 0x9e3779b97f4a7c15ULL ^ uint64_t(p.second));
    }
  };
  std::unordered_map<std::pair<int64_t, int64_t>, double, PairHash> busy_cache_;
};

// Token-expert pairs of a sample from one device to one expert (non-zero counts only).
struct Routed {
  int32_t origin, expert;
  int64_t pairs;
};

struct Setup {
  int64_t experts, top_k, gpus, batch;
  double row_bytes, link, latency, router_s;
  // Per sample: token-expert pairs by (device the token is on, expert), [gpus x experts].
  std::vector<std::vector<int64_t>> samples;
  ExpertCost* cost;
  // The same counts, the non-zero ones in (device, expert) order: a sample of batch 64
  // and top-8 over 64 devices and 256 experts has at most 512 of 16384.
  std::vector<std::vector<Routed>> routed;

  void index_samples() {
    routed.assign(samples.size(), {});
    for (size_t k = 0; k < samples.size(); ++k)
      for (size_t i = 0; i < samples[k].size(); ++i)
        if (samples[k][i] != 0)
          routed[k].push_back({int32_t(i / size_t(experts)), int32_t(i % size_t(experts)), samples[k][i]});
  }
};

struct Eval {
  double layer_s = 0, router_s = 0, dispatch_s = 0, experts_s = 0;
  std::vector<double> gpu_pairs, gpu_expert_s;
};

Eval evaluate(const Placement& pl, const Setup& s) {
  const size_t G = size_t(s.gpus), E = size_t(s.experts);
  Eval ev;
  ev.gpu_pairs.assign(G, 0.0);
  ev.gpu_expert_s.assign(G, 0.0);
  // rows: token-expert pairs each (device, expert) runs in the sample; only the entries a
  // sample touched are cleared after it.
  std::vector<int64_t> rows(G * E, 0), sent(G), recv(G), pairs_on(G), experts_on(G);
  std::vector<size_t> touched;
  auto run_on = [&](size_t g, size_t e, int64_t m) {
    if (m == 0) return;
    int64_t& r = rows[g * E + e];
    if (r == 0) ++experts_on[g], touched.push_back(g * E + e);
    r += m;
    pairs_on[g] += m;
  };
  for (const std::vector<Routed>& sample : s.routed) {
    std::fill(sent.begin(), sent.end(), 0);
    std::fill(recv.begin(), recv.end(), 0);
    std::fill(pairs_on.begin(), pairs_on.end(), 0);
    std::fill(experts_on.begin(), experts_on.end(), 0);
    for (const Routed& x : sample) {
      const size_t origin = size_t(x.origin), e = size_t(x.expert);
      const int64_t n = x.pairs;
      const std::vector<int>& copies = pl[e];
      if (std::find(copies.begin(), copies.end(), int(origin)) != copies.end()) {
        run_on(origin, e, n);  // the expert has a copy on the token's own device
        continue;
      }
      // Otherwise the rows are split evenly over the copies.
      int64_t each = n / int64_t(copies.size()), extra = n % int64_t(copies.size());
      for (size_t c = 0; c < copies.size(); ++c) {
        int64_t m = each + (int64_t(c) < extra ? 1 : 0);
        run_on(size_t(copies[c]), e, m);
        sent[origin] += m;
        recv[size_t(copies[c])] += m;
      }
    }
    for (size_t i : touched) rows[i] = 0;
    touched.clear();
    double slowest = 0, a2a = 0;
    for (size_t g = 0; g < G; ++g) {
      double t = s.cost->busy(experts_on[g], pairs_on[g]);
      if (pairs_on[g] > 0) t += s.cost->launch();
      ev.gpu_pairs[g] += double(pairs_on[g]);
      ev.gpu_expert_s[g] += t;
      slowest = std::max(slowest, t);
      // A full-duplex link: a device sends and receives at once, each at half the link's
      // (two-way) bandwidth, as the tensor-parallel collectives are costed.
      a2a = std::max(a2a, double(std::max(sent[g], recv[g])) * s.row_bytes / (s.link / 2));
    }
    if (G > 1) a2a += double(G - 1) * s.latency;
    ev.dispatch_s += a2a;
    ev.experts_s += slowest;
  }
  double n = double(s.routed.size());
  for (size_t g = 0; g < G; ++g) ev.gpu_pairs[g] /= n, ev.gpu_expert_s[g] /= n;
  ev.dispatch_s /= n;
  ev.experts_s /= n;
  ev.router_s = s.router_s;
  ev.layer_s =
      ev.router_s + 2 * ev.dispatch_s + ev.experts_s;  // dispatch + combine move the same rows
  return ev;
}

Placement round_robin(const Setup& s) {
  Placement p(size_t(s.experts));
  for (int64_t e = 0; e < s.experts; ++e) p[size_t(e)] = {int(e % s.gpus)};
  return p;
}

// Longest processing time first under a cap of experts per device.
Placement lpt(const Setup& s, const std::vector<double>& share, int64_t cap) {
  std::vector<size_t> order(share.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return share[a] > share[b]; });
  std::vector<double> load(size_t(s.gpus), 0.0);
  std::vector<int64_t> held(size_t(s.gpus), 0);
  Placement p(share.size());
  for (size_t e : order) {
    size_t best = size_t(s.gpus);
    for (size_t g = 0; g < load.size(); ++g)
      if (held[g] < cap && (best == size_t(s.gpus) || load[g] < load[best])) best = g;
    p[e] = {int(best)};
    load[best] += share[e];
    ++held[best];
  }
  return p;
}

bool better(const Eval& a, const Eval& b, double by = 1e-12) {
  return a.layer_s < b.layer_s * (1 - by);
}

// A copy of an expert costs its weights in every layer on one more device; it is kept
// only when it lowers the layer time by at least this fraction (copies that each saved
// 0.002% of a step piled 7 experts, 11 GB, onto one of 64 GPUs).
constexpr double kCopyMinGain = 1e-3;

// The balanced placement's local search, evaluated incrementally. Every placement it
// visits has one copy of each expert, so moving expert a from device x to device y
// changes only x's and y's figures, and only in the samples where a has rows: x loses
// a's rows and (if a had any) one touched expert, y gains them; x now sends the rows
// its own tokens routed to a (sent += n[x]) and no longer receives the others (recv -=
// t - n[x]), y the reverse. A candidate swap or move is costed on those
// samples alone, with the busiest other device of each sample kept aside (top three),
// instead of re-evaluating every sample, device and expert: 256 experts over 2 GPUs took
// 2.5 minutes the old way.
class SwapSearch {
 public:
  SwapSearch(const Setup& s, const Placement& start)
      : s_(s), G_(size_t(s.gpus)), E_(size_t(s.experts)), S_(s.samples.size()) {
    dev_.resize(E_);
    for (size_t e = 0; e < E_; ++e) dev_[e] = start[e][0];
    held_.assign(G_, 0);
    for (int d : dev_) ++held_[size_t(d)];
    total_.assign(S_ * E_, 0);
    on_.assign(E_, {});
    for (size_t k = 0; k < S_; ++k)
      for (size_t e = 0; e < E_; ++e) {
        int64_t t = 0;
        for (size_t o = 0; o < G_; ++o) t += s.samples[k][o * E_ + e];
        total_[k * E_ + e] = t;
        if (t > 0) on_[e].push_back(k);
      }
    load_.assign(S_ * G_, {});
    top_.resize(S_);
    contrib_.assign(S_, 0.0);
    for (size_t k = 0; k < S_; ++k) {
      for (size_t e = 0; e < E_; ++e) {
        const int64_t t = total_[k * E_ + e];
        if (t == 0) continue;
        const size_t d = size_t(dev_[e]);
        load_[k * G_ + d].pairs += t;
        ++load_[k * G_ + d].experts;
        for (size_t o = 0; o < G_; ++o) {
          if (o == d) continue;
          const int64_t n = s.samples[k][o * E_ + e];
          load_[k * G_ + o].sent += n;
          load_[k * G_ + d].recv += n;
        }
      }
      refresh(k);
    }
    sum_ = std::accumulate(contrib_.begin(), contrib_.end(), 0.0);
  }

  // First-improvement passes over every swap of two experts on different devices and
  // every move of one expert to a device with room (at most `cap` experts), until a
  // pass improves nothing, 50 passes, or `budget` sample evaluations are spent.
  void run(int64_t cap, int64_t budget) {
    for (int round = 0; round < 50; ++round) {
      bool improved = false;
      for (size_t a = 0; a < E_; ++a) {
        for (size_t b = a + 1; b < E_; ++b) {
          if (dev_[a] == dev_[b]) continue;
          if (spent_ > budget) return stop();
          if (try_change(a, dev_[b], int(b))) improved = true;
        }
        for (int g = 0; g < int(G_); ++g) {
          if (held_[size_t(g)] >= cap || dev_[a] == g) continue;
          if (spent_ > budget) return stop();
          if (try_change(a, g, -1)) improved = true;
        }
      }
      if (!improved) return;
    }
  }

  Placement placement() const {
    Placement p(E_);
    for (size_t e = 0; e < E_; ++e) p[e] = {dev_[e]};
    return p;
  }
  // Mean over the samples of the experts' slowest device + 2 x the busiest link (the
  // layer time less the router and the link latencies).
  double mean_contribution() const { return sum_ / double(S_); }
  bool stopped() const { return stopped_; }

 private:
  struct Load {  // one device in one sample
    int64_t pairs = 0, experts = 0, sent = 0, recv = 0;  // token-expert pairs, touched experts, rows sent, received
    int64_t traffic() const { return std::max(sent, recv); }  // rows over the busier direction
  };
  template <class T>
  struct Top3 {  // the three largest values over the devices, and their devices
    T value[3] = {};
    int dev[3] = {-1, -1, -1};
    void add(T v, int g) {
      for (int i = 0; i < 3; ++i)
        if (dev[i] < 0 || v > value[i]) {
          for (int j = 2; j > i; --j) value[j] = value[j - 1], dev[j] = dev[j - 1];
          value[i] = v, dev[i] = g;
          return;
        }
    }
    // The largest over the devices other than x and y (two of them: three suffice).
    T max_except(int x, int y) const {
      for (int i = 0; i < 3; ++i)
        if (dev[i] >= 0 && dev[i] != x && dev[i] != y) return value[i];
      return T{};
    }
  };
  struct SampleTop {
    Top3<double> busy;
    Top3<int64_t> traffic;
  };

  void stop() { stopped_ = true; }

  double busy_of(int64_t nexp, int64_t pairs) const {
    return pairs > 0 ? s_.cost->busy(nexp, pairs) + s_.cost->launch() : 0.0;
  }
  double link_s(int64_t traffic) const { return traffic > 0 ? double(traffic) * s_.row_bytes / (s_.link / 2) : 0.0; }

  void refresh(size_t k) {
    SampleTop& t = top_[k];
    t = {};
    for (size_t g = 0; g < G_; ++g) {
      const Load& l = load_[k * G_ + g];
      t.busy.add(busy_of(l.experts, l.pairs), int(g));
      t.traffic.add(l.traffic(), int(g));
    }
    contrib_[k] = t.busy.value[0] + 2 * link_s(t.traffic.value[0]);
  }

  // Expert e's rows of sample k leave device X (`from`) for device Y (`to`): X sends
  // the rows its own tokens routed to e and no longer receives the others, Y the
  // reverse.
  void shift(size_t k, size_t e, size_t X, size_t Y, Load& from, Load& to) const {
    const int64_t t = total_[k * E_ + e];
    if (t == 0) return;
    const std::vector<int64_t>& n = s_.samples[k];
    from.pairs -= t, to.pairs += t;
    --from.experts, ++to.experts;
    from.sent += n[X * E_ + e], from.recv -= t - n[X * E_ + e];
    to.recv += t - n[Y * E_ + e], to.sent -= n[Y * E_ + e];
  }

  // The samples where expert a or b (b < 0: none) has rows, merged in order.
  void affected(size_t a, int b) {
    const std::vector<size_t>& A = on_[a];
    if (b < 0) {
      merged_ = A;
      return;
    }
    const std::vector<size_t>& B = on_[size_t(b)];
    merged_.clear();
    std::set_union(A.begin(), A.end(), B.begin(), B.end(), std::back_inserter(merged_));
  }

  // Move a to device y, and b (>= 0) from y to a's device, if that lowers the layer time.
  bool try_change(size_t a, int y, int b) {
    const int x = dev_[a];
    const size_t X = size_t(x), Y = size_t(y);
    affected(a, b);
    spent_ += int64_t(merged_.size());
    double delta = 0;
    for (size_t k : merged_) {
      Load lx = load_[k * G_ + X], ly = load_[k * G_ + Y];
      shift(k, a, X, Y, lx, ly);
      if (b >= 0) shift(k, size_t(b), Y, X, ly, lx);
      const SampleTop& t = top_[k];
      const double busy =
          std::max({busy_of(lx.experts, lx.pairs), busy_of(ly.experts, ly.pairs), t.busy.max_except(x, y)});
      const int64_t traffic = std::max({lx.traffic(), ly.traffic(), t.traffic.max_except(x, y)});
      delta += busy + 2 * link_s(traffic) - contrib_[k];
    }
    // As `better`: the new layer time must be below the current one by a relative 1e-12.
    const double layer = s_.router_s + mean_contribution() +
                         (G_ > 1 ? 2 * double(G_ - 1) * s_.latency : 0.0);
    if (!(delta / double(S_) < -1e-12 * layer)) return false;
    apply(a, x, y);
    if (b >= 0) apply(size_t(b), y, x);
    for (size_t k : merged_) refresh(k);
    sum_ = std::accumulate(contrib_.begin(), contrib_.end(), 0.0);
    return true;
  }

  void apply(size_t e, int x, int y) {
    const size_t X = size_t(x), Y = size_t(y);
    for (size_t k : on_[e]) shift(k, e, X, Y, load_[k * G_ + X], load_[k * G_ + Y]);
    dev_[e] = y;
    --held_[X], ++held_[Y];
  }

  const Setup& s_;
  size_t G_, E_, S_;
  std::vector<int> dev_;
  std::vector<int64_t> held_;
  std::vector<int64_t> total_;            // [sample x expert] token-expert pairs
  std::vector<std::vector<size_t>> on_;  // samples where each expert has rows
  std::vector<Load> load_;  // [sample x device]
  std::vector<SampleTop> top_;
  std::vector<double> contrib_;
  std::vector<size_t> merged_;
  double sum_ = 0;
  int64_t spent_ = 0;
  bool stopped_ = false;
};

// Sample evaluations the balanced search may spend (each costs a few map lookups):
// about 10 passes over every swap of 256 experts on 8 devices at 256 samples.
constexpr int64_t kSearchBudget = int64_t(1) << 26;

Placement balanced(const Setup& s, const std::vector<double>& share, bool* stopped) {
  int64_t cap = (s.experts + s.gpus - 1) / s.gpus;
  Placement best = round_robin(s);
  Eval best_ev = evaluate(best, s);
  Placement l = lpt(s, share, cap);
  Eval l_ev = evaluate(l, s);
  if (better(l_ev, best_ev)) best = l, best_ev = l_ev;
  if (s.gpus == 1) return best;  // one device: nothing to place
  SwapSearch search(s, best);
  search.run(cap, kSearchBudget);
  *stopped = search.stopped();
  Placement found = search.placement();
  // The incremental bookkeeping must agree with a full evaluation of what it found.
  const Eval ev = evaluate(found, s);
  const double latencies = s.gpus > 1 ? 2 * double(s.gpus - 1) * s.latency : 0.0;
  LATHE_ASSERT(std::abs(ev.experts_s + 2 * ev.dispatch_s - latencies - search.mean_contribution()) <=
                   1e-9 * std::max(ev.layer_s, 1e-30),
               "moe-sim: the swap search's layer time disagrees with a full evaluation");
  return found;
}

constexpr int kMaxCopyTargets = 16;

Placement replicated(const Setup& s, const std::vector<double>& share, Placement base,
                     int64_t hot) {
  std::vector<size_t> order(share.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return share[a] > share[b]; });
  Eval cur = evaluate(base, s);
  for (int64_t i = 0; i < hot && i < int64_t(order.size()); ++i) {
    size_t e = order[size_t(i)];
    Placement best = base;
    Eval best_ev = cur;
    // The copy goes to one of the kMaxCopyTargets least busy devices (every device up to
    // that many): each candidate is a full evaluation, and 100 hot experts x 200 devices
    // took minutes.
    std::vector<int> devices(size_t(s.gpus));
    std::iota(devices.begin(), devices.end(), 0);
    std::stable_sort(devices.begin(), devices.end(),
                     [&](int x, int y) { return cur.gpu_expert_s[size_t(x)] < cur.gpu_expert_s[size_t(y)]; });
    int tried = 0;
    for (int g : devices) {
      if (std::find(base[e].begin(), base[e].end(), g) != base[e].end()) continue;
      if (++tried > kMaxCopyTargets) break;
      Placement c = base;
      c[e].push_back(g);
      Eval ev = evaluate(c, s);
      if (better(ev, best_ev) && better(ev, cur, kCopyMinGain)) best = c, best_ev = ev;
    }
    base = best;
    cur = best_ev;
  }
  return base;
}

}  // namespace

MoeResult simulate_moe(const Graph& prefill, const Graph& decode, const Target& t,
                       const MoeOptions& o, bool ideal) {
  MoeResult r;
  r.experts = decode.attrs.i("experts", 0);
  r.top_k = decode.attrs.i("top_k", 0);
  r.layers = std::max<int64_t>(1, decode.attrs.i("layers", 1));
  r.gpus = o.gpus;
  if (r.experts <= 0)
    throw Error("moe-sim: " + decode.attrs.s("model") + " is not a mixture-of-experts model");
  if (decode.attrs.i("tp", 1) != 1)
    throw Error("moe-sim: expert parallelism is modelled with tp 1 per device");
  if (o.gpus < 1 || o.gpus > r.experts * 8)
    throw Error("moe-sim: --gpus " + std::to_string(o.gpus) + " is outside [1, " + std::to_string(r.experts * 8) +
                "] (at most 8 GPUs per expert of " + decode.attrs.s("model") + "'s " + std::to_string(r.experts) + ")");
  if (o.gpus > 1 && t.link_bytes_per_s() <= 0)
    throw Error("moe-sim: " + t.name + " has no interconnect (nvlink_gbs and pcie_gbs are 0)");
  if (o.samples < 1) throw Error("moe-sim: samples must be >= 1");
  // Each sample holds a count per (device, expert).
  if (double(o.samples) * double(o.gpus) * double(r.experts) > double(int64_t(1) << 26))
    throw Error("moe-sim: samples x gpus x experts is above 2^26 routing counts; use fewer --samples");
  r.expert_share = expert_shares(o, r.experts);
  int64_t nonzero = 0;
  for (double x : r.expert_share) nonzero += x > 0;
  if (nonzero < r.top_k)
    throw Error("moe-sim: the expert load gives " + std::to_string(nonzero) + " expert(s) a share above 0, but every token "
                "routes to top_k = " + std::to_string(r.top_k) + " distinct experts");
  CostOptions co;
  co.ideal = ideal;
  ExpertCost cost(decode, t, co);
  r.expert_bytes = cost.expert_bytes();
  auto act = parse_dtype(decode.attrs.s("act_dtype", "bf16"));
  double row_bytes = double(decode.attrs.i("hidden")) * dtype_bits(act ? *act : DType::bf16) / 8.0;
  // A prefill pass runs the prefill graph's kernels; a decode step the decode graph's.
  const Graph& step_graph = o.prompt > 0 ? prefill : decode;
  int64_t per_seq = o.prompt > 0 ? o.prompt : 1;
  NodeGroups gr = group_nodes(step_graph);
  int64_t hot = o.hot_replicas >= 0 ? o.hot_replicas : std::max<int64_t>(1, o.gpus / 2);

  for (int64_t batch : o.batches) {
    int64_t local = (batch + o.gpus - 1) / o.gpus;  // sequences on the busiest device
    Bindings b = o.prompt > 0 ? Bindings{local, o.prompt, o.prompt} : Bindings{local, 1, o.context};
    double other = 0, router = 0;
    for (size_t i = 0; i < gr.representative.size(); ++i) {
      const Node& n = step_graph.node(gr.representative[i]);
      if (n.kind == OpKind::expert_matmul) continue;
      double c = cost_node(step_graph, n, t, b, co).time_s * double(gr.count[i]);
      if (n.kind == OpKind::moe_router)
        router += c / double(r.layers);
      else
        other += c;
    }
    Setup s{r.experts,
            r.top_k,
            o.gpus,
            batch,
            row_bytes,
            t.link_bytes_per_s(),
            t.interconnect_latency_us * 1e-6,
            router,
            {},
            &cost,
            {}};
    Random rng(o.seed + uint64_t(batch) * 7919);
    // Large token counts concentrate: fewer samples give the same means.
    int64_t tokens = batch * per_seq;
    int64_t samples = std::clamp<int64_t>((int64_t(1) << 21) / std::max<int64_t>(1, tokens),
                                          std::min<int64_t>(4, o.samples), o.samples);
    // Above 2^21 tokens a sample routes 2^21 of them, spread evenly over the sequences,
    // and scales the counts up: at that size the counts have concentrated (relative
    // spread below 0.1%), and a token-by-token draw of 2^44 tokens would not finish.
    const int64_t kMaxDrawn = int64_t(1) << 21;
    const int64_t drawn = std::min(tokens, kMaxDrawn);
    const double scale = double(tokens) / double(drawn);
    s.samples.assign(size_t(samples), std::vector<int64_t>(size_t(o.gpus * r.experts), 0));
    std::vector<double> counts(size_t(o.gpus * r.experts));
    for (std::vector<int64_t>& pairs : s.samples) {
      std::fill(counts.begin(), counts.end(), 0.0);
      for (int64_t i = 0; i < drawn; ++i) {
        int64_t tok = drawn == tokens ? i : int64_t(double(i) * scale);
        size_t origin = size_t((tok / per_seq) % o.gpus);  // sequences are spread over the devices
        std::vector<double> w = r.expert_share;            // top_k distinct experts, by weight
        for (int64_t k = 0; k < r.top_k; ++k) {
          size_t e = rng.pick(w);
          w[e] = 0;
          counts[origin * size_t(r.experts) + e] += 1;
        }
      }
      for (size_t j = 0; j < counts.size(); ++j) pairs[j] = int64_t(std::llround(counts[j] * scale));
    }
    s.index_samples();
    MoeBatchResult br;
    br.batch = batch;
    bool stopped = false;
    Placement rr = round_robin(s), bal = balanced(s, r.expert_share, &stopped);
    br.search_stopped = stopped;
    Placement rep = replicated(s, r.expert_share, bal, hot);
    const std::pair<PlacementKind, const Placement*> kinds[] = {{PlacementKind::round_robin, &rr},
                                                                {PlacementKind::balanced, &bal},
                                                                {PlacementKind::replicated, &rep}};
    for (const auto& [kind, pl] : kinds) {
      Eval ev = evaluate(*pl, s);
      PlacementResult p;
      p.kind = kind;
      p.experts_on_gpu.assign(size_t(o.gpus), {});
      std::vector<int> copies(size_t(o.gpus), 0);
      for (size_t e = 0; e < pl->size(); ++e)
        for (size_t c = 0; c < (*pl)[e].size(); ++c) {
          p.experts_on_gpu[size_t((*pl)[e][c])].push_back(int(e));
          if (c > 0) ++copies[size_t((*pl)[e][c])];
        }
      double pairs = double(tokens * r.top_k);
      for (double x : ev.gpu_pairs) p.gpu_load_share.push_back(x / pairs);
      p.gpu_expert_s = ev.gpu_expert_s;
      p.router_s = ev.router_s;
      p.dispatch_s = p.combine_s = ev.dispatch_s;
      p.experts_s = ev.experts_s;
      p.other_s = other;
      p.step_s = other + double(r.layers) * ev.layer_s;
      p.extra_expert_bytes = double(*std::max_element(copies.begin(), copies.end())) *
                             r.expert_bytes * double(r.layers);
      br.placements.push_back(std::move(p));
    }
    for (PlacementResult& p : br.placements) p.speedup = br.placements[0].step_s / p.step_s;
    r.batches.push_back(std::move(br));
  }
  return r;
}

}  // namespace lathe
