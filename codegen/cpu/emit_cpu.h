// codegen/cpu: one C++ kernel per lowered node, specialized with the node's
// constants (dims, dtypes, KV layout, group size) as template arguments of the
// building blocks in kernel_prelude.h / kernel_lib.h. Each kernel is a complete
// translation unit for the JIT (runtime/cpu/jit.h); identical layers give identical
// sources (the layer index is a run-time argument), so they compile once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace lathe {

struct CpuKernel {
  NodeId node = kNone;
  std::string node_name;
  std::string label;   // kernel label (simulator/cost.h)
  std::string symbol;  // extern "C" function name, k_<hash of the body>
  std::string function;  // the kernel function: what is compiled (identical across layers)
  std::string body;      // the function with a comment naming the node and its buffers
  int64_t layer = 0;   // iargs[0]
  int64_t scratch_floats = 0;  // per thread
  int64_t shared_floats = 0;   // per kernel
  std::vector<std::string> bufs;  // what bufs[i] holds, in order
};

// What a kernel's bufs[i] points at: a value's data, or a quantized weight's scales.
// Inputs in node order (the KV state is not passed), then outputs (the cache view a
// KV write returns is not passed). The emitter and the runtimes both use this list.
struct KernelBinding {
  ValueId value = kNone;
  bool scales = false;
  int input = -1;   // position among the node's inputs, or
  int output = -1;  // position among its outputs
};
std::vector<KernelBinding> kernel_bindings(const Graph& g, NodeId id);

// The prelude every kernel translation unit starts with (abi.h + kernel_prelude.h +
// kernel_lib.h as text).
std::string_view cpu_prelude_text();

// The translation unit of a kernel: prelude + body.
std::string cpu_kernel_source(const CpuKernel& k);

// Emits the kernel of one node. Throws lathe::Error for nodes the CPU backend cannot
// run (tensor-parallel collectives, fp8, non-f32 activations, dims not multiples of 32).
CpuKernel emit_cpu_kernel(const Graph& g, NodeId id);

// Kernels of every node in launch order.
std::vector<CpuKernel> emit_cpu_kernels(const Graph& g);

}  // namespace lathe
