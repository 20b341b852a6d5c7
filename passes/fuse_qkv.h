// fuse-qkv: the Q, K and V projections of a layer become one GEMM (three weights, three outputs) that reads the normed activation once.
#pragma once

#include "passes/pass.h"

namespace lathe {

PassResult fuse_qkv(Graph& g, const PassContext& ctx);

}  // namespace lathe
