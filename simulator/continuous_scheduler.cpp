// Iteration-level (continuous) batching, as Orca and vLLM schedule: sequences join and
// leave the running batch at every step.
//
//  1. KV is allocated in blocks of kv_block tokens. A waiting request is admitted
//     (queue order: class 0 first, then arrival) when a batch slot is free and the
//     blocks of its prompt are, keeping 1% of the blocks free for running sequences
//     to grow into; the first request that cannot be admitted stops admission, so
//     nothing overtakes it.
//  2. continuous: a step with admissions is a prefill step of the admitted prompts
//     (up to max_prefill_tokens; running sequences wait one step); otherwise every
//     running sequence decodes one token.
//     chunked: every step carries all decode tokens plus prompt chunks up to
//     token_budget tokens in all: partly prefilled sequences first, then new ones.
//  3. Before a step, each decoding sequence needs room for one more token. When the
//     free blocks run out, the least urgent, latest-arrived running sequence is
//     preempted: its blocks are freed and it goes back to the queue; when readmitted
//     it recomputes its prompt and the tokens generated so far (vLLM's recompute).
//  4. A sequence whose prefill completes emits a token at the end of that step (its
//     first token, unless it is recomputing); a sequence with all its tokens leaves.
#include <algorithm>

#include "ir/assert.h"
#include "simulator/serve_replica.h"

namespace lathe {

namespace {

class ContinuousReplica : public Replica {
 public:
  ContinuousReplica(ServeState& st, int index, bool chunked)
      : Replica(st, index), chunked_(chunked), free_blocks_(st.kv_capacity_blocks) {}

  double start_step(double now, bool, double* wake_s) override {
    *wake_s = kNever;
    chunk_.clear();
    decoding_.clear();
    step_start_ = now;
    if (chunked_)
      plan_chunked(now);
    else
      plan_continuous(now);
    if (decoding_.empty() && chunk_.empty()) return -1;
    StepShape shape;
    int64_t emitting = 0;
    for (size_t i : decoding_) {
      shape.decode_seqs += 1;
      shape.decode_context_sum += seqs_[i].context + 1;
      ++emitting;
    }
    for (const auto& [i, n] : chunk_) {
      const Seq& s = seqs_[i];
      shape.chunks.push_back({n, s.prefilled + n, 1});
      if (s.prefilled + n == s.target) ++emitting;
    }
    shape.emitting = emitting;
    return st_.cost.step_s(shape);
  }

  void finish_step(double now) override {
    for (size_t i : decoding_) {
      Seq& s = seqs_[i];
      ++s.context;
      ++st_.generated[size_t(s.r)];
    }
    for (const auto& [i, n] : chunk_) {
      Seq& s = seqs_[i];
      s.prefilled += n;
      if (s.prefilled < s.target) continue;
      s.context = s.target;
      ++st_.generated[size_t(s.r)];
      RequestRecord& rec = st_.recs[size_t(s.r)];
      if (rec.first_token_s < 0) rec.first_token_s = now;
      span(s.r, s.slot, s.phase_start, now, true);
      s.phase_start = now;
    }
    // Retire finished sequences (keeping admission order for the rest).
    size_t keep = 0;
    for (size_t i = 0; i < seqs_.size(); ++i) {
      Seq& s = seqs_[i];
      if (st_.generated[size_t(s.r)] >= st_.reqs[size_t(s.r)].output) {
        finish_request(s.r, now);
        if (now > s.phase_start) span(s.r, s.slot, s.phase_start, now, false);
        release(s);
        continue;
      }
      seqs_[keep++] = s;
    }
    seqs_.resize(keep);
  }

  int64_t running() const override { return int64_t(seqs_.size()); }
  int64_t kv_tokens() const override {
    return (st_.kv_capacity_blocks - free_blocks_) * st_.o.kv_block;
  }
  int64_t step_prefill_tokens() const override {
    int64_t n = 0;
    for (const auto& c : chunk_) n += c.second;
    return n;
  }
  int64_t step_decode_seqs() const override { return int64_t(decoding_.size()); }

 private:
  struct Seq {
    int32_t r = 0;
    int slot = 0;
    int64_t target = 0;     // tokens to prefill: prompt + tokens generated before a preemption
    int64_t prefilled = 0;  // of target
    int64_t context = 0;    // tokens in the KV cache once prefilled
    int64_t blocks = 0;
    double phase_start = 0;  // start of the current prefill or decode span
  };

  void release(const Seq& s) {
    free_blocks_ += s.blocks;
    free_slot(s.slot);
  }

  // Admits the head of the queue when a slot and the blocks of its prompt are free.
  bool admit_head(double now) {
    if (waiting_.empty() || int64_t(seqs_.size()) >= st_.o.max_batch) return false;
    int32_t r = waiting_.begin()->second;
    Seq s;
    s.r = r;
    s.target = st_.reqs[size_t(r)].prompt + st_.generated[size_t(r)];
    s.blocks = blocks(s.target);
    // Keep a watermark of free blocks (1% as vLLM does) for the running sequences to
    // grow into, so an admission is not undone by a preemption one step later.
    int64_t watermark = seqs_.empty() ? 0 : std::max<int64_t>(1, st_.kv_capacity_blocks / 100);
    if (s.blocks + watermark > free_blocks_) return false;
    dispatch(r, now);
    free_blocks_ -= s.blocks;
    s.slot = take_slot();
    s.phase_start = now;
    seqs_.push_back(s);
    return true;
  }

  // Gives every decoding sequence room for one more token, preempting the least
  // urgent, latest-arrived sequences while blocks run short. Fills decoding_.
  void grow_decoders(double now) {
    while (true) {
      int64_t need = 0;
      for (const Seq& s : seqs_)
        if (s.prefilled == s.target && blocks(s.context + 1) > s.blocks) ++need;
      if (need <= free_blocks_) break;
      size_t victim = 0;
      for (size_t i = 1; i < seqs_.size(); ++i) {
        const Request& a = st_.reqs[size_t(seqs_[i].r)];
        const Request& b = st_.reqs[size_t(seqs_[victim].r)];
        if (a.priority > b.priority || (a.priority == b.priority && seqs_[i].r > seqs_[victim].r))
          victim = i;
      }
      preempt(victim, now);
    }
    for (size_t i = 0; i < seqs_.size(); ++i) {
      Seq& s = seqs_[i];
      if (s.prefilled != s.target) continue;
      if (blocks(s.context + 1) > s.blocks) {
        ++s.blocks;
        --free_blocks_;
      }
      decoding_.push_back(i);
    }
  }

  void preempt(size_t i, double now) {
    Seq s = seqs_[i];
    LATHE_ASSERT(seqs_.size() > 1,
                 "a single sequence cannot outgrow the KV capacity (checked up front)");
    if (now > s.phase_start) span(s.r, s.slot, s.phase_start, now, s.prefilled < s.target);
    release(s);
    seqs_.erase(seqs_.begin() + std::ptrdiff_t(i));
    ++st_.recs[size_t(s.r)].preemptions;
    ++st_.preemptions;
    enqueue(s.r, now);
  }

  void plan_continuous(double now) {
    int64_t tokens = 0;
    size_t first_new = seqs_.size();
    while (!waiting_.empty()) {
      const Request& q = st_.reqs[size_t(waiting_.begin()->second)];
      int64_t target = q.prompt + st_.generated[size_t(waiting_.begin()->second)];
      if (seqs_.size() > first_new && tokens + target > st_.o.max_prefill_tokens) break;
      if (!admit_head(now)) break;
      tokens += target;
    }
    if (seqs_.size() > first_new) {
      for (size_t i = first_new; i < seqs_.size(); ++i) chunk_.push_back({i, seqs_[i].target});
      return;
    }
    grow_decoders(now);
  }

  void plan_chunked(double now) {
    grow_decoders(now);
    int64_t budget = st_.o.token_budget - int64_t(decoding_.size());
    for (size_t i = 0; i < seqs_.size() && budget > 0; ++i) {
      Seq& s = seqs_[i];
      if (s.prefilled == s.target) continue;
      int64_t n = std::min(budget, s.target - s.prefilled);
      chunk_.push_back({i, n});
      budget -= n;
    }
    while (budget > 0 && admit_head(now)) {
      size_t i = seqs_.size() - 1;
      int64_t n = std::min(budget, seqs_[i].target);
      chunk_.push_back({i, n});
      budget -= n;
    }
  }

  bool chunked_;
  int64_t free_blocks_;
  std::vector<Seq> seqs_;                          // running sequences in admission order
  std::vector<size_t> decoding_;                   // indices into seqs_ decoding this step
  std::vector<std::pair<size_t, int64_t>> chunk_;  // (index into seqs_, prompt tokens) this step
  double step_start_ = 0;
};

}  // namespace

std::unique_ptr<Replica> make_continuous_replica(ServeState& st, int index, bool chunked) {
  return std::make_unique<ContinuousReplica>(st, index, chunked);
}

}  // namespace lathe
