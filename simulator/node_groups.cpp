#include "simulator/node_groups.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

namespace lathe {

namespace {

// Nodes of one class cost the same: same kind, attributes (but the layer index) and
// operand types. Identical layers are costed once. Hash first, then compare.
uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

uint64_t hash_type(const Value& v) {
  uint64_t h = mix(uint64_t(v.kind), uint64_t(v.dtype));
  h = mix(h, uint64_t(v.format.group));
  for (const Dim& d : v.shape)
    h = mix(h, uint64_t(d.coef) ^ (uint64_t(d.b) << 56) ^ (uint64_t(d.s) << 48) ^
                   (uint64_t(d.t) << 40));
  return h;
}

bool same_type(const Value& a, const Value& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.format == b.format && a.shape == b.shape;
}

// A cheap hash of a short string (attribute keys): its length and up to its first and
// last eight bytes. Collisions only cost a same_class comparison.
uint64_t hash_key(const std::string& k) {
  uint64_t a = 0, b = 0;
  const size_t n = k.size();
  std::memcpy(&a, k.data(), std::min<size_t>(8, n));
  if (n > 8) std::memcpy(&b, k.data() + n - std::min<size_t>(8, n - 8), std::min<size_t>(8, n - 8));
  return mix(mix(uint64_t(n), a), b);
}

// value_hash: each value's hash_type, filled for the node's operands.
uint64_t hash_node(const Node& n, const std::vector<uint64_t>& value_hash) {
  uint64_t h = mix(0, uint64_t(n.kind));
  for (const auto& [k, v] : n.attrs.items()) {
    if (k == "layer") continue;
    h = mix(h, hash_key(k));
    if (auto p = std::get_if<int64_t>(&v))
      h = mix(h, uint64_t(*p));
    else if (auto d = std::get_if<double>(&v))
      h = mix(h, std::hash<double>{}(*d));
    else
      h = mix(h, std::hash<std::string>{}(std::get<std::string>(v)));
  }
  for (ValueId v : n.inputs) h = mix(h, value_hash[size_t(v)]);
  for (ValueId v : n.outputs) h = mix(h, value_hash[size_t(v)] * 31);
  return h;
}

bool same_class(const Graph& g, const Node& a, const Node& b) {
  if (a.kind != b.kind || a.inputs.size() != b.inputs.size() ||
      a.outputs.size() != b.outputs.size())
    return false;
  const auto &ia = a.attrs.items(), &ib = b.attrs.items();
  size_t i = 0, j = 0;
  while (i < ia.size() || j < ib.size()) {
    if (i < ia.size() && ia[i].first == "layer") {
      ++i;
      continue;
    }
    if (j < ib.size() && ib[j].first == "layer") {
      ++j;
      continue;
    }
    if (i == ia.size() || j == ib.size() || ia[i] != ib[j]) return false;
    ++i, ++j;
  }
  for (size_t k = 0; k < a.inputs.size(); ++k)
    if (!same_type(g.value(a.inputs[k]), g.value(b.inputs[k]))) return false;
  for (size_t k = 0; k < a.outputs.size(); ++k)
    if (!same_type(g.value(a.outputs[k]), g.value(b.outputs[k]))) return false;
  return true;
}

}  // namespace

NodeGroups group_nodes(const Graph& g) {
  NodeGroups gr;
  gr.order = g.topo_order();
  gr.group_of.reserve(gr.order.size());
  // Each value's type hashed once, on first use (values are read by several nodes;
  // 0 = not yet hashed).
  std::vector<uint64_t> value_hash(g.value_capacity(), 0);
  auto fill = [&](const std::vector<ValueId>& vs) {
    for (ValueId v : vs)
      if (!value_hash[size_t(v)]) value_hash[size_t(v)] = hash_type(g.value(v)) | 1;
  };
  std::unordered_map<uint64_t, std::vector<int>> buckets;
  buckets.reserve(64);
  for (NodeId id : gr.order) {
    const Node& n = g.node(id);
    fill(n.inputs);
    fill(n.outputs);
    std::vector<int>& bucket = buckets[hash_node(n, value_hash)];
    int found = -1;
    for (int c : bucket)
      if (same_class(g, g.node(gr.representative[size_t(c)]), n)) {
        found = c;
        break;
      }
    if (found < 0) {
      found = int(gr.representative.size());
      gr.representative.push_back(id);
      gr.count.push_back(0);
      bucket.push_back(found);
    }
    gr.group_of.push_back(found);
    ++gr.count[size_t(found)];
  }
  return gr;
}

}  // namespace lathe
