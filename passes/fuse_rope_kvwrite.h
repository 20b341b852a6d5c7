// fuse-rope-kvwrite: RoPE on Q and K and the K/V cache write of a layer become one kernel (quantizing when the KV cache is int8/int4).
#pragma once

#include "passes/pass.h"

namespace lathe {

PassResult fuse_rope_kvwrite(Graph& g, const PassContext& ctx);

}  // namespace lathe
