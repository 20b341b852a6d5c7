// flash-attention: kv_read, QK^T, mask, softmax and PV become one flash_attention kernel in prefill (tiled, online softmax) and one decode_attention kernel in decode (split over the context, GQA-aware).
#pragma once

#include "passes/pass.h"

namespace lathe {

PassResult flash_attention(Graph& g, const PassContext& ctx);

}  // namespace lathe
