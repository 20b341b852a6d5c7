// A retrieval-augmented request: retrieval on the CPU, preprocessing and prompt
// assembly, then prefill and decode on the accelerator, in four pipeline modes.
//
//   sequential  retrieve, preprocess, assemble, prefill base + context, decode.
//   overlapped  the accelerator prefills the base prompt while the CPU retrieves (the
//               article's asynchronous pipeline); the retrieved context is then
//               prefilled as a chunk appended at context base + context. When the
//               context is ready before the base prefill is done, the runtime either
//               lets it finish or abandons it (at a kernel boundary) and prefills
//               everything at once, whichever the cost model says ends first; so
//               overlapping never loses to sequential.
//   prefetch    retrieval was issued prefetch_lead_ms before the request (from a
//               predicted query); a share prefetch_hit of requests use it, the rest
//               retrieve as in sequential.
//   timeout     sequential, but retrieval is abandoned after timeout_ms and the
//               request is answered from the base prompt alone (the fallback).
//
// Retrieval latency is drawn (ms) as measured with retrieval_ref_threads threads and
// rescaled to the threads the runtime leaves free by Amdahl's law with parallel
// fraction f: t(n) ~ (1 - f) + f / n. Every mode sees the same draws, so modes are
// compared request by request. Requests run one at a time (the unloaded latency).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "ir/scenario.h"
#include "ir/target.h"
#include "simulator/serve_metrics.h"
#include "simulator/step_cost.h"

namespace lathe {

struct RagModeResult {
  RagMode mode = RagMode::sequential;
  Percentiles ttft, e2e;
  std::vector<double> e2e_s;       // per request, in draw order
  double fallback_share = 0;       // timeout: answered without the retrieved context
  double abandoned_share = 0;      // overlapped: base prefills abandoned
  double prefetch_used_share = 0;  // prefetch: requests that used the prefetched context
};

struct RagThreadRow {
  int64_t runtime_threads = 0, retrieval_threads = 0;
  bool advised = false;  // runtime uses 50-70% of the cores
  double retrieval_p50_s = 0;
  double sequential_e2e_p50_s = 0, overlapped_e2e_p50_s = 0;
};

struct RagResult {
  int64_t cores = 0, runtime_threads = 0, retrieval_threads = 0;
  double retrieval_scale = 1;  // latency multiplier from the reference thread count
  double base_prefill_s = 0, appended_prefill_s = 0, full_prefill_s = 0;
  double decode_s = 0, decode_base_only_s = 0;
  std::vector<RagModeResult> modes;
  std::vector<RagThreadRow> threads;
};

double amdahl_time(double parallel_fraction, double threads);

// Throws lathe::Error on options that cannot work (no thread left for retrieval...).
RagResult simulate_rag(const Graph& prefill, const Graph& decode, const Target& t,
                       const RagOptions& o, bool ideal = false);

}  // namespace lathe
