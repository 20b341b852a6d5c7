// The IR graph: values (inputs, weights, state, activations) and nodes (ops or, after
// lowering, kernels). Nodes are plain structs addressed by id; edges follow values
// from producer to users. Boost.Graph holds the adjacency behind this API so passes
// never see it. Iteration is by id and topological order is deterministic (Kahn's
// algorithm, lowest id first), so printing a graph always gives the same text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/dtype.h"
#include "ir/ops.h"
#include "ir/shape.h"

namespace lathe {

using NodeId = int32_t;
using ValueId = int32_t;
inline constexpr int32_t kNone = -1;

enum class ValueKind : uint8_t {
  input,       // fed by the runtime each step (token ids)
  weight,      // model parameter, stored in `format`
  state,       // persistent across steps (the KV cache), stored in `format`
  activation,  // produced by a node
};
std::string_view value_kind_name(ValueKind k);

struct Value {
  ValueId id = kNone;
  std::string name;  // unique in the graph; weights use checkpoint-style names
  ValueKind kind = ValueKind::activation;
  DType dtype = DType::f32;  // element type (for weights and state: format.dtype)
  Format format;             // storage format of weights and state
  Shape shape;
  NodeId producer = kNone;
  int64_t offset = -1;  // byte offset in the activation arena (memory-plan), -1 = none
  bool alive = true;

  TypeShape type() const { return TypeShape{dtype, shape}; }
};

struct Node {
  NodeId id = kNone;
  OpKind kind = OpKind::add;
  std::string name;  // unique in the graph, e.g. "l0.qkv"
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  Attrs attrs;
  // Ops folded into this node by fusion passes, as "name:kind" (the node's own
  // original op first). Empty for a node no pass touched.
  std::vector<std::string> absorbed;
  bool alive = true;
};

enum class Phase : uint8_t { prefill, decode };
std::string_view phase_name(Phase p);

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph& other);
  Graph& operator=(const Graph& other);
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;

  // Graph-level attributes: model, phase, kv_layout, kv_dtype, act_dtype, bindings...
  Attrs attrs;
  std::string name;
  Phase phase = Phase::decode;

  // ---- building ----
  ValueId add_value(Value v);  // name must be unique; returns its id
  // Adds a node whose output values already exist (value ids in node.outputs).
  NodeId add_node(Node n);
  // Adds a node, creating one activation output per (name, type) and checking the
  // types against shape inference. Aborts with a message on a mismatch.
  NodeId add_op(OpKind kind, std::string name, std::vector<ValueId> inputs, Attrs attrs,
                std::vector<std::string> output_names);

  // ---- mutation ----
  // Removes a node; its outputs lose their producer (and are removed when unused).
  void remove_node(NodeId id);
  // Points every use of `from` at `to`.
  void replace_all_uses(ValueId from, ValueId to);
  // Replaces a node's inputs (keeps edges in sync).
  void set_inputs(NodeId id, std::vector<ValueId> inputs);
  // Makes `id` the producer of `outputs` (values must exist and have no producer or
  // be produced by `id` already).
  void set_outputs(NodeId id, std::vector<ValueId> outputs);
  // Fusion: removes `olds` and puts `fused` in their place, reusing the lowest id so
  // launch order stays put. `fused.outputs` may name outputs of the old nodes (they
  // change producer); the old nodes' other outputs die. Returns the new node's id.
  NodeId replace_nodes(const std::vector<NodeId>& olds, Node fused);
  // Removes activation values with no producer and no users, and unused weights.
  void remove_dead_values();
  // Finds or makes a unique value/node name starting with `base`.
  std::string unique_value_name(std::string_view base) const;
  std::string unique_node_name(std::string_view base) const;

  // ---- queries ----
  const Node& node(NodeId id) const { return nodes_[size_t(id)]; }
  Node& node_mut(NodeId id) { return nodes_[size_t(id)]; }
  const Value& value(ValueId id) const { return values_[size_t(id)]; }
  Value& value_mut(ValueId id) { return values_[size_t(id)]; }
  size_t node_capacity() const { return nodes_.size(); }
  size_t value_capacity() const { return values_.size(); }
  size_t num_nodes() const;  // alive
  ValueId find_value(std::string_view name) const;  // kNone when absent
  NodeId find_node(std::string_view name) const;
  // Alive nodes in deterministic topological order.
  std::vector<NodeId> topo_order() const;
  // Alive node ids using value `v`, ascending, each once.
  std::vector<NodeId> users(ValueId v) const;
  NodeId producer(ValueId v) const { return values_[size_t(v)].producer; }
  // Alive values of a kind, ascending id.
  std::vector<ValueId> values_of(ValueKind k) const;
  // True when the graph has a cycle (the verifier reports it).
  bool has_cycle() const;

 private:
  struct Impl;  // Boost adjacency list
  void rewire_inputs(NodeId id);
  std::vector<Node> nodes_;
  std::vector<Value> values_;
  // Name -> latest id with that name (the entry may be dead; lookups check).
  // Transparent hashing: lookups by string_view build no string. Not noexcept on
  // purpose: libstdc++ then stores each name's hash in its node, so copying a graph
  // (a sweep copies fused graphs once per format) does not hash every name again.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using NameIndex = std::unordered_map<std::string, int32_t, NameHash, std::equal_to<>>;
  NameIndex value_index_;
  NameIndex node_index_;
  std::unique_ptr<Impl> impl_;
};

// Shape inference for a node: the output types the node's kind and attributes imply
// for its inputs. Returns an error message (and empty vector) on a mismatch.
std::vector<TypeShape> infer_outputs(const Graph& g, const Node& n, std::string* error);

}  // namespace lathe
