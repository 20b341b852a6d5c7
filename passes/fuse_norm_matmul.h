// fuse-norm-matmul: an RMSNorm whose every user is a GEMM is folded into those GEMMs' prologue (each recomputes the row's scale), so the normed activation is never written.
#pragma once

#include "passes/pass.h"

namespace lathe {

PassResult fuse_norm_matmul(Graph& g, const PassContext& ctx);

}  // namespace lathe
