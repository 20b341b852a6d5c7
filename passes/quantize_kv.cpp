#include "passes/quantize_kv.h"

#include "ir/assert.h"

namespace lathe {

PassResult quantize_kv(Graph& g, const PassContext& ctx) {
  if (!ctx.options.kv_dtype) return {false, "no KV dtype requested: the cache keeps the activation dtype"};
  DType t = *ctx.options.kv_dtype;
  if (!ctx.target.supports(t))
    throw Error(std::string("KV ") + std::string(dtype_name(t)) + ": " + ctx.target.name + " has no " +
                std::string(dtype_name(t)) + " support" + unsupported_reason(ctx.target, t));
  int64_t head_dim = g.attrs.i("head_dim");
  Format f{t, 0, DType::f16};
  if (is_integer_quant(t) || t == DType::fp8_e4m3) {
    f.group = int(head_dim);  // one scale per (token, head)
    f.scale_dtype = t == DType::fp8_e4m3 ? DType::f32 : DType::f16;
  }
  bool changed = false;
  for (ValueId v : g.values_of(ValueKind::state)) {
    if (g.value(v).format == f) continue;
    g.value_mut(v).format = f;
    g.value_mut(v).dtype = t;
    changed = true;
  }
  // The cache views written by kv_write / rope_kvwrite carry the cache dtype.
  for (NodeId id : g.topo_order()) {
    const Node& n = g.node(id);
    if (n.kind != OpKind::kv_write && n.kind != OpKind::rope_kvwrite) continue;
    Value& view = g.value_mut(n.outputs.back());
    if (view.dtype != t) {
      view.dtype = t;
      changed = true;
    }
  }
  g.attrs.set("kv_dtype", std::string(dtype_name(t)));
  std::string note = "KV cache in " + std::string(dtype_name(t));
  if (f.group) note += " with one " + std::string(dtype_name(f.scale_dtype)) + " scale per (token, head)";
  return {changed, note};
}

}  // namespace lathe
