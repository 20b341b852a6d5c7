// Request-level batching: a batch is formed, padded to its longest prompt, and runs
// until its longest output is done; finished sequences keep their slots (a padded
// tensor batch cannot shrink) and nothing joins until the batch ends.
//   static:  forms a batch when max_batch requests wait, or when those waiting already
//            fill the KV cache (more arrivals could not join), or the stream has ended;
//   dynamic: also when the oldest waiting request has waited batch_timeout (the
//            article's dynamic batcher); members are taken from a priority queue,
//            class 0 first, first come first served within a class.
// The padded KV cache of the whole batch, batch x (longest prompt + longest output),
// is reserved up front; requests are added in queue order while it fits, and the
// first that does not fit ends the batch (so no later request overtakes it).
#include <algorithm>

#include "simulator/serve_replica.h"

namespace lathe {

namespace {

class BatchReplica : public Replica {
 public:
  BatchReplica(ServeState& st, int index, bool dynamic) : Replica(st, index), dynamic_(dynamic) {}

  double start_step(double now, bool more_arrivals, double* wake_s) override {
    if (!batch_.empty()) {
      ++step_;
      return st_.cost.decode_s(int64_t(batch_.size()), max_prompt_ + step_);
    }
    *wake_s = kNever;
    if (waiting_.empty()) return -1;
    // Full: max_batch requests wait, or the queue's head already fills the KV cache
    // (a batch of 12 on a cache that holds 6 sat idle until 12 had arrived).
    bool full = false;
    pick(&full);  // (its max_prompt_ / max_output_ are unread while no batch runs)
    // A static batcher still waiting when the stream has ended takes what is left (or
    // it would wait forever); a dynamic one cannot know that no more will come, so it
    // waits for its timeout like any other time.
    if (!full && (more_arrivals || dynamic_)) {
      if (!dynamic_) return -1;
      // The oldest waiting request (ids are in arrival order; nothing is requeued).
      int32_t oldest = waiting_.begin()->second;
      for (const auto& w : waiting_) oldest = std::min(oldest, w.second);
      double due = st_.enqueued_s[size_t(oldest)] + st_.o.batch_timeout_s;
      if (now < due) {
        *wake_s = due;
        return -1;
      }
    }
    form(now);
    step_ = 0;
    step_start_ = now;
    return st_.cost.prefill_s(int64_t(batch_.size()), max_prompt_);
  }

  void finish_step(double now) override {
    if (step_ == 0) {
      for (Member& m : batch_) {
        st_.recs[size_t(m.r)].first_token_s = now;
        span(m.r, m.slot, step_start_, now, true);
      }
    }
    for (Member& m : batch_) {
      const Request& q = st_.reqs[size_t(m.r)];
      if (q.output != step_ + 1) continue;
      finish_request(m.r, now);
      if (q.output > 1) span(m.r, m.slot, st_.recs[size_t(m.r)].first_token_s, now, false);
    }
    if (step_ + 1 < max_output_) return;
    for (Member& m : batch_) free_slot(m.slot);
    batch_.clear();
  }

  int64_t running() const override { return int64_t(batch_.size()); }
  int64_t kv_tokens() const override {
    return int64_t(batch_.size()) * blocks(max_prompt_ + max_output_) * st_.o.kv_block;
  }
  int64_t step_prefill_tokens() const override {
    return step_ == 0 ? int64_t(batch_.size()) * max_prompt_ : 0;
  }
  int64_t step_decode_seqs() const override { return step_ == 0 ? 0 : int64_t(batch_.size()); }

 private:
  struct Member {
    int32_t r;
    int slot;
  };

  // The batch the queue gives now, in queue order while it fits (sets max_prompt_ and
  // max_output_); *closed: it stopped at max_batch or at a request the cache cannot add.
  std::vector<int32_t> pick(bool* closed) {
    max_prompt_ = max_output_ = 0;
    *closed = false;
    std::vector<int32_t> take;
    for (const auto& w : waiting_) {
      if (int64_t(take.size()) >= st_.o.max_batch) break;
      const Request& q = st_.reqs[size_t(w.second)];
      int64_t p = std::max(max_prompt_, q.prompt), o = std::max(max_output_, q.output);
      if (int64_t(take.size() + 1) * blocks(p + o) > st_.kv_capacity_blocks) {
        *closed = true;
        break;
      }
      take.push_back(w.second);
      max_prompt_ = p;
      max_output_ = o;
    }
    // Nothing could join: the batch is at max_batch, or one more member pads to at least
    // this batch's longest.
    if (int64_t(take.size()) >= st_.o.max_batch ||
        (!take.empty() && int64_t(take.size() + 1) * blocks(max_prompt_ + max_output_) > st_.kv_capacity_blocks))
      *closed = true;
    return take;
  }

  void form(double now) {
    bool closed = false;  // not needed here
    for (int32_t r : pick(&closed)) {
      dispatch(r, now);
      batch_.push_back({r, take_slot()});
    }
  }

  bool dynamic_;
  std::vector<Member> batch_;
  int64_t max_prompt_ = 0, max_output_ = 0, step_ = 0;
  double step_start_ = 0;
};

}  // namespace

std::unique_ptr<Replica> make_batch_replica(ServeState& st, int index, bool dynamic) {
  return std::make_unique<BatchReplica>(st, index, dynamic);
}

}  // namespace lathe
