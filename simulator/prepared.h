// A lowered plan prepared for repeated costing. simulate() of one plan shape at many
// workloads (batch, prompt, generated tokens) and on many targets (what-if) repeats
// work that does not depend on either: grouping identical layers, the launch order,
// the live ranges of activations, the weight bytes, and what the cost of each kernel
// reads from the graph (its CostForm, simulator/cost.h). PreparedPlan does it once;
// each simulate() call then costs only one representative kernel per group from its
// form, at one binding in prefill and, in decode, at one binding for kernels whose
// cost does not depend on the context and three for the others (simulator/simulate.h),
// plus a few multiply-adds for the memory footprint.
//
// simulate(prefill, decode, t, w, o) is PreparedPlan(prefill, decode).simulate(t, w, o):
// the two give the same figures by construction.
//
// The peak of live activations at any bindings is precomputed as a small table: each
// activation's bytes are a monomial in B, S and T (its shape's product times its
// element size), so the bytes live at a launch position are a sum of coefficients of
// a few distinct monomials. Positions whose coefficient vector is dominated by
// another's (no larger in every monomial) can never hold the peak and are dropped.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/plan_options.h"
#include "ir/target.h"
#include "simulator/node_groups.h"
#include "simulator/simulate.h"

namespace lathe {

// Peak of simultaneously live activation bytes of one graph at any bindings, as
// peak_live_bytes(g, b) computes it.
class LivePeak {
 public:
  LivePeak() = default;
  explicit LivePeak(const Graph& g);
  double at(const Bindings& b) const;
  size_t candidate_positions() const { return rows_.size(); }

 private:
  struct Monomial {
    uint8_t b = 0, s = 0, t = 0;
  };
  std::vector<Monomial> monomials_;  // distinct monomials of activation sizes
  std::vector<std::vector<double>>
      rows_;  // per candidate position: bytes coefficient of each monomial
};

struct PreparedPhase {
  const Graph* g = nullptr;
  NodeGroups groups;
  std::vector<std::string> labels;  // kernel label of each group's representative
  std::vector<CostForm> forms;      // cost form of each group's representative
  LivePeak live;
  bool has_arena = false;  // the memory plan ran: arena_bytes at `arena_bindings`
  Bindings arena_bindings;
  double arena_bytes = 0;
};

class PreparedPlan;

// What consecutive simulate() calls of one plan on one target share. A sweep varies
// the generated tokens fastest, then the prompt, then the batch: the prefill phase
// repeats for every generation length at one (batch, prompt), and the decode kernels
// that do not read T (GEMMs, norms, KV writes) cost the same for every prompt and
// generation length at one batch. simulate() with a SimReuse gives the same figures
// as without, to the bit. One per thread; it remembers the plan and the target by
// address, so both must stay alive and unchanged while the SimReuse is in use.
struct SimReuse {
  const PreparedPlan* plan = nullptr;
  const Target* target = nullptr;
  bool ideal = false;
  Bindings prefill_bindings{-1, -1, -1};
  PhaseSummary prefill;
  int64_t decode_batch = -1;
  std::vector<char> reads_context;    // per decode group, at decode_batch
  std::vector<NodeCost> decode_cost;  // per decode group that does not read T
};

class PreparedPlan {
 public:
  // Keeps references to the graphs: they must outlive this object.
  PreparedPlan(const Graph& prefill, const Graph& decode);

  // `reuse` (optional; ignored with per-op rows) carries costs between calls.
  SimResult simulate(const Target& t, const Workload& w, const SimOptions& o = {},
                     SimReuse* reuse = nullptr) const;

  const Graph& prefill() const { return *prefill_.g; }
  const Graph& decode() const { return *decode_.g; }
  double weight_bytes() const { return weight_bytes_; }
  // Activation bytes simulate() reports at a workload: the memory plan's arena when
  // the graphs were planned for exactly these bindings, else the peak of live values.
  // With a prefill chunk (SimOptions::prefill_chunk), prefill's are the largest chunk's.
  double activation_bytes(const Workload& w, int64_t prefill_chunk = 0) const;
  // KV-cache bytes for the whole batch at the workload's final context (in whole blocks
  // for a paged layout: a sequence holds ceil(context / N) blocks of N positions).
  double kv_bytes(const Workload& w) const;

 private:
  // The prefill phase of r in chunks of `chunk` tokens (the prompt's length: one pass;
  // SimOptions::prefill_chunk).
  void prefill_pass(SimResult& r, const Target& t, const Workload& w, int64_t chunk, const CostOptions& co,
                    bool per_op) const;

  PreparedPhase prefill_, decode_;
  double weight_bytes_ = 0;
  std::vector<ValueSize> state_sizes_;  // the KV state values
  int64_t kv_block_ = 1;                 // paged:N holds whole blocks of N positions
};

}  // namespace lathe
