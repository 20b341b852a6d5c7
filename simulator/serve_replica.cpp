#include "simulator/serve_replica.h"

#include "ir/assert.h"

namespace lathe {

Replica::Replica(ServeState& st, int index)
    : st_(st), index_(index), slot_used_(size_t(st.o.max_batch), 0) {}

void Replica::enqueue(int32_t r, double now) {
  st_.enqueued_s[size_t(r)] = now;
  waiting_.insert({st_.reqs[size_t(r)].priority, r});
}

void Replica::dispatch(int32_t r, double now) {
  size_t erased = waiting_.erase({st_.reqs[size_t(r)].priority, r});
  LATHE_ASSERT(erased == 1, "dispatching a request that is not waiting");
  RequestRecord& rec = st_.recs[size_t(r)];
  rec.queued_s += now - st_.enqueued_s[size_t(r)];
  if (rec.dispatch_s < 0) rec.dispatch_s = now;
}

void Replica::finish_request(int32_t r, double now) {
  RequestRecord& rec = st_.recs[size_t(r)];
  LATHE_ASSERT(rec.finish_s < 0, "request finished twice");
  rec.finish_s = now;
  ++st_.finished;
}

int Replica::take_slot() {
  for (size_t i = 0; i < slot_used_.size(); ++i)
    if (!slot_used_[i]) {
      slot_used_[i] = 1;
      return int(i);
    }
  LATHE_ASSERT(false, "no free batch slot");
  return -1;
}

void Replica::free_slot(int s) {
  slot_used_[size_t(s)] = 0;
}

void Replica::span(int32_t r, int slot, double start, double end, bool prefill) {
  if (st_.spans) st_.spans->push_back({r, index_, slot, start, end, prefill});
}

}  // namespace lathe
