// kv-layout: chooses the KV-cache layout (LHTD, LTHD, TLHD, paged:N) by the cost of the reads decode attention makes on the target (contiguity of its runs), unless the plan forces one. The choice and the reason go into graph attributes kv_layout and kv_layout_reason.
#pragma once

#include "passes/pass.h"

namespace lathe {

PassResult kv_layout(Graph& g, const PassContext& ctx);

}  // namespace lathe
