#include "codegen/cpu/emit_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "codegen/cpu/kernel_lib.h"
#include "codegen/kernel_facts.h"
#include "codegen/tuning.h"
#include "ir/assert.h"
#include "ir/buffers.h"
#include "ir/text.h"
#include "simulator/cost.h"

namespace lathe {

std::string_view cpu_prelude_text();  // generated from abi.h, kernel_prelude.h, kernel_lib.h

static_assert(lk::kGemvRows == kCpuGemvRows, "the cost model's GEMV rows must be the CPU kernels'");
static_assert(lk::kQRows == kCpuQTileRows, "the cost model's integer tile rows must be the CPU kernels'");

std::string cpu_kernel_source(const CpuKernel& k) {
  std::string s(cpu_prelude_text());
  s += "\n// ---------------------------------------------------------------- kernel\n";
  s += k.function;
  return s;
}

namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}
std::string num(int64_t v) { return std::to_string(v); }

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

struct Emitter {
  const Graph& g;
  const Node& n;
  CpuKernel k;
  std::vector<int> data, scales, outs;  // bufs index per input / output (-1 = not passed)
  std::string code;

  [[noreturn]] void fail(const std::string& why) const {
    throw Error("CPU backend: node " + n.name + " (" + std::string(op_name(n.kind)) + "): " + why);
  }
  // A tuning parameter of this node (codegen/tuning.h), `dflt` when unset.
  int64_t tuned(const char* key, int64_t dflt) const {
    try {
      return tuning_param(n.attrs, "cpu", key, dflt);
    } catch (const Error& e) {
      fail(e.what());
    }
  }
  const Value& in(size_t i) const { return g.value(n.inputs[i]); }
  const Value& out(size_t i) const { return g.value(n.outputs[i]); }
  int64_t c(const Dim& d) const {
    if (!d.is_const()) fail("dimension " + d.str() + " must be a constant here");
    return d.coef;
  }
  int64_t attr(const char* key) const {
    if (!n.attrs.has(key)) fail(std::string("missing attribute ") + key);
    return n.attrs.i(key);
  }

  // The node's RoPE frequencies (theta and the model's scaling divisors folded in) as a
  // static table in the kernel, its name the last argument of the rope call: no pow
  // at run time.
  std::string rope_freq_arg() {
    std::string why;
    auto d = rope_divisors_of(n.attrs, &why);
    if (!d) fail(why);
    std::vector<double> f = rope_frequencies(n.attrs.f("theta"), attr("head_dim"), *d);
    for (size_t i = 0; i < f.size(); ++i)
      if (!std::isfinite(f[i]) || !(f[i] > 0))
        fail("RoPE frequency " + std::to_string(i) + " is " + std::to_string(f[i]) + " (theta " +
             std::to_string(n.attrs.f("theta")) + ")");
    code += "  static const double rope_freq[" + std::to_string(f.size()) + "] = {" + rope_table_text(f) + "};\n";
    return "rope_freq";
  }

  void bind() {
    KernelBuffers kb = kernel_buffers(g, n, " (f16)");
    data = std::move(kb.data), scales = std::move(kb.scales), outs = std::move(kb.outs);
    k.bufs = std::move(kb.bufs);
  }
  std::string fin(size_t i) const { return "(const float*)b[" + std::to_string(data[i]) + "]"; }
  std::string iin(size_t i) const { return "(const int*)b[" + std::to_string(data[i]) + "]"; }
  std::string fout(size_t o) const { return "(float*)b[" + std::to_string(outs[o]) + "]"; }
  std::string iout(size_t o) const { return "(int*)b[" + std::to_string(outs[o]) + "]"; }
  std::string wptr(size_t i) const { return "b[" + std::to_string(data[i]) + "]"; }
  std::string sptr(size_t i) const {
    return scales[i] < 0 ? "nullptr" : "(const lk::u16*)b[" + std::to_string(scales[i]) + "]";
  }

  // (FMT, G) template arguments of a weight format.
  std::pair<int, int> fmt(const Format& f) const {
    switch (f.dtype) {
      case DType::f32: return {lk::F32, 0};
      case DType::f16: return {lk::F16, 0};
      case DType::bf16: return {lk::BF16, 0};
      case DType::int8: return {lk::I8, f.group};
      case DType::int4: return {lk::I4, f.group};
      default: fail("weights in " + format_name(f) + " run on GPUs only (use int8/int4/f16/bf16/f32 on CPUs)");
    }
  }
  std::string fmt_args(const Value& w, int64_t K) const {
    auto [f, gsz] = fmt(w.format);
    if (K % 32 != 0)
      fail("weight " + w.name + " has rows of " + std::to_string(K) +
           " values, not a multiple of 32: the CPU kernels read weight rows in blocks of 32 (the model's hidden "
           "and FFN sizes must be multiples of 32)");
    return std::to_string(f) + ", " + std::to_string(K) + ", " + std::to_string(gsz);
  }

  // KV-cache template arguments: KF, LAY, L, KVH, TCAP, NB, SLOTS.
  std::string kv_args() const {
    KvFacts k = kv_facts(g);
    if (k.format == format_code(DType::fp8_e4m3)) fail("an fp8 KV cache runs on GPUs only");
    if (k.head_dim % 16 != 0)
      fail("the CPU backend needs head_dim to be a multiple of 16 (got " + std::to_string(k.head_dim) + ")");
    if (k.format == lk::I4 && k.head_dim % 32 != 0) fail("an int4 KV cache needs head_dim to be a multiple of 32");
    return kv_template_args(k);
  }
  int64_t plan_S() const { return g.attrs.i("S"); }
  int64_t plan_T() const { return g.attrs.i("T"); }

  void gemm() {
    auto p = gemm_parts(n.kind, n.attrs, n.inputs.size());
    if (!p) fail("malformed GEMM");
    const Value& x = in(size_t(p->x));
    int64_t K = c(x.shape.back());
    const Value& w0 = in(size_t(p->first_weight));
    for (int i = 1; i < p->num_weights; ++i)
      if (!(in(size_t(p->first_weight + i)).format == w0.format)) fail("weights of one GEMM differ in format");
    std::string pro = n.attrs.s("prologue", "none"), epi = n.attrs.s("epilogue", "none");
    int nw = p->num_weights;
    std::string ns, ws, ss;
    for (int i = 0; i < 4; ++i) {
      int64_t N = 0;
      if (i < nw) {
        const Value& w = in(size_t(p->first_weight + i));
        N = c(w.shape[w.shape.size() - 2]);
      }
      ns += (i ? ", " : "") + num(N);
    }
    for (int i = 0; i < nw; ++i) {
      ws += (i ? ", " : "") + wptr(size_t(p->first_weight + i));
      ss += (i ? ", " : "") + sptr(size_t(p->first_weight + i));
    }
    std::string os;
    for (size_t o = 0; o < n.outputs.size(); ++o) os += (o ? ", " : "") + fout(o);
    k.scratch_floats = int64_t(lk::kTileCols) * K + 2 * lk::kTileRows * lk::kTileCols;
    if (n.kind == OpKind::expert_matmul) {
      int64_t topk = c(in(size_t(p->idx)).shape[2]), E = c(w0.shape[0]);
      if (E > 256) fail("more than 256 experts");
      int ipro = pro == "gather" ? lk::PRO_GATHER : lk::PRO_NONE;
      int iepi = epi == "silu_mul" ? lk::EPI_SILU_MUL
                 : epi == "combine" ? lk::EPI_COMBINE
                 : epi == "combine_residual" ? lk::EPI_COMBINE_RESIDUAL
                                             : lk::EPI_NONE;
      int64_t pairs = g.attrs.i("B") * g.attrs.i("S") * topk;
      k.shared_floats = std::max(pairs + E + 1 + 32 + int64_t(lk::kTileRows) * K, lk::gemv_x_floats(K, 16));
      code += "  static const lk::ExpertDesc d = {" + std::to_string(nw) + ", {" + ns + "}, " + std::to_string(ipro) +
              ", " + std::to_string(iepi) + ", " + num(topk) + ", " + num(E) + "};\n";
      code += "  const void* W[] = {" + ws + "};\n  const lk::u16* S[] = {" + ss + "};\n  float* O[] = {" + os + "};\n";
      code += "  lk::expert_kernel<" + fmt_args(w0, K) + ">(ctx, st, d, " + fin(size_t(p->x)) + ", " +
              iin(size_t(p->idx)) + ", W, S, " + (p->gates >= 0 ? fin(size_t(p->gates)) : std::string("nullptr")) +
              ", " + (p->residual >= 0 ? fin(size_t(p->residual)) : std::string("nullptr")) + ", O);\n";
      return;
    }
    int ipro = pro == "rms_norm" ? lk::PRO_RMS_NORM : lk::PRO_NONE;
    int iepi = epi == "silu_mul" ? lk::EPI_SILU_MUL : epi == "residual" ? lk::EPI_RESIDUAL : lk::EPI_NONE;
    // Tuned tile sizes (`lathe tune`; codegen/tuning.h) become template arguments.
    const int64_t rows = tuned("tune_rows", 0), cols = tuned("tune_cols", 0);
    const int64_t tile_rows = rows > 0 ? rows : lk::kTileRows, cb = cols > 0 ? cols : lk::kTileCols;
    std::string tiles;
    if (rows > 0 || cols > 0) {
      tiles = ", " + num(tile_rows) + ", " + num(cols);
      k.scratch_floats = cb * K + 2 * tile_rows * cb;
    }
    k.shared_floats = std::max<int64_t>(tile_rows, lk::kGemvRows) * K + lk::gemv_x_floats(K, lk::kGemvRows);
    // The integer GEMM path: its quantized row tile in shared, [2][cb] prepared weight
    // rows in each thread's scratch (qgemm_kernel).
    k.shared_floats = std::max(k.shared_floats, tile_rows * lk::qgemv_row_bytes(K) / 4 + 16);
    k.scratch_floats = std::max(k.scratch_floats, 2 * cb * lk::qgemm_wrow_bytes(K) / 4 + 16);
    code += "  static const lk::GemmDesc d = {" + std::to_string(nw) + ", {" + ns + "}, " + std::to_string(ipro) +
            ", " + std::to_string(iepi) + ", " + num(n.attrs.f("eps", 1e-5)) + "f, " +
            std::to_string(n.kind == OpKind::lm_head ? 1 : 0) + "};\n";
    code += "  const void* W[] = {" + ws + "};\n  const lk::u16* S[] = {" + ss + "};\n  float* O[] = {" + os + "};\n";
    code += "  lk::gemm_kernel<" + fmt_args(w0, K) + tiles + ">(ctx, st, d, " + fin(size_t(p->x)) + ", " +
            (p->norm >= 0 ? fin(size_t(p->norm)) : std::string("nullptr")) + ", W, S, O, " +
            (p->residual >= 0 ? fin(size_t(p->residual)) : std::string("nullptr")) + ");\n";
  }

  void run() {
    k.node = n.id;
    k.node_name = n.name;
    k.label = kernel_label(n);
    k.layer = n.attrs.i("layer", 0);
    if (g.attrs.s("act_dtype", "f32") != "f32")
      fail("the CPU backend computes in f32 activations (plan has " + g.attrs.s("act_dtype") + "; use --act f32)");
    bind();
    const Attrs& a = n.attrs;
    switch (n.kind) {
      case OpKind::matmul:
      case OpKind::lm_head:
      case OpKind::expert_matmul: gemm(); break;
      case OpKind::embedding: {
        int64_t K = c(in(1).shape[1]);
        code += "  lk::embedding_kernel<" + fmt_args(in(1), K) + ">(ctx, st, " + iin(0) + ", " + wptr(1) + ", " +
                sptr(1) + ", " + fout(0) + ");\n";
        break;
      }
      case OpKind::rms_norm:
        code += "  lk::rms_norm_kernel<" + num(c(in(0).shape.back())) + ">(ctx, st, " + fin(0) + ", " + fin(1) + ", " +
                fout(0) + ", " + num(a.f("eps")) + "f);\n";
        break;
      case OpKind::silu:
      case OpKind::mul:
      case OpKind::add: {
        int64_t width = 1;
        for (size_t i = 2; i < in(0).shape.size(); ++i) width *= c(in(0).shape[i]);
        int op = n.kind == OpKind::silu ? 0 : n.kind == OpKind::mul ? 1 : 2;
        code += "  lk::elementwise_kernel<" + std::to_string(op) + ", " + num(width) + ">(ctx, st, " + fin(0) + ", " +
                (n.kind == OpKind::silu ? std::string("nullptr") : fin(1)) + ", " + fout(0) + ");\n";
        break;
      }
      case OpKind::rope: {
        std::string freq = rope_freq_arg();
        code += "  lk::rope_kernel<" + num(attr("heads")) + ", " + num(attr("head_dim")) + ">(ctx, st, " + fin(0) +
                ", " + fout(0) + ", " + freq + ");\n";
        break;
      }
      case OpKind::kv_write:
        code += "  lk::kv_write_kernel<" + kv_args() + ", " + num(attr("head_dim")) + ">(ctx, st, int(ia[0]), " +
                fin(0) + ", " + fin(1) + ");\n";
        break;
      case OpKind::kv_read:
        code += "  lk::kv_read_kernel<" + kv_args() + ", " + num(attr("head_dim")) + ", " + num(plan_T()) +
                ">(ctx, st, int(ia[0]), " + fout(0) + ", " + fout(1) + ");\n";
        break;
      case OpKind::qk:
        code += "  lk::qk_kernel<" + num(attr("heads")) + ", " + num(attr("kv_heads")) + ", " + num(attr("head_dim")) +
                ", " + num(plan_S()) + ", " + num(plan_T()) + ">(ctx, st, " + fin(0) + ", " + fin(1) + ", " + fout(0) +
                ", " + num(a.f("scale")) + "f);\n";
        break;
      case OpKind::mask:
      case OpKind::softmax: {
        int64_t h = c(in(0).shape[1]);
        code += std::string("  lk::") + (n.kind == OpKind::mask ? "mask" : "softmax") + "_kernel<" + num(h) + ", " +
                num(plan_S()) + ", " + num(plan_T()) + ">(ctx, st, " + fin(0) + ", " + fout(0) + ");\n";
        break;
      }
      case OpKind::pv: {
        int64_t h = c(in(0).shape[1]);
        code += "  lk::pv_kernel<" + num(h) + ", " + num(attr("kv_heads")) + ", " + num(attr("head_dim")) + ", " +
                num(plan_S()) + ", " + num(plan_T()) + ">(ctx, st, " + fin(0) + ", " + fin(1) + ", " + fout(0) + ");\n";
        break;
      }
      case OpKind::rope_kvwrite: {
        std::string freq = rope_freq_arg();
        code += "  lk::rope_kvwrite_kernel<" + kv_args() + ", " + num(attr("heads")) + ", " + num(attr("head_dim")) +
                ">(ctx, st, int(ia[0]), " + fin(0) + ", " + fin(1) + ", " + fin(2) + ", " + fout(0) + ", " + freq +
                ");\n";
        break;
      }
      case OpKind::flash_attention:
      case OpKind::decode_attention: {
        int64_t split = n.kind == OpKind::decode_attention ? tuned("tune_split", 1) : 1;
        if (split > 1) {
          int64_t kvh = attr("kv_heads"), h = attr("heads"), d = attr("head_dim");
          k.shared_floats = g.attrs.i("B") * kvh * split * (h / kvh) * (d + 2);
          code += "  lk::attention_split_kernel<" + kv_args() + ", " + num(h) + ", " + num(d) + ", " + num(split) +
                  ">(ctx, st, int(ia[0]), " + fin(0) + ", " + fout(0) + ", " + num(a.f("scale")) + "f);\n";
          break;
        }
        int64_t qt = n.kind == OpKind::flash_attention ? tuned("tune_qt", 16) : 1;
        code += "  lk::attention_kernel<" + kv_args() + ", " + num(attr("heads")) + ", " + num(attr("head_dim")) + ", " +
                num(qt) + ">(ctx, st, int(ia[0]), " + fin(0) + ", " + fout(0) + ", " + num(a.f("scale")) +
                "f);\n";
        break;
      }
      case OpKind::moe_router: {
        int64_t K = c(in(0).shape.back());
        code += "  lk::router_kernel<" + fmt_args(in(1), K) + ", " + num(attr("experts")) + ", " + num(attr("top_k")) +
                ">(ctx, st, " + fin(0) + ", " + wptr(1) + ", " + sptr(1) + ", " + iout(0) + ", " + fout(1) + ");\n";
        break;
      }
      case OpKind::moe_dispatch:
        code += "  lk::dispatch_kernel<" + num(c(in(0).shape.back())) + ", " + num(attr("top_k")) + ">(ctx, st, " +
                fin(0) + ", " + fout(0) + ");\n";
        break;
      case OpKind::moe_combine:
        code += "  lk::combine_kernel<" + num(c(in(0).shape.back())) + ", " + num(attr("top_k")) + ">(ctx, st, " +
                fin(0) + ", " + fin(1) + ", " + fout(0) + ");\n";
        break;
      case OpKind::sample:
        k.shared_floats = lk::argmax_shared_floats(c(in(0).shape[1]), g.attrs.i("B"));
        code += "  lk::argmax_kernel<" + num(c(in(0).shape[1])) + ">(ctx, st, " + fin(0) + ", " + iout(0) + ");\n";
        break;
      case OpKind::all_reduce:
      case OpKind::all_gather:
        fail("tensor parallelism is simulated only; the CPU backend runs tp = 1");
    }
    std::string head = "// kernel " + n.name + " = " + std::string(op_name(n.kind)) + " (" + k.label + ")\n";
    if (!n.absorbed.empty()) {
      head += "// absorbs:";
      for (const std::string& s : n.absorbed) head += " " + s;
      head += "\n";
    }
    for (size_t i = 0; i < k.bufs.size(); ++i) head += "//   b[" + std::to_string(i) + "] " + k.bufs[i] + "\n";
    head += "//   ia[0] = layer\n";
    std::string fn = "extern \"C\" void $SYMBOL(const LatheCtx* ctx, const LatheStep* st, void* const* b, "
                     "const long* ia) {\n  (void)ia;\n" + code + "}\n";
    char sym[32];
    std::snprintf(sym, sizeof sym, "k_%016llx", (unsigned long long)fnv1a(fn));
    k.symbol = sym;
    fn.replace(fn.find("$SYMBOL"), 7, k.symbol);
    k.function = fn;
    k.body = head + fn;
  }
};

}  // namespace

std::vector<KernelBinding> kernel_bindings(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  std::vector<KernelBinding> out;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value& val = g.value(n.inputs[i]);
    if (val.kind == ValueKind::state) continue;
    out.push_back({n.inputs[i], false, int(i), -1});
    if (val.kind == ValueKind::weight && val.format.has_scales()) out.push_back({n.inputs[i], true, int(i), -1});
  }
  for (size_t o = 0; o < n.outputs.size(); ++o)
    if (!is_state_view(g, n.outputs[o])) out.push_back({n.outputs[o], false, -1, int(o)});
  return out;
}

CpuKernel emit_cpu_kernel(const Graph& g, NodeId id) {
  Emitter e{g, g.node(id), {}, {}, {}, {}, {}};
  e.run();
  return e.k;
}

std::vector<CpuKernel> emit_cpu_kernels(const Graph& g) {
  std::vector<CpuKernel> out;
  for (NodeId id : g.topo_order()) out.push_back(emit_cpu_kernel(g, id));
  return out;
}

}  // namespace lathe
