#include "passes/fuse_epilogue.h"

#include "passes/rewrite.h"

namespace lathe {

namespace {

// gate/up GEMM -> silu(gate) -> mul(., up)  =>  GEMM with epilogue silu_mul.
bool fold_silu_mul(Graph& g, NodeId id) {
  const Node& gm = g.node(id);
  if (gm.outputs.size() != 2) return false;
  ValueId gate = gm.outputs[0], up = gm.outputs[1];
  NodeId silu = sole_user(g, gate);
  if (silu == kNone || g.node(silu).kind != OpKind::silu) return false;
  NodeId mul = sole_user(g, g.node(silu).outputs[0]);
  if (mul == kNone || g.node(mul).kind != OpKind::mul) return false;
  if (sole_user(g, up) != mul) return false;
  Node f = gm;
  f.attrs.set("epilogue", std::string("silu_mul"));
  f.outputs = {g.node(mul).outputs[0]};
  if (f.absorbed.empty()) f.absorbed.push_back(op_tag(gm));
  absorb(f, g.node(silu));
  absorb(f, g.node(mul));
  g.replace_nodes({id, silu, mul}, std::move(f));
  return true;
}

// single-output GEMM -> add(residual, .)  =>  GEMM with epilogue residual.
bool fold_residual(Graph& g, NodeId id) {
  const Node& gm = g.node(id);
  if (gm.kind != OpKind::matmul || gm.outputs.size() != 1) return false;
  NodeId add = sole_user(g, gm.outputs[0]);
  if (add == kNone || g.node(add).kind != OpKind::add) return false;
  const Node& a = g.node(add);
  ValueId residual = a.inputs[0] == gm.outputs[0] ? a.inputs[1] : a.inputs[0];
  Node f = gm;
  f.inputs.push_back(residual);
  f.attrs.set("epilogue", std::string("residual"));
  f.outputs = {a.outputs[0]};
  if (f.absorbed.empty()) f.absorbed.push_back(op_tag(gm));
  absorb(f, a);
  g.replace_nodes({id, add}, std::move(f));
  return true;
}

}  // namespace

PassResult fuse_epilogue(Graph& g, const PassContext&) {
  int silu_mul = 0, residual = 0;
  for (NodeId id : g.topo_order()) {
    if (!g.node(id).alive) continue;
    const Node& n = g.node(id);
    if ((n.kind != OpKind::matmul && n.kind != OpKind::expert_matmul) || n.attrs.s("epilogue", "none") != "none")
      continue;
    if (fold_silu_mul(g, id)) ++silu_mul;
    else if (fold_residual(g, id)) ++residual;
  }
  return {silu_mul + residual > 0,
          "folded " + std::to_string(silu_mul) + " SiLU-multiply and " + std::to_string(residual) + " residual adds"};
}

}  // namespace lathe
