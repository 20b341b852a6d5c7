// fuse-epilogue: SiLU(gate) x up folds into a gate/up GEMM's epilogue, and a residual add into the GEMM that produces the addend.
#pragma once

#include "passes/pass.h"

namespace lathe {

PassResult fuse_epilogue(Graph& g, const PassContext& ctx);

}  // namespace lathe
