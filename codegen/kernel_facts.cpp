#include "codegen/kernel_facts.h"

#include "codegen/cpu/emit_cpu.h"  // kernel_bindings
#include "ir/assert.h"
#include "ir/text.h"
#include "ir/plan_options.h"

namespace lathe {

int format_code(DType t) {
  switch (t) {
    case DType::f32: return 0;
    case DType::f16: return 1;
    case DType::bf16: return 2;
    case DType::int8: return 3;
    case DType::int4: return 4;
    case DType::fp8_e4m3: return 5;
    default: throw Error(std::string("no kernel format for ") + std::string(dtype_name(t)));
  }
}

KvFacts kv_facts(const Graph& g) {
  std::vector<ValueId> states = g.values_of(ValueKind::state);
  if (states.empty()) throw Error(g.name + ": no KV cache state");
  KvFacts k;
  k.format = format_code(g.value(states.front()).format.dtype);
  auto layout = parse_kv_layout(g.attrs.s("kv_layout", "LHTD"));
  if (!layout) throw Error(g.name + ": bad kv_layout attribute '" + g.attrs.s("kv_layout") + "'");
  k.layout = int(layout->kind);
  k.block = layout->block;
  k.layers = g.attrs.i("layers");
  k.kv_heads = g.attrs.i("kv_heads");
  k.head_dim = g.attrs.i("head_dim");
  k.capacity = g.attrs.i("final_context");
  k.slots = g.attrs.i("B");
  return k;
}

std::string kv_template_args(const KvFacts& k) {
  return std::to_string(k.format) + ", " + std::to_string(k.layout) + ", " + std::to_string(k.layers) + ", " +
         std::to_string(k.kv_heads) + ", " + std::to_string(k.capacity) + ", " + std::to_string(k.block) + ", " +
         std::to_string(k.slots);
}

KernelBuffers kernel_buffers(const Graph& g, const Node& n, const std::string& scales_label) {
  KernelBuffers r;
  r.data.assign(n.inputs.size(), -1);
  r.scales.assign(n.inputs.size(), -1);
  r.outs.assign(n.outputs.size(), -1);
  for (const KernelBinding& kb : kernel_bindings(g, n.id)) {
    const Value& v = g.value(kb.value);
    int index = int(r.bufs.size());
    std::string type = " " + std::string(dtype_name(v.dtype)) + shape_str(v.shape);
    if (kb.input >= 0) {
      (kb.scales ? r.scales : r.data)[size_t(kb.input)] = index;
      r.bufs.push_back(value_ref(v) + (kb.scales ? " scales" + scales_label : type));
    } else {
      r.outs[size_t(kb.output)] = index;
      r.bufs.push_back("-> " + value_ref(v) + type);
    }
  }
  return r;
}

}  // namespace lathe
