// Text form of the IR: one statement per line, prints and parses back exactly
// (print(parse(print(g))) == print(g)).
//
//   lathe-ir 1
//   graph llama-3-8b.decode phase=decode
//   attr act_dtype = "f32"
//   input %tokens : i32[B, S]
//   state $kv : bf16[32, 2, B, T, 8, 128]
//   weight @layers.0.wq : int4:g128[4096, 4096]
//   node l0.q = matmul(%l0.h, @layers.0.wq) {prologue = "none"} -> %l0.q: f32[B, S, 4096] @0
//   end
//
// Sigils: % activations and inputs, @ weights, $ state. `@N` after an output type is
// its arena offset from the memory plan; `absorbed(...)` lists ops a fused node holds.
#pragma once

#include <string>
#include <string_view>

#include "ir/graph.h"

namespace lathe {

std::string print_graph(const Graph& g);
// Parses text IR. Throws lathe::Error("<source>:<line>: why") on malformed input.
Graph parse_graph(std::string_view text, std::string_view source = "<ir>");
// Graphviz DOT of the graph (weights drawn as small notes beside their users).
std::string graph_to_dot(const Graph& g);
// "%name", "@name" or "$name" for a value.
std::string value_ref(const Value& v);
// Prints an attribute value as the parser reads it back.
std::string attr_value_str(const AttrValue& v);

}  // namespace lathe
