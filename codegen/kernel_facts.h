// Facts about a lowered node that every kernel emitter specializes on, computed in
// one place for codegen/cpu and codegen/cuda: format codes (the Fmt enums of the
// kernel preludes) and the KV cache's geometry.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace lathe {

// F32 0, F16 1, BF16 2, I8 3, I4 4, FP8 5 (both preludes use these values).
int format_code(DType t);

struct KvFacts {
  int format = 0;  // format_code of the cache dtype
  int layout = 0;  // LHTD 0, LTHD 1, TLHD 2, paged 3
  int64_t layers = 0, kv_heads = 0, head_dim = 0;
  int64_t capacity = 0;  // positions per slot (the plan's final context)
  int64_t block = 16;    // paged block size
  int64_t slots = 0;     // sequences (the plan's batch)
};
// Throws lathe::Error when the graph has no KV state or a bad layout attribute.
KvFacts kv_facts(const Graph& g);
// "KF, LAY, L, KVH, TCAP, NB, SLOTS" template arguments.
std::string kv_template_args(const KvFacts& k);

// A kernel's buffer slots, in kernel_bindings order (codegen/cpu/emit_cpu.h): the
// slot of each input's data and scales and of each output (-1: not passed), and what
// each slot holds ("x f32[B,S,H]", "wq scales<scales_label>", "-> y f32[...]"), the
// text the emitters print in each kernel's header comment.
struct KernelBuffers {
  std::vector<int> data, scales, outs;
  std::vector<std::string> bufs;
};
KernelBuffers kernel_buffers(const Graph& g, const Node& n, const std::string& scales_label);

}  // namespace lathe
