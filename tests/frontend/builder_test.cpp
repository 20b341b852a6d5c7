#include "frontend/builder.h"

#include <gtest/gtest.h>

#include <map>

#include "frontend/specs.h"
#include "ir/assert.h"
#include "ir/buffers.h"
#include "ir/verifier.h"

namespace lathe {
namespace {

std::map<OpKind, int> kind_counts(const Graph& g) {
  std::map<OpKind, int> c;
  for (NodeId n : g.topo_order()) ++c[g.node(n).kind];
  return c;
}

TEST(Builder, DenseDecodeLayerStructure) {
  BuildOptions o;
  o.phase = Phase::decode;
  Graph g = build_graph(load_model("llama-3-8b"), o);
  auto c = kind_counts(g);
  EXPECT_EQ(c[OpKind::matmul], 32 * 7);  // q k v o gate up down
  EXPECT_EQ(c[OpKind::rms_norm], 32 * 2 + 1);
  EXPECT_EQ(c[OpKind::mask], 0);  // decode: the newest token sees the whole context
  EXPECT_EQ(c[OpKind::lm_head], 1);
  EXPECT_EQ(c[OpKind::sample], 1);
  EXPECT_TRUE(verify(g).empty());
  Bindings b = graph_bindings(g);
  EXPECT_EQ(b.S, 1);
}

TEST(Builder, PrefillHasCausalMask) {
  BuildOptions o;
  o.phase = Phase::prefill;
  o.workload = {2, 300, 10};
  Graph g = build_graph(load_model("tiny"), o);
  EXPECT_EQ(kind_counts(g)[OpKind::mask], 2);
  Bindings b = graph_bindings(g);
  EXPECT_EQ(b.B, 2);
  EXPECT_EQ(b.S, 300);
  EXPECT_EQ(b.T, 300);
}

TEST(Builder, MoeLayerStructure) {
  BuildOptions o;
  Graph g = build_graph(load_model("mixtral-8x7b"), o);
  auto c = kind_counts(g);
  EXPECT_EQ(c[OpKind::moe_router], 32);
  EXPECT_EQ(c[OpKind::expert_matmul], 32 * 3);
  EXPECT_EQ(c[OpKind::moe_combine], 32);
  const Value& w = g.value(g.find_value("layers.0.experts.w_gate"));
  EXPECT_EQ(shape_str(w.shape), "[8, 14336, 4096]");
}

TEST(Builder, WeightBytesEqualParameterCount) {
  for (const char* name : {"llama-3-8b", "mixtral-8x7b", "tiny"}) {
    ModelSpec m = load_model(name);
    BuildOptions o;
    Graph g = build_graph(m, o);
    double elems = 0;
    Bindings b = graph_bindings(g);
    for (ValueId v : g.values_of(ValueKind::weight)) elems += double(num_elements(g.value(v).shape, b));
    EXPECT_DOUBLE_EQ(elems, double(m.param_count())) << name;
  }
}

TEST(Builder, TensorParallelShardsHeadsAndFfn) {
  BuildOptions o;
  o.tp = 2;
  Graph g = build_graph(load_model("llama-3-8b"), o);
  EXPECT_EQ(shape_str(g.value(g.find_value("layers.0.wq")).shape), "[2048, 4096]");
  EXPECT_EQ(shape_str(g.value(g.find_value("layers.0.wk")).shape), "[512, 4096]");
  EXPECT_EQ(shape_str(g.value(g.find_value("layers.0.w_gate")).shape), "[7168, 4096]");
  EXPECT_EQ(kind_counts(g)[OpKind::all_reduce], 64);
  EXPECT_TRUE(verify(g).empty());
  o.tp = 3;
  EXPECT_THROW(build_graph(load_model("llama-3-8b"), o), Error);
}

}  // namespace
}  // namespace lathe
