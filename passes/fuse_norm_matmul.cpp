#include "passes/fuse_norm_matmul.h"

#include "passes/rewrite.h"

namespace lathe {

// 1. Find an rms_norm whose output is read only as the activation input (x) of
//    plain-prologue matmul / lm_head nodes.
// 2. Each of those GEMMs takes the norm's input and weight instead (prologue =
//    rms_norm, eps copied) and records the norm as absorbed.
// 3. The norm node goes; its output dies with it.
PassResult fuse_norm_matmul(Graph& g, const PassContext&) {
  int folded = 0;
  for (NodeId id : g.topo_order()) {
    const Node& norm = g.node(id);
    if (norm.kind != OpKind::rms_norm) continue;
    ValueId out = norm.outputs[0];
    std::vector<NodeId> users = g.users(out);
    if (users.empty()) continue;
    bool all_gemm = true;
    for (NodeId u : users) {
      const Node& n = g.node(u);
      auto p = gemm_parts(n.kind, n.attrs, n.inputs.size());
      bool ok = (n.kind == OpKind::matmul || n.kind == OpKind::lm_head) && p &&
                n.attrs.s("prologue", "none") == "none" && n.inputs[size_t(p->x)] == out;
      for (size_t i = 0; ok && i < n.inputs.size(); ++i)
        if (int(i) != p->x && n.inputs[i] == out) ok = false;  // read elsewhere too
      all_gemm = all_gemm && ok;
    }
    if (!all_gemm) continue;
    Node norm_copy = norm;
    for (NodeId u : users) {
      Node& n = g.node_mut(u);
      std::vector<ValueId> in = n.inputs;
      in[0] = norm_copy.inputs[0];
      in.insert(in.begin() + 1, norm_copy.inputs[1]);
      n.attrs.set("prologue", std::string("rms_norm"));
      n.attrs.set("eps", norm_copy.attrs.f("eps", 1e-5));
      if (n.absorbed.empty()) n.absorbed.push_back(op_tag(n));
      n.absorbed.push_back(op_tag(norm_copy));
      g.set_inputs(u, in);
    }
    g.remove_node(id);
    ++folded;
  }
  g.remove_dead_values();
  return {folded > 0, "folded " + std::to_string(folded) + " norm" + (folded == 1 ? "" : "s")};
}

}  // namespace lathe
