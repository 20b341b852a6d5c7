#include "passes/fuse_qkv.h"

#include "passes/fuse_siblings.h"

namespace lathe {

PassResult fuse_qkv(Graph& g, const PassContext&) {
  // Attention projections are the sibling GEMMs whose outputs reach RoPE or the
  // KV write.
  return fuse_sibling_gemms(
      g,
      [](const Graph& gr, const std::vector<NodeId>& m) {
        return outputs_feed(gr, m, {OpKind::rope, OpKind::kv_write, OpKind::rope_kvwrite});
      },
      "qkv");
}

}  // namespace lathe
