#include "ir/text.h"

#include <gtest/gtest.h>

#include "frontend/builder.h"
#include "frontend/specs.h"
#include "ir/assert.h"
#include "ir/verifier.h"

namespace lathe {
namespace {

Graph build(const std::string& model, Phase phase, int64_t tp = 1) {
  BuildOptions o;
  o.phase = phase;
  o.tp = tp;
  o.workload = {2, 64, 16};
  return build_graph(load_model(model), o);
}

TEST(Text, RoundTripsEveryBuiltinModelAndPhase) {
  for (const std::string& name : builtin_names("models"))
    for (Phase p : {Phase::prefill, Phase::decode}) {
      Graph g = build(name, p);
      std::string once = print_graph(g);
      Graph back = parse_graph(once, name);
      EXPECT_TRUE(verify(back).empty()) << name;
      EXPECT_EQ(print_graph(back), once) << name << " " << phase_name(p);
      EXPECT_EQ(back.num_nodes(), g.num_nodes());
    }
}

TEST(Text, RoundTripsTensorParallelGraphs) {
  Graph g = build("llama-3-8b", Phase::decode, 2);
  std::string once = print_graph(g);
  EXPECT_NE(once.find("all_reduce"), std::string::npos);
  EXPECT_EQ(print_graph(parse_graph(once)), once);
}

TEST(Text, PreservesOffsetsAbsorbedAndAttributes) {
  Graph g = build("tiny", Phase::decode);
  NodeId n = g.find_node("l0.wq");
  g.node_mut(n).absorbed = {"l0.wq:matmul", "l0.attn_norm:rms_norm"};
  g.node_mut(n).attrs.set("note", std::string("a \"quoted\" string"));
  g.node_mut(n).attrs.set("ratio", 0.1);
  g.value_mut(g.node(n).outputs[0]).offset = 4096;
  std::string once = print_graph(g);
  Graph back = parse_graph(once);
  NodeId m = back.find_node("l0.wq");
  EXPECT_EQ(back.node(m).absorbed, g.node(n).absorbed);
  EXPECT_EQ(back.node(m).attrs.s("note"), "a \"quoted\" string");
  EXPECT_DOUBLE_EQ(back.node(m).attrs.f("ratio"), 0.1);
  EXPECT_EQ(back.value(back.node(m).outputs[0]).offset, 4096);
  EXPECT_EQ(print_graph(back), once);
}

TEST(Text, MalformedInputGivesLocatedErrors) {
  std::string good = print_graph(build("tiny", Phase::decode));
  auto error_of = [](const std::string& text) {
    try {
      parse_graph(text, "x.ir");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
  EXPECT_NE(error_of("lathe-ir 2\n").find("version"), std::string::npos);
  EXPECT_NE(error_of(good.substr(0, good.size() / 2)).find("x.ir"), std::string::npos);
  std::string bad_op = good;
  bad_op.replace(bad_op.find("= rms_norm("), 11, "= rms_nrom(");
  EXPECT_NE(error_of(bad_op).find("unknown op 'rms_nrom'"), std::string::npos);
  std::string bad_ref = good;
  bad_ref.replace(bad_ref.find("(%x0"), 4, "(%zz");
  std::string e = error_of(bad_ref);
  EXPECT_NE(e.find("unknown value 'zz'"), std::string::npos) << e;
  EXPECT_NE(e.find("x.ir:"), std::string::npos);
  // A repeated attribute was taken silently (the last one won).
  std::string twice = good;
  twice.insert(twice.find("attr B = "), "attr B = 4\n");
  EXPECT_NE(error_of(twice).find("graph attribute 'B' is given twice"), std::string::npos) << error_of(twice);
  std::string node_twice = good;
  node_twice.replace(node_twice.find("{eps = "), 7, "{eps = 1, eps = ");
  EXPECT_NE(error_of(node_twice).find("attribute 'eps' is given twice"), std::string::npos) << error_of(node_twice);
}

}  // namespace
}  // namespace lathe
