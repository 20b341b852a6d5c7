#include "runtime/step.h"

#include <algorithm>

#include "ir/assert.h"
#include "ir/plan_options.h"

namespace lathe {

SequenceState::SequenceState(const Graph& decode) {
  slots_ = decode.attrs.i("B");
  capacity_ = decode.attrs.i("final_context");
  auto layout = parse_kv_layout(decode.attrs.s("kv_layout", "LHTD"));
  if (!layout) throw Error("plan: bad kv_layout '" + decode.attrs.s("kv_layout") + "'");
  paged_ = layout->kind == KvLayoutKind::paged;
  block_ = layout->block;
  if (paged_) {
    blocks_per_slot_ = (capacity_ + block_ - 1) / block_;
    block_table_.assign(size_t(slots_ * blocks_per_slot_), -1);
  }
}

StepPlan SequenceState::begin(const std::vector<std::vector<int32_t>>& new_tokens, bool fresh, int64_t max_new,
                              int64_t vocab) {
  int n_seq = int(new_tokens.size());
  if (n_seq == 0) throw Error("no sequences to run");
  if (n_seq > slots_)
    throw Error("batch of " + std::to_string(n_seq) + " exceeds the plan's " + std::to_string(slots_) +
                " sequences; recompile the plan with --batch " + std::to_string(n_seq));
  if (fresh) {
    lengths_.assign(size_t(n_seq), 0);
    if (paged_) {
      std::fill(block_table_.begin(), block_table_.end(), -1);
      // Hand out blocks in a scrambled order (pairs swapped, taken from the end) so
      // physical and logical blocks differ and the block table is really used.
      int64_t total = slots_ * blocks_per_slot_;
      free_blocks_.clear();
      for (int64_t b = 0; b < total; ++b) free_blocks_.push_back(int(b));
      for (int64_t b = 0; b + 1 < total; b += 2) std::swap(free_blocks_[size_t(b)], free_blocks_[size_t(b + 1)]);
    }
  } else if (size_t(n_seq) != lengths_.size()) {
    throw Error("decode needs one token for each of the " + std::to_string(lengths_.size()) + " live sequences");
  }
  StepPlan p;
  p.seqs.resize(size_t(n_seq));
  int rows = 0;
  for (int s = 0; s < n_seq; ++s) {
    const auto& t = new_tokens[size_t(s)];
    if (t.empty()) throw Error("sequence " + std::to_string(s) + " has no tokens");
    if (int64_t(t.size()) > max_new)
      throw Error("sequence " + std::to_string(s) + " has " + std::to_string(t.size()) +
                  " new tokens; the plan allows " + std::to_string(max_new) + " (recompile with a longer --prompt)");
    int64_t past = lengths_[size_t(s)];
    if (past + int64_t(t.size()) > capacity_)
      throw Error("sequence " + std::to_string(s) + " would reach " + std::to_string(past + int64_t(t.size())) +
                  " tokens; the plan's KV cache holds " + std::to_string(capacity_) + " (recompile with a larger --gen)");
    p.seqs[size_t(s)] = LatheSeq{s, int(past), int(t.size()), rows};
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] < 0 || t[i] >= vocab)
        throw Error("token id " + std::to_string(t[i]) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
      p.tokens.push_back(t[i]);
      p.row_seq.push_back(s);
      p.row_pos.push_back(int(past + int64_t(i)));
      ++rows;
    }
    if (paged_)
      for (int64_t b = 0; b * block_ < past + int64_t(t.size()); ++b) {
        int& e = block_table_[size_t(s * blocks_per_slot_ + b)];
        if (e >= 0) continue;
        if (free_blocks_.empty()) throw Error("paged KV cache: out of blocks");
        e = free_blocks_.back();
        free_blocks_.pop_back();
      }
    p.max_len = std::max<int64_t>(p.max_len, int64_t(t.size()));
    p.max_ctx = std::max<int64_t>(p.max_ctx, past + int64_t(t.size()));
  }
  return p;
}

void SequenceState::commit(const StepPlan& p) {
  for (const LatheSeq& s : p.seqs) lengths_[size_t(s.slot)] += s.len;
}

}  // namespace lathe
