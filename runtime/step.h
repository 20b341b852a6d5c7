// Sequence bookkeeping shared by the CPU and CUDA runtimes: turns the new tokens of a
// step into the packed rows, per-sequence (slot, past, len, row0) records and, for a
// paged KV cache, the block table; checks the step against the plan's capacities.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/cpu/abi.h"
#include "ir/graph.h"

namespace lathe {

struct StepPlan {
  std::vector<LatheSeq> seqs;
  std::vector<int> row_seq, row_pos;
  std::vector<int32_t> tokens;  // packed, one per row
  int64_t max_len = 0, max_ctx = 0;
  Bindings bindings() const { return {int64_t(seqs.size()), max_len, max_ctx}; }
};

class SequenceState {
 public:
  // Capacities from the plan's decode graph (B, final_context, kv_layout) and the
  // step graph's S (new tokens per sequence).
  explicit SequenceState(const Graph& decode);

  // Prepares a step. `fresh` starts new sequences (prefill); otherwise one entry per
  // live sequence. Throws lathe::Error when the step exceeds the plan.
  StepPlan begin(const std::vector<std::vector<int32_t>>& new_tokens, bool fresh, int64_t max_new, int64_t vocab);
  // Records that the step ran (lengths grow).
  void commit(const StepPlan& p);

  const std::vector<int>& block_table() const { return block_table_; }
  int64_t blocks_per_slot() const { return blocks_per_slot_; }
  int64_t slots() const { return slots_; }
  int64_t capacity() const { return capacity_; }
  bool paged() const { return paged_; }
  int64_t block() const { return block_; }

 private:
  int64_t slots_ = 0, capacity_ = 0, block_ = 16, blocks_per_slot_ = 0;
  bool paged_ = false;
  std::vector<int> block_table_, free_blocks_;
  std::vector<int64_t> lengths_;
};

}  // namespace lathe
