// The time of one serving step (one forward pass over a batch that mixes decode
// tokens and prefill chunks of different sequences) from the per-kernel cost model.
//
// A plan's lowered graphs are uniform in B, S and T; a serving step is not. The
// coster splits each graph's kernels into three kinds, found by evaluating every
// kernel's cost at a few bindings (not by a list of op kinds):
//   token kernels    cost depends only on B x S, the tokens in the step (GEMMs, norms,
//                    RoPE, KV writes, collectives): costed once at all the step's tokens;
//   context kernels  cost depends on the context T (attention): costed per group of
//                    sequences, decode sequences at their mean context, each prefill
//                    chunk at its own (new tokens, context);
//   sequence kernels cost depends on B alone (the LM head reads each sequence's last
//                    row, sampling): costed at the number of sequences that emit a token.
// A step that is all decode at one context, or one prefill, costs exactly what the
// graph costs at those bindings (what simulate() sums). Chunk groups after the first
// add no launch overhead for their attention kernels (one variable-length launch).
//
// Costs are cached per distinct piece (tokens, sequences, (B, S, T)), so a long
// trace costs each distinct shape once.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/target.h"
#include "simulator/cost.h"

namespace lathe {

struct PrefillChunk {
  int64_t tokens = 0;   // new prompt tokens of each sequence in this chunk
  int64_t context = 0;  // context after the chunk (tokens already cached + tokens)
  int64_t count = 1;    // sequences with this same (tokens, context)
};

struct StepShape {
  int64_t decode_seqs = 0;         // sequences decoding one token each
  int64_t decode_context_sum = 0;  // sum of their contexts after this step
  std::vector<PrefillChunk> chunks;
  int64_t emitting = -1;  // sequences that emit a token (-1: all decode + all chunks)
};

class StepCoster {
 public:
  StepCoster(const Graph& prefill, const Graph& decode, const Target& t, const CostOptions& o = {});

  double step_s(const StepShape& s);
  // `seqs` sequences each decoding one token at context `context` (after the step).
  double decode_s(int64_t seqs, int64_t context);
  // `steps` decode steps of `seqs` sequences at contexts first_context, first_context + 1,
  // ...: exact up to 4096 steps, sampled evenly above.
  double decode_sum_s(int64_t seqs, int64_t first_context, int64_t steps);
  // `seqs` sequences each prefilling `prompt` tokens from an empty cache.
  double prefill_s(int64_t seqs, int64_t prompt);

  // KV-cache bytes per token (all layers, K and V, scales) on one device.
  double kv_bytes_per_token() const { return kv_bytes_per_token_; }
  // Positions a block of a paged KV cache holds (1: the cache is not paged); a
  // sequence holds whole blocks.
  int64_t kv_block() const { return kv_block_; }
  int64_t cache_entries() const { return int64_t(cache_.size()); }
  int64_t evaluations() const { return evaluations_; }
  const Target& target() const { return t_; }

 private:
  enum class Kind : uint8_t { token, context, sequence };
  struct Member {
    NodeId node;
    int count;
    Kind kind;
    CostForm form;  // read from the graph once
  };
  struct Part {
    const Graph* g = nullptr;
    std::vector<Member> members;
  };
  struct Key {
    uint8_t what;  // part * 4 + kind (+ no-launch flag)
    int64_t b, s, t;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };

  Part classify(const Graph& g);
  double piece(int part, Kind kind, int64_t b, int64_t s, int64_t t, bool launch);

  const Graph& prefill_;
  const Graph& decode_;
  Target t_;
  CostOptions o_;
  Part parts_[2];  // 0 = prefill graph, 1 = decode graph
  double kv_bytes_per_token_ = 0;
  int64_t kv_block_ = 1;
  std::unordered_map<Key, double, KeyHash> cache_;
  int64_t evaluations_ = 0;
};

}  // namespace lathe
