#include "passes/quantize_weights.h"

#include "ir/assert.h"

namespace lathe {

// 1. Validate the format against the target (fp8 needs sm_89+).
// 2. Every weight that only GEMMs read takes the format; a weight also read by a
//    non-GEMM (a tied embedding table) keeps its dtype.
// 3. Group-wise formats need the reduction length to be a multiple of the group.
PassResult quantize_weights(Graph& g, const PassContext& ctx) {
  if (!ctx.options.weights) return {false, "no weight format requested: weights keep the model dtype"};
  Format f = *ctx.options.weights;
  if (!ctx.target.supports(f.dtype))
    throw Error("weights " + format_name(f) + ": " + ctx.target.name + " has no " + std::string(dtype_name(f.dtype)) +
                " support" + unsupported_reason(ctx.target, f.dtype));
  // Users of every value in one scan (Graph::users walks all nodes for a value with no
  // producer, once per weight).
  std::vector<std::vector<NodeId>> users(g.value_capacity());
  for (size_t i = 0; i < g.node_capacity(); ++i) {
    const Node& n = g.node(NodeId(i));
    if (!n.alive) continue;
    for (ValueId v : n.inputs)
      if (users[size_t(v)].empty() || users[size_t(v)].back() != n.id) users[size_t(v)].push_back(n.id);
  }
  int changed = 0, kept = 0;
  for (ValueId v : g.values_of(ValueKind::weight)) {
    const Value& w = g.value(v);
    if (w.shape.size() < 2) continue;  // norms
    bool gemm_only = true, any = false;
    for (NodeId u : users[size_t(v)]) {
      const Node& n = g.node(u);
      auto p = gemm_parts(n.kind, n.attrs, n.inputs.size());
      bool as_weight = false;
      if (p && n.kind != OpKind::moe_router)
        for (int i = 0; i < p->num_weights; ++i) as_weight |= n.inputs[size_t(p->first_weight + i)] == v;
      gemm_only &= as_weight;
      any = true;
    }
    if (!any) continue;
    if (!gemm_only) {
      ++kept;
      continue;
    }
    int64_t K = w.shape.back().coef;
    if (f.group > 0 && K % f.group != 0)
      throw Error("weights " + format_name(f) + ": " + w.name + " has a reduction length of " + std::to_string(K) +
                  ", not a multiple of the group size " + std::to_string(f.group) + " (try a smaller group)");
    if (w.format == f) continue;
    g.value_mut(v).format = f;
    g.value_mut(v).dtype = f.dtype;
    ++changed;
  }
  std::string note = std::to_string(changed) + " weight tensors to " + format_name(f);
  if (kept) note += "; " + std::to_string(kept) + " shared with the embedding lookup kept";
  return {changed > 0, note};
}

}  // namespace lathe
