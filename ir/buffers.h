// Sizes and lifetimes of buffers, shared by the memory planner, the verifier, the
// simulator and the runtimes.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace lathe {

// The concrete bindings a graph was planned for (graph attrs B, S, T; default 1).
Bindings graph_bindings(const Graph& g);
void set_graph_bindings(Graph& g, const Bindings& b);

// Bytes of a value at the given bindings: activations at their dtype, weights and
// state in their storage format with scales (rows = all dims but the last).
double value_bytes(const Value& v, const Bindings& b);

// value_bytes of one value with its shape reduced to two monomials in B, S, T (the
// product of its dims and its last dim): read from the graph once, then evaluated at
// any bindings without walking the shape. bytes(b) equals value_bytes(v, b) exactly.
struct ValueSize {
  Dim elems = Dim::c(1);  // product of the shape
  Dim cols = Dim::c(1);   // last dim (1 for a scalar): a stored matrix is rows x cols
  ValueKind kind = ValueKind::activation;
  DType dtype = DType::f32;
  Format format;
  double fixed_bytes = -1;  // bytes when no dim depends on the bindings (weights), else -1

  double bytes(const Bindings& b) const;
  bool depends_on_context() const { return elems.t > 0 || cols.t > 0; }
};
ValueSize value_size(const Value& v);

// True for the cache view a kv_write / rope_kvwrite outputs: it aliases the KV state
// and owns no memory of its own.
bool is_state_view(const Graph& g, ValueId v);

// Live range of each activation value over positions in `order` (inclusive);
// first = -1 for values that are not activations (or are state views) or not alive. Values nobody reads
// (graph outputs: logits, sampled tokens) stay live to the end.
struct LiveRange {
  int first = -1;
  int last = -1;
};
std::vector<LiveRange> live_ranges(const Graph& g, const std::vector<NodeId>& order);

}  // namespace lathe
