#include "ir/buffers.h"

#include <algorithm>

namespace lathe {

Bindings graph_bindings(const Graph& g) {
  return Bindings{g.attrs.i("B", 1), g.attrs.i("S", 1), g.attrs.i("T", 1)};
}

void set_graph_bindings(Graph& g, const Bindings& b) {
  g.attrs.set("B", b.B);
  g.attrs.set("S", b.S);
  g.attrs.set("T", b.T);
}

namespace {

// Activations at their dtype; weights and state in their storage format with scales
// (rows = all dims but the last). `cols` is called only for the latter.
template <typename Cols>
double stored_bytes(ValueKind kind, DType dtype, const Format& format, double n, Cols cols_of) {
  if (kind == ValueKind::activation || kind == ValueKind::input) return n * dtype_bits(dtype) / 8.0;
  double cols = cols_of();
  double rows = cols > 0 ? n / cols : 0.0;
  return format.bytes(rows, cols);
}

}  // namespace

double value_bytes(const Value& v, const Bindings& b) {
  return stored_bytes(v.kind, v.dtype, v.format, double(num_elements(v.shape, b)),
                      [&] { return v.shape.empty() ? 1.0 : double(v.shape.back().eval(b)); });
}

double ValueSize::bytes(const Bindings& b) const {
  if (fixed_bytes >= 0) return fixed_bytes;
  return stored_bytes(kind, dtype, format, double(elems.eval(b)),
                      [&] { return double(cols.eval(b)); });
}

ValueSize value_size(const Value& v) {
  ValueSize s;
  s.elems = product(v.shape);
  if (!v.shape.empty()) s.cols = v.shape.back();
  s.kind = v.kind;
  s.dtype = v.dtype;
  s.format = v.format;
  if (s.elems.is_const() && s.cols.is_const()) s.fixed_bytes = s.bytes({1, 1, 1});
  return s;
}

bool is_state_view(const Graph& g, ValueId v) {
  NodeId p = g.value(v).producer;
  if (p == kNone) return false;
  const Node& n = g.node(p);
  return (n.kind == OpKind::kv_write || n.kind == OpKind::rope_kvwrite) && n.outputs.back() == v;
}

std::vector<LiveRange> live_ranges(const Graph& g, const std::vector<NodeId>& order) {
  std::vector<LiveRange> r(g.value_capacity());
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const Node& n = g.node(order[pos]);
    for (ValueId v : n.outputs)
      if (g.value(v).kind == ValueKind::activation && !is_state_view(g, v)) r[size_t(v)] = {int(pos), int(pos)};
  }
  std::vector<bool> used(g.value_capacity(), false);
  for (size_t pos = 0; pos < order.size(); ++pos)
    for (ValueId v : g.node(order[pos]).inputs) {
      if (r[size_t(v)].first < 0) continue;
      r[size_t(v)].last = std::max(r[size_t(v)].last, int(pos));
      used[size_t(v)] = true;
    }
  int end = int(order.size()) - 1;
  for (size_t v = 0; v < r.size(); ++v)
    if (r[v].first >= 0 && !used[v]) r[v].last = end;
  return r;
}

}  // namespace lathe
