// memory-plan: liveness of activation buffers over the launch order and a greedy best-fit arena (largest first, 256-byte aligned) that reuses memory whose lifetimes do not overlap. Sets each activation's offset and the graph attribute arena_bytes.
#pragma once

#include "passes/pass.h"

namespace lathe {

PassResult memory_plan(Graph& g, const PassContext& ctx);

}  // namespace lathe
