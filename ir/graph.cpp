#include "ir/graph.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <functional>
#include <queue>

#include "ir/assert.h"

namespace lathe {

std::string_view value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::input: return "input";
    case ValueKind::weight: return "weight";
    case ValueKind::state: return "state";
    case ValueKind::activation: return "activation";
  }
  return "?";
}

std::string_view phase_name(Phase p) { return p == Phase::prefill ? "prefill" : "decode"; }

// Vertices are node ids (dead nodes stay as isolated vertices so ids never move);
// one edge per (producer, user, input slot).
struct Graph::Impl {
  using Adj = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;
  Adj adj;
};

Graph::Graph() : impl_(std::make_unique<Impl>()) {}
Graph::~Graph() = default;
Graph::Graph(const Graph& o)
    : attrs(o.attrs),
      name(o.name),
      phase(o.phase),
      nodes_(o.nodes_),
      values_(o.values_),
      value_index_(o.value_index_),
      node_index_(o.node_index_),
      impl_(std::make_unique<Impl>(*o.impl_)) {}
Graph& Graph::operator=(const Graph& o) {
  if (this != &o) {
    Graph tmp(o);
    *this = std::move(tmp);
  }
  return *this;
}
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

ValueId Graph::add_value(Value v) {
  v.id = ValueId(values_.size());
  // One hash lookup: a name may be reused only when its holder is dead.
  auto [it, fresh] = value_index_.try_emplace(v.name, v.id);
  if (!fresh) {
    LATHE_ASSERT(!values_[size_t(it->second)].alive, "duplicate value name '" + v.name + "'");
    it->second = v.id;
  }
  if (v.kind == ValueKind::weight || v.kind == ValueKind::state) v.dtype = v.format.dtype;
  values_.push_back(std::move(v));
  return values_.back().id;
}

NodeId Graph::add_node(Node n) {
  n.id = NodeId(nodes_.size());
  n.alive = true;
  NodeId id = n.id;
  auto [it, fresh] = node_index_.try_emplace(n.name, id);
  if (!fresh) {
    LATHE_ASSERT(!nodes_[size_t(it->second)].alive, "duplicate node name '" + n.name + "'");
    it->second = id;
  }
  for (ValueId v : n.outputs) {
    LATHE_ASSERT(v >= 0 && size_t(v) < values_.size(), "node output out of range");
    LATHE_ASSERT(values_[size_t(v)].producer == kNone, "value already has a producer: " + values_[size_t(v)].name);
    values_[size_t(v)].producer = id;
  }
  nodes_.push_back(std::move(n));
  boost::add_vertex(impl_->adj);
  rewire_inputs(id);
  return id;
}

NodeId Graph::add_op(OpKind kind, std::string name, std::vector<ValueId> inputs, Attrs attrs,
                     std::vector<std::string> output_names) {
  Node n;
  n.kind = kind;
  n.name = std::move(name);
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  std::string error;
  std::vector<TypeShape> types = infer_outputs(*this, n, &error);
  LATHE_ASSERT(error.empty(), error);
  LATHE_ASSERT(types.size() == output_names.size(),
               n.name + ": " + std::to_string(types.size()) + " outputs inferred, " +
                   std::to_string(output_names.size()) + " named");
  for (size_t i = 0; i < types.size(); ++i) {
    Value v;
    v.name = output_names[i];
    v.kind = ValueKind::activation;
    v.dtype = types[i].dtype;
    v.shape = types[i].shape;
    n.outputs.push_back(add_value(std::move(v)));
  }
  return add_node(std::move(n));
}

void Graph::rewire_inputs(NodeId id) {
  auto& adj = impl_->adj;
  boost::clear_in_edges(size_t(id), adj);
  for (ValueId v : nodes_[size_t(id)].inputs) {
    NodeId p = values_[size_t(v)].producer;
    if (p != kNone) boost::add_edge(size_t(p), size_t(id), adj);
  }
}

void Graph::remove_node(NodeId id) {
  Node& n = nodes_[size_t(id)];
  LATHE_ASSERT(n.alive, "removing a dead node");
  // Which outputs are still read, found through the node's out-edges before they go
  // (afterwards an output has no producer and users() would scan every node).
  std::vector<char> used(n.outputs.size(), 0);
  const auto& adj = impl_->adj;
  for (auto [e, end] = boost::out_edges(size_t(id), adj); e != end; ++e) {
    const Node& u = nodes_[boost::target(*e, adj)];
    if (!u.alive) continue;
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (std::find(u.inputs.begin(), u.inputs.end(), n.outputs[k]) != u.inputs.end()) used[k] = 1;
  }
  boost::clear_vertex(size_t(id), impl_->adj);
  n.alive = false;
  // Users of the outputs keep pointing at them; the caller rewires them (or the
  // verifier reports the dangling value).
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    Value& v = values_[size_t(n.outputs[k])];
    v.producer = kNone;
    if (!used[k]) v.alive = false;
  }
}

void Graph::replace_all_uses(ValueId from, ValueId to) {
  if (from == to) return;
  for (NodeId u : users(from)) {
    for (ValueId& v : nodes_[size_t(u)].inputs)
      if (v == from) v = to;
    rewire_inputs(u);
  }
}

void Graph::set_inputs(NodeId id, std::vector<ValueId> inputs) {
  nodes_[size_t(id)].inputs = std::move(inputs);
  rewire_inputs(id);
}

void Graph::set_outputs(NodeId id, std::vector<ValueId> outputs) {
  Node& n = nodes_[size_t(id)];
  for (ValueId v : n.outputs) values_[size_t(v)].producer = kNone;
  for (ValueId v : outputs) {
    Value& val = values_[size_t(v)];
    LATHE_ASSERT(val.producer == kNone || val.producer == id, "value already produced: " + val.name);
    val.producer = id;
    val.alive = true;
  }
  n.outputs = std::move(outputs);
  // Out-edges depend on which values this node produces: rebuild its users' edges.
  boost::clear_out_edges(size_t(id), impl_->adj);
  for (ValueId v : n.outputs)
    for (size_t u = 0; u < nodes_.size(); ++u)
      if (nodes_[u].alive && std::count(nodes_[u].inputs.begin(), nodes_[u].inputs.end(), v))
        rewire_inputs(NodeId(u));
}

NodeId Graph::replace_nodes(const std::vector<NodeId>& olds, Node fused) {
  LATHE_ASSERT(!olds.empty(), "replace_nodes needs at least one node");
  NodeId slot = *std::min_element(olds.begin(), olds.end());
  std::vector<ValueId> old_outputs;
  std::vector<NodeId> old_users;  // nodes fed by the old nodes: their edges get rebuilt
  for (NodeId id : olds) {
    Node& n = nodes_[size_t(id)];
    LATHE_ASSERT(n.alive, "replacing a dead node " + n.name);
    for (auto [e, end] = boost::out_edges(size_t(id), impl_->adj); e != end; ++e)
      old_users.push_back(NodeId(boost::target(*e, impl_->adj)));
    boost::clear_vertex(size_t(id), impl_->adj);
    n.alive = false;
    for (ValueId v : n.outputs) {
      values_[size_t(v)].producer = kNone;
      old_outputs.push_back(v);
    }
  }
  fused.id = slot;
  fused.alive = true;
  if (fused.name.empty()) fused.name = nodes_[size_t(slot)].name;
  LATHE_ASSERT(find_node(fused.name) == kNone, "duplicate node name '" + fused.name + "'");
  for (ValueId v : fused.outputs) {
    LATHE_ASSERT(values_[size_t(v)].producer == kNone, "fused output already produced: " + values_[size_t(v)].name);
    values_[size_t(v)].producer = slot;
    values_[size_t(v)].alive = true;
  }
  for (ValueId v : old_outputs)
    if (values_[size_t(v)].producer == kNone) values_[size_t(v)].alive = false;
  node_index_[fused.name] = slot;
  nodes_[size_t(slot)] = std::move(fused);
  rewire_inputs(slot);
  // Users of the fused outputs get their in-edges from the new producer.
  std::sort(old_users.begin(), old_users.end());
  old_users.erase(std::unique(old_users.begin(), old_users.end()), old_users.end());
  for (NodeId u : old_users)
    if (nodes_[size_t(u)].alive && u != slot) rewire_inputs(u);
  return slot;
}

void Graph::remove_dead_values() {
  std::vector<int> uses(values_.size(), 0);
  for (const Node& n : nodes_)
    if (n.alive)
      for (ValueId v : n.inputs) ++uses[size_t(v)];
  for (Value& v : values_) {
    if (!v.alive || uses[size_t(v.id)] > 0) continue;
    if (v.kind == ValueKind::activation && v.producer == kNone) v.alive = false;
    if (v.kind == ValueKind::weight) v.alive = false;
  }
}

std::string Graph::unique_value_name(std::string_view base) const {
  std::string name(base);
  for (int i = 2; find_value(name) != kNone; ++i) name = std::string(base) + "." + std::to_string(i);
  return name;
}

std::string Graph::unique_node_name(std::string_view base) const {
  std::string name(base);
  for (int i = 2; find_node(name) != kNone; ++i) name = std::string(base) + "." + std::to_string(i);
  return name;
}

size_t Graph::num_nodes() const {
  return size_t(std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return n.alive; }));
}

ValueId Graph::find_value(std::string_view name) const {
  auto it = value_index_.find(name);
  if (it == value_index_.end() || !values_[size_t(it->second)].alive) return kNone;
  return it->second;
}

NodeId Graph::find_node(std::string_view name) const {
  auto it = node_index_.find(name);
  if (it == node_index_.end() || !nodes_[size_t(it->second)].alive) return kNone;
  return it->second;
}

std::vector<NodeId> Graph::topo_order() const {
  const auto& adj = impl_->adj;
  // Fast path: when every edge runs from a lower id to a higher one (graphs are built
  // in order and fusion reuses the lowest id), the lowest-id-first order below is the
  // ascending order of the alive ids.
  bool forward = true;
  for (size_t i = 0; i < nodes_.size() && forward; ++i)
    if (nodes_[i].alive)
      for (auto [e, end] = boost::out_edges(i, adj); e != end; ++e)
        if (boost::target(*e, adj) <= i) {
          forward = false;
          break;
        }
  if (forward) {
    std::vector<NodeId> order;
    order.reserve(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i].alive) order.push_back(NodeId(i));
    return order;
  }
  std::vector<int> indeg(nodes_.size(), 0);
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].alive) indeg[i] = int(boost::in_degree(i, adj));
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].alive && indeg[i] == 0) ready.push(NodeId(i));
  std::vector<NodeId> order;
  order.reserve(nodes_.size());
  while (!ready.empty()) {
    NodeId n = ready.top();
    ready.pop();
    order.push_back(n);
    for (auto [e, end] = boost::out_edges(size_t(n), adj); e != end; ++e) {
      size_t t = boost::target(*e, adj);
      if (--indeg[t] == 0) ready.push(NodeId(t));
    }
  }
  return order;
}

bool Graph::has_cycle() const { return topo_order().size() != num_nodes(); }

std::vector<NodeId> Graph::users(ValueId v) const {
  std::vector<NodeId> out;
  NodeId p = values_[size_t(v)].producer;
  auto uses = [&](NodeId u) {
    const Node& n = nodes_[size_t(u)];
    return n.alive && std::find(n.inputs.begin(), n.inputs.end(), v) != n.inputs.end();
  };
  if (p != kNone) {
    const auto& adj = impl_->adj;
    for (auto [e, end] = boost::out_edges(size_t(p), adj); e != end; ++e) {
      NodeId u = NodeId(boost::target(*e, adj));
      if (uses(u)) out.push_back(u);
    }
  } else {
    for (const Node& n : nodes_)
      if (uses(n.id)) out.push_back(n.id);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<ValueId> Graph::values_of(ValueKind k) const {
  std::vector<ValueId> out;
  for (const Value& v : values_)
    if (v.alive && v.kind == k) out.push_back(v.id);
  return out;
}

}  // namespace lathe
