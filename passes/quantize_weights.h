// quantize-weights: GEMM weights take the plan's format (int8 per channel or block-32, int4 g32/g64/g128, fp8 where the target has it, or a float type); GEMMs become dequantizing GEMMs/GEMVs. Embedding tables, norms and the MoE router keep the model dtype.
#pragma once

#include "passes/pass.h"

namespace lathe {

PassResult quantize_weights(Graph& g, const PassContext& ctx);

}  // namespace lathe
