#include "passes/fuse_rope_kvwrite.h"

#include <unordered_map>
#include <vector>

#include "passes/rewrite.h"

namespace lathe {

// 1. For each kv_write, its K input must come from a RoPE used by nothing else.
// 2. The Q RoPE is the other RoPE of the same layer.
// 3. rope_kvwrite(q, k, v, $kv) replaces the three; it outputs the rotated Q and the
//    cache view the attention reads.
PassResult fuse_rope_kvwrite(Graph& g, const PassContext&) {
  int fused = 0;
  std::vector<NodeId> order = g.topo_order();
  // Each layer's RoPE nodes in order, found in one scan (fusion only removes them).
  std::unordered_map<int64_t, std::vector<NodeId>> ropes;
  for (NodeId c : order)
    if (g.node(c).kind == OpKind::rope) ropes[g.node(c).attrs.i("layer", -1)].push_back(c);
  for (NodeId id : order) {
    if (!g.node(id).alive || g.node(id).kind != OpKind::kv_write) continue;
    const Node& w = g.node(id);
    NodeId krope = g.producer(w.inputs[0]);
    if (krope == kNone || g.node(krope).kind != OpKind::rope || sole_user(g, w.inputs[0]) != id) continue;
    int64_t layer = w.attrs.i("layer");
    NodeId qrope = kNone;
    for (NodeId c : ropes[layer])
      if (c != krope && g.node(c).alive && g.node(c).kind == OpKind::rope) qrope = c;
    if (qrope == kNone) continue;
    const Node &q = g.node(qrope), &k = g.node(krope);
    Node f;
    f.kind = OpKind::rope_kvwrite;
    f.name = g.unique_node_name("l" + std::to_string(layer) + ".rope_kvwrite");
    f.inputs = {q.inputs[0], k.inputs[0], w.inputs[1], w.inputs[2]};
    f.outputs = {q.outputs[0], w.outputs[0]};
    f.attrs.set("heads", q.attrs.i("heads"));
    f.attrs.set("kv_heads", w.attrs.i("kv_heads"));
    f.attrs.set("head_dim", w.attrs.i("head_dim"));
    f.attrs.set("theta", q.attrs.f("theta"));
    if (q.attrs.has("rope_divisors")) f.attrs.set("rope_divisors", q.attrs.s("rope_divisors"));
    f.attrs.set("layer", layer);
    absorb(f, q);
    absorb(f, k);
    absorb(f, w);
    g.replace_nodes({qrope, krope, id}, std::move(f));
    ++fused;
  }
  return {fused > 0, "fused " + std::to_string(fused) + " layer" + (fused == 1 ? "" : "s")};
}

}  // namespace lathe
