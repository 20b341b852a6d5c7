// lathe advise: the plan parameters people copy from blog posts (max batch, weight
// and KV formats, KV layout, tensor-parallel degree), computed for one model on one
// machine from an internal sweep, each with its reason and runner-up.
//
// 1. Sweep weight format x KV dtype x TP degree x batch (a grid of powers of two and
//    their 1.5 multiples, ending at max_batch, default 4096) at the request's prompt
//    and generation lengths, under "fits in memory" and the SLOs.
// 2. Score each configuration by its feasible row with the most generated tokens/s
//    per device (tokens/s / tp: the throughput a GPU-hour buys).
// 3. The best configuration is the recommendation; for each parameter the runner-up
//    is the best configuration with another value of that parameter.
// 4. For the winner, sweep the KV layouts, then find its exact max batch between
//    grid points and say what stops the next batch (memory, TPOT SLO, TTFT SLO).
//
// Accuracy is not modelled: a quantized format is recommended on speed alone.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sweep/sweep.h"

namespace lathe {

struct AdviseRequest {
  std::string model, hardware;  // names or paths; hardware may carry +key=value overrides
  int64_t prompt = 512, gen = 128;
  std::optional<double> slo_ttft_ms, slo_tpot_ms;
  int threads = 0;
  int64_t max_batch = 4096;  // top of the batch grid
};

struct Recommendation {
  std::string parameter;  // "max batch", "weights", "KV dtype", "KV layout", "TP degree"
  std::string value, runner_up, reason;
};

struct Advice {
  std::vector<Recommendation> items;
  SweepRow plan;                     // the recommended configuration at its max batch
  std::optional<SweepRow> best_row;  // its row with the most tokens/s per device (usually = plan)
  int64_t plans = 0;                 // plans costed
  int shapes = 0;
  double seconds = 0;
};

// Throws lathe::Error when no configuration meets the constraints (with the closest
// figures found).
Advice advise(const AdviseRequest& r);

}  // namespace lathe
