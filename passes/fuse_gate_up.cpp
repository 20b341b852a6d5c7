#include "passes/fuse_gate_up.h"

#include "passes/fuse_siblings.h"

namespace lathe {

PassResult fuse_gate_up(Graph& g, const PassContext&) {
  // FFN projections are the sibling GEMMs whose outputs reach SiLU or the gating
  // multiply (dense layers and experts alike).
  return fuse_sibling_gemms(
      g, [](const Graph& gr, const std::vector<NodeId>& m) { return outputs_feed(gr, m, {OpKind::silu, OpKind::mul}); },
      "gate_up");
}

}  // namespace lathe
