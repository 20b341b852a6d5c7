// fuse-moe: the MoE dispatch gather becomes the expert GEMM's prologue and the weighted combine (with the residual add) the down GEMM's epilogue.
#pragma once

#include "passes/pass.h"

namespace lathe {

PassResult fuse_moe(Graph& g, const PassContext& ctx);

}  // namespace lathe
