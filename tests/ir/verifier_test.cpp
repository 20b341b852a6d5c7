#include "ir/verifier.h"

#include <gtest/gtest.h>

#include <limits>

#include <algorithm>

#include "frontend/builder.h"
#include "frontend/specs.h"
#include "ir/buffers.h"

namespace lathe {
namespace {

Graph tiny_graph(Phase p = Phase::decode) {
  BuildOptions o;
  o.phase = p;
  o.workload = {1, 8, 4};
  return build_graph(load_model("tiny"), o);
}

bool mentions(const std::vector<std::string>& errs, const std::string& what) {
  for (const auto& e : errs)
    if (e.find(what) != std::string::npos) return true;
  return false;
}

TEST(Verifier, AcceptsBuiltGraphs) {
  for (const char* m : {"tiny", "tiny-moe", "llama-3-8b", "mixtral-8x7b"})
    for (Phase p : {Phase::prefill, Phase::decode}) {
      BuildOptions o;
      o.phase = p;
      auto errs = verify(build_graph(load_model(m), o));
      EXPECT_TRUE(errs.empty()) << m << ": " << (errs.empty() ? "" : errs[0]);
    }
}

TEST(Verifier, CatchesShapeMismatch) {
  Graph g = tiny_graph();
  ValueId w = g.find_value("layers.0.wq");
  g.value_mut(w).shape = {Dim::c(128), Dim::c(100)};  // wrong reduction dim
  EXPECT_TRUE(mentions(verify(g), "reduction dim"));
}

TEST(Verifier, CatchesWrongOutputType) {
  Graph g = tiny_graph();
  ValueId v = g.find_value("l0.q");
  g.value_mut(v).dtype = DType::bf16;
  EXPECT_TRUE(mentions(verify(g), "inference gives"));
}

TEST(Verifier, CatchesDanglingInput) {
  Graph g = tiny_graph();
  g.remove_node(g.find_node("l0.wq"));
  EXPECT_TRUE(mentions(verify(g), "no producer"));
}

// remove_node keeps an output alive while a live node still reads it, and drops it
// otherwise.
TEST(Graph, RemovedNodeOutputsLiveWhileRead) {
  Graph g = tiny_graph();
  ValueId q = g.find_value("l0.q"), q_rot = g.find_value("l0.q_rot");
  g.remove_node(g.find_node("l0.rope_q"));  // l0.q_rot is still read by l0.qk
  EXPECT_TRUE(g.value(q_rot).alive);
  EXPECT_EQ(g.producer(q_rot), kNone);
  g.remove_node(g.find_node("l0.wq"));  // nothing alive reads l0.q any more
  EXPECT_FALSE(g.value(q).alive);
  EXPECT_EQ(g.producer(q), kNone);
}

TEST(Verifier, CatchesCycle) {
  Graph g = tiny_graph();
  // Feed the layer's output back into its first norm.
  NodeId norm = g.find_node("l0.attn_norm");
  std::vector<ValueId> in = g.node(norm).inputs;
  in[0] = g.find_value("x1");
  g.set_inputs(norm, in);
  EXPECT_TRUE(mentions(verify(g), "cycle"));
}

// topo_order is lowest-id-first Kahn order: ascending ids when every edge runs
// forward, and producers first when a node reads a value made by a higher id.
TEST(Graph, TopoOrderWithBackwardEdges) {
  Graph g = tiny_graph();
  std::vector<NodeId> plain = g.topo_order();
  ASSERT_EQ(plain.size(), g.num_nodes());
  EXPECT_TRUE(std::is_sorted(plain.begin(), plain.end()));
  // A copy of the first norm, added last (highest id), feeds the layer's q projection
  // instead of the original: an edge from a higher id to a lower one.
  NodeId norm = g.find_node("l0.attn_norm");
  NodeId wq = g.find_node("l0.wq");
  Node copy = g.node(norm);
  copy.name = "l0.attn_norm.copy";
  copy.outputs.clear();
  Value out = g.value(g.node(norm).outputs[0]);
  out.name = "l0.attn_norm.copy.out";
  out.producer = kNone;
  copy.outputs.push_back(g.add_value(out));
  NodeId late = g.add_node(copy);
  std::vector<ValueId> in = g.node(wq).inputs;
  in[0] = copy.outputs[0];
  g.set_inputs(wq, in);
  ASSERT_GT(late, wq);
  std::vector<NodeId> order = g.topo_order();
  ASSERT_EQ(order.size(), g.num_nodes());
  std::vector<size_t> at(g.node_capacity());
  for (size_t i = 0; i < order.size(); ++i) at[size_t(order[i])] = i;
  for (NodeId n : order)
    for (ValueId v : g.node(n).inputs)
      if (g.producer(v) != kNone) {
        EXPECT_LT(at[size_t(g.producer(v))], at[size_t(n)]) << g.node(n).name;
      }
  EXPECT_LT(at[size_t(late)], at[size_t(wq)]);
  EXPECT_TRUE(verify(g).empty());
}

TEST(Verifier, CatchesOverlappingLiveBuffers) {
  Graph g = tiny_graph();
  // Every activation at offset 0: values live at the same time collide.
  for (size_t v = 0; v < g.value_capacity(); ++v)
    if (g.value(ValueId(v)).kind == ValueKind::activation) g.value_mut(ValueId(v)).offset = 0;
  g.attrs.set("arena_bytes", int64_t(1) << 30);
  EXPECT_TRUE(mentions(verify(g), "overlap"));
  // And a buffer past the arena end.
  g.attrs.set("arena_bytes", int64_t(16));
  EXPECT_TRUE(mentions(verify(g), "past the arena"));
}

TEST(Verifier, AcceptsDisjointBuffers) {
  Graph g = tiny_graph();
  int64_t off = 0;
  Bindings b = graph_bindings(g);
  for (size_t v = 0; v < g.value_capacity(); ++v)
    if (g.value(ValueId(v)).kind == ValueKind::activation && g.value(ValueId(v)).alive) {
      g.value_mut(ValueId(v)).offset = off;
      off += int64_t(value_bytes(g.value(ValueId(v)), b));
    }
  g.attrs.set("arena_bytes", off);
  auto errs = verify(g);
  EXPECT_TRUE(errs.empty()) << (errs.empty() ? "" : errs[0]);
  // An offset near 2^63 wrapped past the arena end and was accepted (a hand-edited
  // plan then crashed in a kernel).
  ValueId first = kNone;
  for (size_t v = 0; v < g.value_capacity() && first == kNone; ++v)
    if (g.value(ValueId(v)).kind == ValueKind::activation && g.value(ValueId(v)).alive) first = ValueId(v);
  ASSERT_NE(first, kNone);
  g.value_mut(first).offset = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(mentions(verify(g), "past the arena"));
}

}  // namespace
}  // namespace lathe
