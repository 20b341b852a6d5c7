#include "simulator/step_cost.h"

#include <algorithm>
#include <cmath>

#include "ir/assert.h"
#include "ir/buffers.h"
#include "simulator/node_groups.h"

namespace lathe {

namespace {

bool same_cost(const NodeCost& a, const NodeCost& b) {
  auto eq = [](double x, double y) {
    return std::fabs(x - y) <= 1e-12 * std::max(std::fabs(x), std::fabs(y));
  };
  return eq(a.flops, b.flops) && eq(a.bytes, b.bytes) && eq(a.compute_s, b.compute_s) &&
         eq(a.memory_s, b.memory_s) && eq(a.network_s, b.network_s);
}

}  // namespace

size_t StepCoster::KeyHash::operator()(const Key& k) const {
  uint64_t h = k.what;
  for (int64_t v : {k.b, k.s, k.t}) h = (h ^ uint64_t(v)) * 0x100000001b3ULL + (h >> 29);
  return size_t(h);
}

StepCoster::StepCoster(const Graph& prefill, const Graph& decode, const Target& t,
                       const CostOptions& o)
    : prefill_(prefill), decode_(decode), t_(t), o_(o) {
  parts_[0] = classify(prefill_);
  parts_[1] = classify(decode_);
  for (ValueId v : decode_.values_of(ValueKind::state))
    kv_bytes_per_token_ += value_bytes(decode_.value(v), {1, 1, 1});
  kv_block_ = kv_block_of(decode_);
}

StepCoster::Part StepCoster::classify(const Graph& g) {
  Part p;
  p.g = &g;
  NodeGroups gr = group_nodes(g);
  for (size_t i = 0; i < gr.representative.size(); ++i) {
    CostForm form = cost_form(g, g.node(gr.representative[i]));
    // Probe bindings: T changes alone; then B x S kept while B and S trade places.
    NodeCost base = cost_node(form, t_, {2, 3, 64}, o_);
    NodeCost longer = cost_node(form, t_, {2, 3, 640}, o_);
    NodeCost flat = cost_node(form, t_, {6, 1, 64}, o_);
    Kind k = Kind::token;
    if (!same_cost(base, longer))
      k = Kind::context;
    else if (!same_cost(base, flat))
      k = Kind::sequence;
    p.members.push_back({gr.representative[i], gr.count[i], k, std::move(form)});
  }
  return p;
}

double StepCoster::piece(int part, Kind kind, int64_t b, int64_t s, int64_t t, bool launch) {
  Key key{uint8_t(part * 8 + int(kind) * 2 + (launch ? 1 : 0)), b, s, t};
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  const Part& p = parts_[part];
  Bindings bind{b, s, t};
  double total = 0;
  for (const Member& m : p.members) {
    if (m.kind != kind) continue;
    NodeCost c = cost_node(m.form, t_, bind, o_);
    ++evaluations_;
    total += double(m.count) * (launch ? c.time_s : c.time_s - c.launch_s);
  }
  cache_.emplace(key, total);
  return total;
}

double StepCoster::step_s(const StepShape& s) {
  int64_t tokens = s.decode_seqs, seqs = s.decode_seqs;
  for (const PrefillChunk& c : s.chunks) {
    LATHE_ASSERT(c.tokens > 0 && c.count > 0 && c.context >= c.tokens, "bad prefill chunk");
    tokens += c.tokens * c.count;
    seqs += c.count;
  }
  if (tokens == 0) return 0;
  int64_t emitting = s.emitting >= 0 ? s.emitting : seqs;
  // Steps with prompt tokens run the prefill graph's kernels (GEMM-shaped), pure
  // decode steps the decode graph's.
  int part = s.chunks.empty() ? 1 : 0;
  double time = piece(part, Kind::token, tokens, 1, 1, true);
  if (emitting > 0) time += piece(part, Kind::sequence, emitting, 1, 1, true);
  if (s.decode_seqs > 0) {
    int64_t mean_context = (s.decode_context_sum + s.decode_seqs / 2) / s.decode_seqs;
    time += piece(1, Kind::context, s.decode_seqs, 1, std::max<int64_t>(1, mean_context), true);
  }
  bool first = true;
  for (const PrefillChunk& c : s.chunks) {
    time += piece(0, Kind::context, c.count, c.tokens, c.context, first);
    first = false;
  }
  return time;
}

double StepCoster::decode_s(int64_t seqs, int64_t context) {
  StepShape s;
  s.decode_seqs = seqs;
  s.decode_context_sum = seqs * context;
  return step_s(s);
}

double StepCoster::decode_sum_s(int64_t seqs, int64_t first_context, int64_t steps) {
  // Above kExactSteps, the mean of kExactSteps evenly spaced steps (the midpoints of
  // equal runs; a step's cost grows smoothly with its context) times the count, so 2^24
  // generated tokens do not take minutes.
  constexpr int64_t kExactSteps = 4096;
  double sum = 0;
  if (steps <= kExactSteps) {
    for (int64_t i = 0; i < steps; ++i) sum += decode_s(seqs, first_context + i);
    return sum;
  }
  for (int64_t j = 0; j < kExactSteps; ++j)
    sum += decode_s(seqs, first_context + (2 * j + 1) * steps / (2 * kExactSteps));
  return sum / double(kExactSteps) * double(steps);
}

double StepCoster::prefill_s(int64_t seqs, int64_t prompt) {
  StepShape s;
  s.chunks.push_back({prompt, prompt, seqs});
  return step_s(s);
}

}  // namespace lathe
