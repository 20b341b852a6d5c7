// The IR verifier: structural and type invariants every pass must keep.
//  1. every alive node's inputs are alive values and its outputs name it producer;
//  2. output types equal what shape inference derives from inputs and attributes;
//  3. the graph is acyclic; every read activation has a producer;
//  4. when a memory plan is present (attr arena_bytes), every activation has an
//     offset inside the arena and no two buffers that are live at once overlap.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace lathe {

std::vector<std::string> verify(const Graph& g);
// Aborts with every problem listed when the graph is invalid (internal error:
// passes must never produce one). `context` names the pass that just ran.
void verify_or_die(const Graph& g, const std::string& context);

}  // namespace lathe
