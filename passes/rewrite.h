// Small rewrite helpers shared by the fusion passes.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace lathe {

// "name:kind" of a node as it appears in absorbed lists.
std::string op_tag(const Node& n);
// Appends what `part` holds (itself when it absorbed nothing) to `into.absorbed`.
void absorb(Node& into, const Node& part);
// The single alive user of v, or kNone when v has zero or several users.
NodeId sole_user(const Graph& g, ValueId v);
// Layer prefix of a node name: "l3.wq" -> "l3.", "l3.experts.w_up" -> "l3.experts.".
std::string name_prefix(const std::string& name);

}  // namespace lathe
