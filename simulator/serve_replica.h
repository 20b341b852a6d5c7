// One replica's scheduler, the piece of the serving simulation that batching policies
// differ in. The event loop (serve.cpp) calls start_step when the replica is free
// and finish_step when its step ends; between the two the batch is fixed.
//
// Internal to the simulator: batch_scheduler.cpp (static, dynamic) and
// continuous_scheduler.cpp (continuous, chunked) implement it.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "ir/scenario.h"
#include "simulator/requests.h"
#include "simulator/serve.h"
#include "simulator/step_cost.h"

namespace lathe {

inline constexpr double kNever = std::numeric_limits<double>::infinity();

// What the replicas of one run share.
struct ServeState {
  const std::vector<Request>& reqs;
  std::vector<RequestRecord>& recs;
  StepCoster& cost;
  const ServeOptions& o;
  int64_t kv_capacity_blocks = 0;
  std::vector<SlotSpan>* spans = nullptr;  // null unless tracing
  std::vector<double> enqueued_s;          // when each request last entered a queue
  std::vector<int64_t> generated;          // tokens generated so far (kept over preemption)
  int64_t finished = 0, preemptions = 0;
};

class Replica {
 public:
  Replica(ServeState& st, int index);
  virtual ~Replica() = default;

  void enqueue(int32_t r, double now);
  // Starts the next step at `now` and returns its duration in seconds, or a negative
  // value when there is nothing to run; then *wake_s is when to look again (kNever:
  // at the next arrival). `more_arrivals` is false once the stream has ended.
  virtual double start_step(double now, bool more_arrivals, double* wake_s) = 0;
  // Applies the step that started last: tokens, first tokens, finished requests.
  virtual void finish_step(double now) = 0;
  virtual int64_t running() const = 0;
  virtual int64_t kv_tokens() const = 0;            // KV tokens held (reserved)
  virtual int64_t step_prefill_tokens() const = 0;  // of the step in flight, for the trace
  virtual int64_t step_decode_seqs() const = 0;
  int64_t queued() const { return int64_t(waiting_.size()); }
  int64_t outstanding() const { return queued() + running(); }

 protected:
  // Moves a waiting request into a batch at `now`.
  void dispatch(int32_t r, double now);
  void finish_request(int32_t r, double now);
  int take_slot();
  void free_slot(int s);
  void span(int32_t r, int slot, double start, double end, bool prefill);
  int64_t blocks(int64_t tokens) const { return (tokens + st_.o.kv_block - 1) / st_.o.kv_block; }

  ServeState& st_;
  int index_;
  // Waiting requests by (priority, request id): class 0 first, then arrival order.
  std::set<std::pair<int, int32_t>> waiting_;
  std::vector<char> slot_used_;
};

std::unique_ptr<Replica> make_batch_replica(ServeState& st, int index, bool dynamic);
std::unique_ptr<Replica> make_continuous_replica(ServeState& st, int index, bool chunked);

}  // namespace lathe
