// Groups of identical kernels: nodes of the same kind, attributes (but the layer
// index) and operand types cost the same on every binding, so a 32-layer graph is
// costed as about a dozen representatives. Shared by simulate() and the step coster
// of the serving simulator.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace lathe {

struct NodeGroups {
  std::vector<NodeId> order;           // alive nodes in launch (topological) order
  std::vector<int> group_of;           // group of each position in `order`
  std::vector<NodeId> representative;  // first node of each group
  std::vector<int> count;              // nodes in each group
};

NodeGroups group_nodes(const Graph& g);

}  // namespace lathe
