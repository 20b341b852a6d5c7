// Discrete-event simulation of serving: one or more replicas of a plan, a router,
// a request stream, and a batching scheduler per replica. Every step's time comes
// from the per-kernel cost model at that step's actual batch and contexts
// (StepCoster), so the figures change with the plan (formats, fusion, layout, tp).
//
// Events are arrivals and step ends; between events nothing changes, so the
// simulation advances from one to the next. A replica runs one step at a time: at a
// step end its scheduler retires and admits sequences and starts the next step, or
// idles until an arrival (or, for dynamic batching, the batch timeout).
//
// Conventions (docs/scenarios.md):
//  - TTFT = first token time - arrival; the first token comes out of the step that
//    finishes the sequence's prefill;
//  - TPOT = (finish - first token) / (output - 1), for requests with output > 1;
//  - E2E  = finish - arrival; queue time = time spent in a waiting queue (again after
//    a preemption);
//  - priority 0 is the most urgent class; within a class, first come first served.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/scenario.h"
#include "ir/target.h"
#include "simulator/requests.h"
#include "simulator/serve_metrics.h"

namespace lathe {

struct RequestRecord {
  double dispatch_s = -1;  // first time a batch took it (continuous: admission)
  double first_token_s = -1;
  double finish_s = -1;
  double queued_s = 0;  // total time in a waiting queue
  int replica = -1;
  int preemptions = 0;
};

// A request in a batch slot, for the timeline: its prefill, or its decode.
struct SlotSpan {
  int32_t request = 0;
  int replica = 0, slot = 0;
  double start_s = 0, end_s = 0;
  bool prefill = false;
};

struct StepSpan {
  int replica = 0;
  double start_s = 0, end_s = 0;
  int64_t decode_seqs = 0, prefill_tokens = 0;
};

struct ServeRunOptions {
  bool ideal = false;         // pure roofline step costs
  bool record_spans = false;  // fill spans and step_spans (for --trace)
  int64_t max_step_spans = 20000;
  int series_buckets = 400;  // resolution of the time series
  // Called now and then with the fraction of requests finished (progress display).
  std::function<void(double)> progress;
};

struct ServeResult {
  std::vector<Request> requests;
  std::vector<RequestRecord> records;
  std::vector<ClassStats> classes;  // one per priority class present, most urgent first
  ClassStats all;
  double start_s = 0, end_s = 0;  // first arrival, last finish
  double requests_per_s = 0, output_tokens_per_s = 0, input_tokens_per_s = 0;
  double goodput_requests_per_s = 0, goodput_tokens_per_s = 0, slo_fraction = 1;
  int64_t steps = 0, preemptions = 0;
  int64_t kv_capacity_tokens = 0;  // per replica
  int64_t replicas = 1;
  // The most sequences a replica runs at once: ServeOptions::max_batch, or fewer where
  // the KV cache left beside that many sequences' activations holds fewer (runnable_batch).
  int64_t max_batch = 0;
  double kv_bytes_per_token = 0;
  double weight_bytes = 0, activation_bytes = 0;  // per replica (one device)
  TimeSeries queue, running, kv_tokens, in_system;
  // Little's law over the whole run: time-average in system vs lambda x mean E2E, with
  // lambda the requests over the run's span (first arrival to last finish, not the
  // arrival rate), and the same for the waiting queue. Exact when the run starts and ends
  // empty: a check that the time series agree with the per-request records.
  double little_L = 0, little_lambda_W = 0, little_Lq = 0, little_lambda_Wq = 0;
  std::vector<SlotSpan> spans;
  std::vector<StepSpan> step_spans;
  int64_t cost_evaluations = 0, cost_entries = 0;
};

// Tokens of KV cache one replica can hold: (memory_fraction x capacity - weights -
// activations at the largest step) / KV bytes per token, in whole blocks. Throws
// lathe::Error when the weights and activations alone do not fit.
struct KvBudget {
  double weight_bytes = 0, activation_bytes = 0, kv_bytes_per_token = 0;
  int64_t tokens = 0;
};
KvBudget kv_budget(const Graph& prefill, const Graph& decode, const Target& t,
                   const ServeOptions& o, double activation_bytes);
// An upper bound of the activations of any step the policy can run over `reqs`: its
// largest prefill (a padded batch; packed whole prompts; a step's chunks), or decode
// of max_batch sequences at the longest context (prompt + output; a padded batch's
// longest prompt + longest output).
double serve_activation_bytes(const Graph& prefill, const Graph& decode, const ServeOptions& o,
                              const std::vector<Request>& reqs);
// The largest batch up to o.max_batch whose activations (serve_activation_bytes) and
// KV cache fit beside the weights in o.memory_fraction of the device, each sequence
// holding at least its whole KV (request-level batching), its prompt (continuous) or its
// first chunk (chunked) in whole blocks;
// 1 when none does (kv_budget then says what does not fit).
int64_t runnable_batch(const Graph& prefill, const Graph& decode, const Target& t, const ServeOptions& o,
                       const std::vector<Request>& reqs);

// Runs the simulation. `prefill` and `decode` are one plan's lowered graphs (their B,
// S, T attributes are ignored). Throws lathe::Error on options that cannot work (a
// request larger than the KV capacity, a zero batch...).
ServeResult simulate_serving(const Graph& prefill, const Graph& decode, const Target& t,
                             std::vector<Request> requests, const ServeOptions& o,
                             const ServeRunOptions& run = {});

// Checks options that do not depend on the plan; throws lathe::Error.
void validate_serve_options(const ServeOptions& o);

}  // namespace lathe
