#include "passes/fuse_siblings.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "passes/rewrite.h"

namespace lathe {

bool outputs_feed(const Graph& g, const std::vector<NodeId>& nodes, std::initializer_list<OpKind> kinds) {
  for (NodeId n : nodes)
    for (ValueId out : g.node(n).outputs)
      for (NodeId u : g.users(out))
        if (std::find(kinds.begin(), kinds.end(), g.node(u).kind) != kinds.end()) return true;
  return false;
}

// 1. Group alive single-purpose GEMMs (epilogue none) by (kind, x, prologue, norm
//    weight, expert ids).
// 2. For each group of two or more that `accept` takes, build one node whose inputs
//    are the shared ones followed by every member's weights, whose outputs are the
//    members' outputs in order, and which absorbs the members.
PassResult fuse_sibling_gemms(Graph& g, const std::function<bool(const Graph&, const std::vector<NodeId>&)>& accept,
                              const std::string& suffix) {
  using Key = std::tuple<int, ValueId, std::string, ValueId, ValueId>;
  std::map<Key, std::vector<NodeId>> groups;
  for (NodeId id : g.topo_order()) {
    const Node& n = g.node(id);
    if (n.kind != OpKind::matmul && n.kind != OpKind::expert_matmul) continue;
    if (n.attrs.s("epilogue", "none") != "none") continue;
    auto p = gemm_parts(n.kind, n.attrs, n.inputs.size());
    if (!p) continue;
    ValueId norm = p->norm >= 0 ? n.inputs[size_t(p->norm)] : kNone;
    ValueId idx = p->idx >= 0 ? n.inputs[size_t(p->idx)] : kNone;
    groups[{int(n.kind), n.inputs[size_t(p->x)], n.attrs.s("prologue", "none"), norm, idx}].push_back(id);
  }
  int fused = 0;
  for (auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    std::sort(members.begin(), members.end());
    if (!accept(g, members)) continue;
    const Node& first = g.node(members.front());
    auto p = *gemm_parts(first.kind, first.attrs, first.inputs.size());
    Node f;
    f.kind = first.kind;
    f.attrs = first.attrs;
    f.name = g.unique_node_name(name_prefix(first.name) + suffix);
    f.inputs.assign(first.inputs.begin(), first.inputs.begin() + p.first_weight);
    for (NodeId m : members) {
      const Node& n = g.node(m);
      auto pm = *gemm_parts(n.kind, n.attrs, n.inputs.size());
      for (int w = 0; w < pm.num_weights; ++w) f.inputs.push_back(n.inputs[size_t(pm.first_weight + w)]);
      f.outputs.insert(f.outputs.end(), n.outputs.begin(), n.outputs.end());
      absorb(f, n);
    }
    g.replace_nodes(members, std::move(f));
    ++fused;
  }
  PassResult r;
  r.changed = fused > 0;
  r.note = "fused " + std::to_string(fused) + " group" + (fused == 1 ? "" : "s");
  return r;
}

}  // namespace lathe
