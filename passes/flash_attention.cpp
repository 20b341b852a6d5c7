#include "passes/flash_attention.h"

#include "passes/rewrite.h"

namespace lathe {

// Pattern, walking up from each softmax:
//   k, v = kv_read(cache); s = qk(q, k); [s = mask(s)]; p = softmax(s); o = pv(p, v)
// with every intermediate used once. The replacement reads q and the cache view and
// writes o; the score matrix [B, heads, S, T] never exists.
PassResult flash_attention(Graph& g, const PassContext&) {
  int fused = 0;
  for (NodeId id : g.topo_order()) {
    if (!g.node(id).alive || g.node(id).kind != OpKind::softmax) continue;
    const Node& sm = g.node(id);
    NodeId mask = kNone, qk = g.producer(sm.inputs[0]);
    if (qk != kNone && g.node(qk).kind == OpKind::mask) {
      mask = qk;
      if (sole_user(g, g.node(mask).outputs[0]) != id) continue;
      qk = g.producer(g.node(mask).inputs[0]);
    }
    if (qk == kNone || g.node(qk).kind != OpKind::qk) continue;
    if (sole_user(g, g.node(qk).outputs[0]) != (mask != kNone ? mask : id)) continue;
    NodeId read = g.producer(g.node(qk).inputs[1]);
    if (read == kNone || g.node(read).kind != OpKind::kv_read) continue;
    NodeId pv = sole_user(g, sm.outputs[0]);
    if (pv == kNone || g.node(pv).kind != OpKind::pv) continue;
    const Node& r = g.node(read);
    if (sole_user(g, r.outputs[0]) != qk || sole_user(g, r.outputs[1]) != pv) continue;
    if (g.node(pv).inputs[1] != r.outputs[1]) continue;
    const Node& q = g.node(qk);
    Node f;
    bool prefill = g.phase == Phase::prefill;
    f.kind = prefill ? OpKind::flash_attention : OpKind::decode_attention;
    int64_t layer = q.attrs.i("layer");
    f.name = g.unique_node_name("l" + std::to_string(layer) + (prefill ? ".flash_attention" : ".decode_attention"));
    f.inputs = {q.inputs[0], r.inputs[0]};
    f.outputs = {g.node(pv).outputs[0]};
    for (const char* k : {"heads", "kv_heads", "head_dim", "layer"}) f.attrs.set(k, q.attrs.i(k));
    f.attrs.set("scale", q.attrs.f("scale"));
    if (prefill) f.attrs.set("causal", int64_t(mask != kNone));
    std::vector<NodeId> parts = {read, qk};
    if (mask != kNone) parts.push_back(mask);
    parts.push_back(id);
    parts.push_back(pv);
    for (NodeId p : parts) absorb(f, g.node(p));
    g.replace_nodes(parts, std::move(f));
    ++fused;
  }
  return {fused > 0, "fused " + std::to_string(fused) + " attention block" + (fused == 1 ? "" : "s")};
}

}  // namespace lathe
