#include "passes/fuse_moe.h"

#include "passes/rewrite.h"

namespace lathe {

namespace {

// dispatch(h, ids) read only as the x of expert GEMMs with the same ids => those GEMMs
// gather h themselves (prologue = gather).
bool fold_dispatch(Graph& g, NodeId id) {
  const Node& d = g.node(id);
  ValueId hx = d.outputs[0], h = d.inputs[0], ids = d.inputs[1];
  std::vector<NodeId> users = g.users(hx);
  if (users.empty()) return false;
  for (NodeId u : users) {
    const Node& n = g.node(u);
    if (n.kind != OpKind::expert_matmul || n.attrs.s("prologue", "none") != "none" || n.inputs[0] != hx ||
        n.inputs[1] != ids)
      return false;
  }
  Node dcopy = d;
  for (NodeId u : users) {
    Node& n = g.node_mut(u);
    std::vector<ValueId> in = n.inputs;
    in[0] = h;
    n.attrs.set("prologue", std::string("gather"));
    if (n.absorbed.empty()) n.absorbed.push_back(op_tag(n));
    n.absorbed.push_back(op_tag(dcopy));
    g.set_inputs(u, in);
  }
  g.remove_node(id);
  return true;
}

// expert GEMM -> combine(., gates) [-> add(residual, .)] => epilogue combine[_residual].
bool fold_combine(Graph& g, NodeId id) {
  const Node& c = g.node(id);
  NodeId gm = g.producer(c.inputs[0]);
  if (gm == kNone || g.node(gm).kind != OpKind::expert_matmul || g.node(gm).outputs.size() != 1 ||
      g.node(gm).attrs.s("epilogue", "none") != "none" || sole_user(g, c.inputs[0]) != id)
    return false;
  Node f = g.node(gm);
  if (f.absorbed.empty()) f.absorbed.push_back(op_tag(f));
  absorb(f, c);
  f.inputs.push_back(c.inputs[1]);
  std::vector<NodeId> parts = {gm, id};
  NodeId add = sole_user(g, c.outputs[0]);
  if (add != kNone && g.node(add).kind == OpKind::add) {
    const Node& a = g.node(add);
    f.inputs.push_back(a.inputs[0] == c.outputs[0] ? a.inputs[1] : a.inputs[0]);
    f.attrs.set("epilogue", std::string("combine_residual"));
    f.outputs = {a.outputs[0]};
    absorb(f, a);
    parts.push_back(add);
  } else {
    f.attrs.set("epilogue", std::string("combine"));
    f.outputs = {c.outputs[0]};
  }
  g.replace_nodes(parts, std::move(f));
  return true;
}

}  // namespace

PassResult fuse_moe(Graph& g, const PassContext&) {
  int dispatch = 0, combine = 0;
  for (NodeId id : g.topo_order()) {
    if (!g.node(id).alive) continue;
    if (g.node(id).kind == OpKind::moe_dispatch && fold_dispatch(g, id)) ++dispatch;
    else if (g.node(id).kind == OpKind::moe_combine && fold_combine(g, id)) ++combine;
  }
  g.remove_dead_values();
  return {dispatch + combine > 0,
          "folded " + std::to_string(dispatch) + " dispatches and " + std::to_string(combine) + " combines"};
}

}  // namespace lathe
