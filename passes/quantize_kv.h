// quantize-kv: the KV cache takes the plan's dtype; int8/int4/fp8 store one scale per (token, head), writes quantize and attention dequantizes.
#pragma once

#include "passes/pass.h"

namespace lathe {

PassResult quantize_kv(Graph& g, const PassContext& ctx);

}  // namespace lathe
