// Expert parallelism for MoE decode: experts placed over `gpus` devices, attention
// data-parallel (each device holds the non-expert weights and decodes batch / gpus of
// the sequences), tokens sent to the devices of their top-k experts and back.
//
// Per MoE layer and sampled routing step (tokens draw top_k distinct experts with the
// load distribution: uniform, Zipf with a skew, or a measured histogram):
//   router    the moe_router kernel (its own cost) on one device's tokens;
//   dispatch  all-to-all of token rows to the experts' devices: each device's time
//             is (bytes sent + bytes received) / link bandwidth, plus (gpus - 1)
//             latency steps; the slowest device sets the time;
//   experts   each device runs the expert GEMMs of its experts with the rows routed
//             to them as one grouped launch (the plan's own expert kernels, costed for
//             that many experts at their mean rows, as `simulate` costs them); the
//             slowest device sets the time;
//   combine   the all-to-all back.
// The decode step = the non-expert kernels at batch / gpus + layers x the mean MoE
// layer time over the samples (a prefill pass likewise, with batch x prompt tokens:
// there the expert GEMMs are compute-bound and load imbalance shows).
//
// Placements: round-robin (expert e on device e mod gpus, as the article does);
// balanced (at most ceil(E / gpus) experts per device, chosen by a search that starts
// from round-robin and from longest-processing-time-first and swaps experts while the
// simulated layer time on the routing samples drops, so it never loses to
// round-robin on them; each candidate is costed incrementally on the samples where its
// experts have rows, and the search stops after 2^26 sample evaluations); replicated (balanced, plus copies of the hottest experts on
// a second device, kept only where each lowers the layer time by 0.1% or more, the device chosen among the 16
// least busy; tokens use the copy on their own device, else alternate between copies).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "ir/scenario.h"
#include "ir/target.h"

namespace lathe {

struct PlacementResult {
  PlacementKind kind = PlacementKind::round_robin;
  std::vector<std::vector<int>> experts_on_gpu;  // copies included
  std::vector<double> gpu_load_share;            // of the token-expert pairs
  std::vector<double> gpu_expert_s;              // mean expert time per layer per device
  double router_s = 0, dispatch_s = 0, experts_s = 0, combine_s = 0;  // per MoE layer (means)
  double other_s = 0;             // non-expert kernels of one decode step
  double step_s = 0;              // one decode step
  double speedup = 1;             // round-robin step / this step
  double extra_expert_bytes = 0;  // most copied-expert weight bytes on one device
};

struct MoeBatchResult {
  int64_t batch = 1;
  std::vector<PlacementResult> placements;  // round-robin, balanced, replicated
  bool search_stopped = false;  // the balanced search spent its budget before converging
};

struct MoeResult {
  int64_t experts = 0, top_k = 0, gpus = 0, layers = 0;
  std::vector<double> expert_share;  // routing probability of each expert
  double expert_bytes = 0;           // weights of one expert in one layer
  std::vector<MoeBatchResult> batches;
};

// Routing probabilities of the experts for a load kind (Zipf ranks are assigned to
// experts by a seeded shuffle, so the hot experts are not the first ones).
std::vector<double> expert_shares(const MoeOptions& o, int64_t experts);

// `prefill` and `decode` are a plan's lowered MoE graphs (tp 1); o.prompt > 0 costs a
// prefill pass of that many tokens per sequence instead of a decode step. Throws lathe::Error for a
// dense model, tp > 1, no interconnect, or a histogram of the wrong length.
MoeResult simulate_moe(const Graph& prefill, const Graph& decode, const Target& t,
                       const MoeOptions& o, bool ideal = false);

}  // namespace lathe
