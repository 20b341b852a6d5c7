// Shared by fuse-qkv and fuse-gate-up: GEMMs that read the same activation (with the
// same prologue, and for experts the same routing) become one GEMM with several
// weights and outputs, so the activation is read once and one kernel launches.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace lathe {

// `accept` decides whether a group of sibling GEMMs (ids ascending) is this pass's
// business; `suffix` names the fused node ("qkv" -> "l0.qkv").
PassResult fuse_sibling_gemms(Graph& g, const std::function<bool(const Graph&, const std::vector<NodeId>&)>& accept,
                              const std::string& suffix);

// True when some user of some output of `nodes` has one of `kinds`.
bool outputs_feed(const Graph& g, const std::vector<NodeId>& nodes, std::initializer_list<OpKind> kinds);

}  // namespace lathe
