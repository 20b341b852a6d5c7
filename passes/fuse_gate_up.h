// fuse-gate-up: the FFN gate and up projections (dense, or of the experts) become one GEMM with two weights.
#pragma once

#include "passes/pass.h"

namespace lathe {

PassResult fuse_gate_up(Graph& g, const PassContext& ctx);

}  // namespace lathe
