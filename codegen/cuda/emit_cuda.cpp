#include "codegen/cuda/emit_cuda.h"

#include <algorithm>
#include <cstdio>

#include "codegen/cpu/emit_cpu.h"  // kernel_bindings: the buffer order both backends share
#include "codegen/kernel_facts.h"
#include "codegen/tuning.h"
#include "ir/assert.h"
#include "ir/buffers.h"
#include "ir/hash.h"
#include "ir/text.h"
#include "simulator/cost.h"

namespace lathe {

int cuda_arch_for(int cc) {
  if (cc <= 0) throw Error("the CUDA backend needs a GPU target (this one has no compute capability)");
  if (cc < 80)
    throw Error("the CUDA backend needs sm_80 or newer (bf16 tensor cores); the target is sm_" + std::to_string(cc));
  return cc;  // NVRTC compiles for the real architecture and says so if it cannot
}

int cuda_chunk_elems(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16:
    case DType::bf16: return 8;
    case DType::int4: return 32;
    default: return 16;  // int8, fp8
  }
}

int cuda_gemv_default_loads(DType t, int64_t K) {
  const int E = cuda_chunk_elems(t);
  return K / E >= 32 * 4 && E <= 8 ? 4 : 1;
}

int64_t cuda_decode_default_splits(int64_t kv_capacity) { return std::clamp<int64_t>(kv_capacity / 64, 1, 64); }

namespace {
// Whether a matmul node's prefill can take the cuBLAS route: one weight per output, or
// the gate/up pair of SiLU x up (equal widths), or one weight with a residual.
bool blas_shape_ok(const Node& n, int nw, const std::vector<int64_t>& widths) {
  const std::string epi = n.attrs.s("epilogue", "none");
  if (epi == "silu_mul") return nw == 2 && widths[0] == widths[1];
  if (epi == "residual") return nw == 1;
  return epi == "none" && int(n.outputs.size()) == nw;
}
// Weights the cuBLAS route and the tensor-core GEMV use as stored: 16-bit, of the
// activation dtype (others are decoded first).
bool weights_in_act_dtype(const Graph& g, DType w) {
  return (w == DType::bf16 || w == DType::f16) && dtype_name(w) == g.attrs.s("act_dtype");
}
std::vector<int64_t> weight_widths(const Graph& g, const Node& n, const GemmParts& p) {
  std::vector<int64_t> widths;
  for (int i = 0; i < p.num_weights; ++i) {
    const Value& w = g.value(n.inputs[size_t(p.first_weight + i)]);
    const Dim& N = w.shape[w.shape.size() - 2];
    widths.push_back(N.is_const() ? N.coef : -1);
  }
  return widths;
}
}  // namespace

int cuda_batched_min_rows(const Graph& g, const Node& n) {
  if (n.kind != OpKind::matmul && n.kind != OpKind::lm_head) return 0;
  auto p = gemm_parts(n.kind, n.attrs, n.inputs.size());
  if (!p) return 0;
  const DType wt = g.value(n.inputs[size_t(p->first_weight)]).format.dtype;
  if (wt == DType::f32) return 0;
  const std::vector<int64_t> widths = weight_widths(g, n, *p);
  for (int64_t w : widths)
    if (w <= 0 || (n.kind == OpKind::lm_head && w % 16 != 0)) return 0;
  if (n.kind == OpKind::matmul && !blas_shape_ok(n, p->num_weights, widths)) return 0;
  return weights_in_act_dtype(g, wt) ? 2 : 5;
}

namespace {

constexpr int kGemvWarps = 8;  // default warps per GEMV block (tune_cuda_warps)

std::string num(int64_t v) { return std::to_string(v); }
std::string fnum(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

struct Emitter {
  const Graph& g;
  const Node& n;
  CudaKernel k;
  std::vector<int> data, scales, outs;
  std::string code;  // entry functions with $SYM placeholders ($SYM0, $SYM1, ...)
  std::string T;

  [[noreturn]] void fail(const std::string& why) const {
    throw Error("CUDA backend: node " + n.name + " (" + std::string(op_name(n.kind)) + "): " + why);
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
  void bind() {
    KernelBuffers kb = kernel_buffers(g, n, "");
    data = std::move(kb.data), scales = std::move(kb.scales), outs = std::move(kb.outs);
    k.bufs = std::move(kb.bufs);
  }
  std::string ptr(const std::string& type, int index) const {
    return "(" + type + ")b[" + std::to_string(index) + "]";
  }
  std::string act_in(size_t i) const { return ptr("const T*", data[i]); }
  std::string act_out(size_t o) const { return ptr("T*", outs[o]); }
  std::string wptr(size_t i) const { return "b[" + std::to_string(data[i]) + "]"; }
  std::string sptr(size_t i) const { return scales[i] < 0 ? "nullptr" : "b[" + std::to_string(scales[i]) + "]"; }

  std::string fmt_args(const Value& w, int64_t K) {
    int f = format_code(w.format.dtype);
    if (f == 5) k.fp8 = true;
    if (K % 32 != 0)
      fail("weight " + w.name + " has rows of " + std::to_string(K) +
           " values, not a multiple of 32: the CUDA kernels read weight rows in blocks of 32 (the model's hidden "
           "and FFN sizes must be multiples of 32)");
    return std::to_string(f) + ", " + num(K) + ", " + std::to_string(w.format.group);
  }
  std::string kv_args() {
    KvFacts kv = kv_facts(g);
    if (kv.format == 5) k.fp8 = true;
    if (kv.head_dim % 32 != 0) fail("the CUDA backend needs head_dim to be a multiple of 32");
    return kv_template_args(kv);
  }
  // min_blocks > 0: tell ptxas that many resident blocks suffice. Without it ptxas
  // picks its own register budget, and GEMVs (sm_80 most of all) and the tensor-core
  // attention spilled; GEMVs ask for 2 blocks of 256 threads (<= 128 registers),
  // attention for 1.
  // The node's RoPE divisors: a static table for the kernel body and its name as the
  // rope call's last argument (both empty for plain RoPE, which keeps the call as it was).
  std::pair<std::string, std::string> rope_divisors_arg() const {
    std::string why;
    auto d = rope_divisors_of(n.attrs, &why);
    if (!d) fail(why);
    if (d->empty()) return {"", ""};
    return {"  static const double rope_div[" + std::to_string(d->size()) + "] = {" + rope_table_text(*d) + "};\n",
            ", rope_div"};
  }

  void entry(int index, const std::string& body, CudaGrid grid, int block, int64_t p0 = 0, int64_t p1 = 0,
             int64_t max_rows = -1, int64_t p2 = 0, int min_blocks = 0) {
    std::string bounds = std::to_string(block) + (min_blocks > 0 ? ", " + std::to_string(min_blocks) : "");
    code += "extern \"C\" __global__ void __launch_bounds__(" + bounds + ") $SYM" +
            std::to_string(index) + "(const LatheCudaStep* st, void* const* b, long layer) {\n  typedef " + T +
            " T;\n  (void)layer;\n" + body + "}\n\n";
    k.entries.push_back({"", grid, block, p0, p1, p2, max_rows});
  }

  // A tuning parameter of this node (codegen/tuning.h), `dflt` when unset.
  int64_t tuned(const char* key, int64_t dflt) const {
    try {
      return tuning_param(n.attrs, "cuda", key, dflt);
    } catch (const Error& e) {
      fail(e.what());
    }
  }
  // The GEMV entry's template arguments after the format: warps per block, then the
  // norm flag (dense GEMVs only), then loads in flight when tuned (the prelude's rule
  // otherwise). Launch bounds keep 128 registers a thread at every block size.
  struct GemvShape {
    int warps, min_blocks;
    std::string loads;  // ", U" or empty
  };
  // The launch bounds ask for 16 resident warps per SM (512 threads). A tuned count of
  // loads in flight above the default keeps as many bytes in flight with fewer warps,
  // so the bound drops in proportion and the extra load registers do not spill (int4
  // experts with gate and up in one kernel, loads 4: 128 B spilled under the default
  // bound). The count that matters is what a row holds: each lane takes every 32nd of
  // its K / E loads, so beyond ceil(K / E / 32) more loads change nothing.
  GemvShape gemv_shape(DType weight_dtype, int64_t K) const {
    int warps = int(tuned("tune_cuda_warps", kGemvWarps));
    int64_t loads = tuned("tune_cuda_loads", 0);
    int min_blocks = 512 / (warps * 32);
    int64_t per_lane = (K / cuda_chunk_elems(weight_dtype) + 31) / 32;
    int64_t in_flight = std::min(loads, per_lane);
    if (int def = cuda_gemv_default_loads(weight_dtype, K); in_flight > def)
      min_blocks = std::max(1, int(min_blocks * def / in_flight));
    return {warps, min_blocks, loads > 0 ? ", " + num(loads) : std::string()};
  }

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
    std::vector<int64_t> widths;
    for (int i = 0; i < 4; ++i) {
      int64_t N = 0;
      if (i < nw) {
        const Value& w = in(size_t(p->first_weight + i));
        N = c(w.shape[w.shape.size() - 2]);
        widths.push_back(N);
      }
      ns += (i ? ", " : "") + num(N);
    }
    for (int i = 0; i < nw; ++i) {
      ws += (i ? ", " : "") + wptr(size_t(p->first_weight + i));
      ss += (i ? ", " : "") + sptr(size_t(p->first_weight + i));
    }
    std::string os;
    for (size_t o = 0; o < n.outputs.size(); ++o) os += (o ? ", " : "") + std::string("b[") + num(outs[o]) + "]";
    std::string arrays = "  const void* W[] = {" + ws + "};\n  const void* S[] = {" + ss + "};\n  void* const O[] = {" +
                         os + "};\n";
    std::string fa = fmt_args(w0, K);
    int64_t tiles = 0;
    int segs = epi == "silu_mul" || epi == "combine" || epi == "combine_residual" ? 1 : nw;
    for (int i = 0; i < segs; ++i) tiles += (widths[size_t(i)] + 63) / 64;
    int64_t total_rows = epi == "silu_mul" || epi == "combine" || epi == "combine_residual" ? widths[0] : 0;
    if (!total_rows)
      for (int64_t w : widths) total_rows += w;
    if (n.kind == OpKind::expert_matmul) {
      int64_t topk = c(in(size_t(p->idx)).shape[2]), E = c(w0.shape[0]);
      int ipro = pro == "gather" ? 2 : 0;
      int iepi = epi == "silu_mul" ? 2 : epi == "combine" ? 3 : epi == "combine_residual" ? 4 : 0;
      std::string desc = "  const lk::ExpertDesc d = {" + std::to_string(nw) + ", {" + ns + "}, " + std::to_string(ipro) +
                         ", " + std::to_string(iepi) + ", " + num(topk) + ", " + num(E) + "};\n";
      std::string args = "(st, d, " + act_in(size_t(p->x)) + ", " + ptr("const int*", data[size_t(p->idx)]) +
                         ", W, S, " + (p->gates >= 0 ? ptr("const float*", data[size_t(p->gates)]) : "nullptr") + ", " +
                         (p->residual >= 0 ? act_in(size_t(p->residual)) : "nullptr") + ", O);\n";
      GemvShape gv = gemv_shape(w0.format.dtype, K);
      entry(0, desc + arrays + "  lk::expert_gemv_kernel<T, " + fa + ", " + std::to_string(gv.warps) + gv.loads + ">" + args,
            CudaGrid::warps, gv.warps * 32, total_rows, 0, kCudaExpertGemvPairs / topk, 0, gv.min_blocks);
      entry(1, desc + arrays + "  lk::expert_gemm_kernel<T, " + fa + ">" + args, CudaGrid::expert_tiles, 128, tiles, E,
            -1, topk);
      if (iepi >= 3) {
        k.scratch_bytes = g.attrs.i("B") * g.attrs.i("S") * widths[0] * 4;
        k.counters = 1;
      }
      return;
    }
    int ipro = pro == "rms_norm" ? 1 : 0;
    int iepi = epi == "silu_mul" ? 2 : epi == "residual" ? 1 : 0;
    bool last = n.kind == OpKind::lm_head;
    std::string desc = "  const lk::GemmDesc d = {" + std::to_string(nw) + ", {" + ns + "}, " + std::to_string(ipro) +
                       ", " + std::to_string(iepi) + ", " + fnum(n.attrs.f("eps", 1e-5)) + "f, " + (last ? "1" : "0") +
                       "};\n";
    std::string args = "(st, d, " + act_in(size_t(p->x)) + ", " +
                       (p->norm >= 0 ? act_in(size_t(p->norm)) : std::string("nullptr")) + ", W, S, O, " +
                       (p->residual >= 0 ? act_in(size_t(p->residual)) : std::string("nullptr")) + ");\n";
    GemvShape gv = gemv_shape(w0.format.dtype, K);
    entry(0, desc + arrays + "  lk::gemv_kernel<T, " + fa + ", " + std::to_string(gv.warps) + ", " +
                     (ipro ? "true" : "false") + gv.loads + ">" + args,
          CudaGrid::warps, gv.warps * 32, total_rows, 0, kCudaGemvRows, 0, gv.min_blocks);
    entry(1, desc + arrays + "  lk::gemm_kernel<T, " + fa + ">" + args, CudaGrid::gemm_tiles, 128, tiles,
          last ? 1 : 0);
    // The cuBLAS route for prefill: one weight per output (or the gate/up pair of SiLU
    // x up, or one with a residual). Weights not in the activation dtype are decoded
    // into scratch first (a copy of N x K in T per weight, once per launch: on an H200
    // the tiled tensor-core GEMM with in-loop decoding ran int8 and int4 prefill at
    // about 20 TFLOP/s, 21-23x slower than bf16 through cuBLAS; docs/performance.md).
    const bool shape_ok = blas_shape_ok(n, nw, widths);
    const bool direct = weights_in_act_dtype(g, w0.format.dtype);
    if (!last && w0.format.dtype != DType::f32 && shape_ok) {
      CudaBlasPlan& bl = k.blas;
      bl.nw = nw;
      bl.K = K;
      bl.epilogue = iepi;
      bl.x = data[size_t(p->x)];
      for (int i = 0; i < nw; ++i) {
        bl.w[i] = data[size_t(p->first_weight + i)];
        bl.n[i] = widths[size_t(i)];
      }
      for (size_t o = 0; o < n.outputs.size() && o < 4; ++o) bl.out[o] = outs[o];
      if (p->residual >= 0) bl.residual = data[size_t(p->residual)];
      const int64_t rows = g.attrs.i("B") * g.attrs.i("S");
      int64_t used = 0;
      auto take = [&](int64_t bytes) {
        int64_t at = used;
        used += (bytes + 255) / 256 * 256;
        return at;
      };
      int next = 2;
      auto at = [](int64_t off) { return "(T*)((unsigned char*)st->scratch + " + num(off) + ")"; };
      if (ipro) {
        bl.xn_offset = take(rows * K * 2);
        bl.norm_entry = next;
        entry(next++, "  lk::rms_norm_kernel<T, " + num(K) + ">(st, " + act_in(size_t(p->x)) + ", " +
                          act_in(size_t(p->norm)) + ", " + at(bl.xn_offset) + ", " + fnum(n.attrs.f("eps", 1e-5)) +
                          "f);\n",
              CudaGrid::rows, 256);
      }
      if (iepi == 2) {
        bl.t1_offset = take(rows * widths[0] * 2);
        bl.t2_offset = take(rows * widths[1] * 2);
        bl.silu_entry = next;
        entry(next++, "  lk::elementwise_kernel<T, 3, " + num(widths[0]) + ">(st, " + at(bl.t1_offset) + ", " +
                          at(bl.t2_offset) + ", " + act_out(0) + ");\n",
              CudaGrid::elements, 256, widths[0]);
      }
      if (!direct) {
        std::string offs, rows_n;
        int64_t all_rows = 0;
        for (int i = 0; i < nw; ++i) {
          bl.wd_offset[i] = take(widths[size_t(i)] * K * 2);
          offs += (i ? ", " : "") + num(bl.wd_offset[i]);
          rows_n += (i ? ", " : "") + num(widths[size_t(i)]);
          all_rows += widths[size_t(i)];
        }
        bl.dequant_entry = next;
        entry(next++, "  const void* W[] = {" + ws + "};\n  const void* S[] = {" + ss + "};\n  const long n[] = {" +
                          rows_n + "};\n  const long off[] = {" + offs + "};\n  lk::dequant_kernel<T, " + fa +
                          ">(st, W, S, n, off, " + std::to_string(nw) + ");\n",
              CudaGrid::warps, 256, all_rows);
      }
      k.scratch_bytes = std::max(k.scratch_bytes, used);
    }
    // lm_head over 2-8 sequences: the tensor-core GEMV, one block per 16 output rows
    // (matmuls of 2-8 rows take the cuBLAS route above instead).
    k.batched_min_rows = cuda_batched_min_rows(g, n);
    if (last && k.batched_min_rows > 0) {
      k.gemv_mma_entry = int(k.entries.size());
      entry(k.gemv_mma_entry, desc + arrays + "  lk::gemv_mma_kernel<T, " + fa + ", " + (ipro ? "true" : "false") + ">" +
                                  args,
            CudaGrid::warps, 256, total_rows / 16 * 8, 0, kCudaGemvRows);
    }
  }

  void run() {
    k.node = n.id;
    k.node_name = n.name;
    k.label = kernel_label(n);
    k.layer = n.attrs.i("layer", 0);
    std::string act = g.attrs.s("act_dtype", "f32");
    if (act == "bf16") T = "__nv_bfloat16";
    else if (act == "f16") T = "__half";
    else fail("the CUDA backend computes in bf16 or f16 activations (plan has " + act + "; use --act bf16)");
    bind();
    const Attrs& a = n.attrs;
    const int64_t S = g.attrs.i("S"), TP = g.attrs.i("T");
    switch (n.kind) {
      case OpKind::matmul:
      case OpKind::lm_head:
      case OpKind::expert_matmul: gemm(); break;
      case OpKind::embedding: {
        int64_t K = c(in(1).shape[1]);
        entry(0, "  lk::embedding_kernel<T, " + fmt_args(in(1), K) + ">(st, " + ptr("const int*", data[0]) + ", " +
                     wptr(1) + ", " + sptr(1) + ", " + act_out(0) + ");\n",
              CudaGrid::rows, 128);
        break;
      }
      case OpKind::rms_norm:
        entry(0, "  lk::rms_norm_kernel<T, " + num(c(in(0).shape.back())) + ">(st, " + act_in(0) + ", " + act_in(1) +
                     ", " + act_out(0) + ", " + fnum(a.f("eps")) + "f);\n",
              CudaGrid::rows, 256);
        break;
      case OpKind::silu:
      case OpKind::mul:
      case OpKind::add: {
        int64_t width = 1;
        for (size_t i = 2; i < in(0).shape.size(); ++i) width *= c(in(0).shape[i]);
        int op = n.kind == OpKind::silu ? 0 : n.kind == OpKind::mul ? 1 : 2;
        entry(0, "  lk::elementwise_kernel<T, " + std::to_string(op) + ", " + num(width) + ">(st, " + act_in(0) + ", " +
                     (n.kind == OpKind::silu ? std::string("nullptr") : act_in(1)) + ", " + act_out(0) + ");\n",
              CudaGrid::elements, 256, width);
        break;
      }
      case OpKind::rope: {
        auto [table, div] = rope_divisors_arg();
        entry(0, table + "  lk::rope_kernel<T, " + num(attr("heads")) + ", " + num(attr("head_dim")) + ">(st, " +
                     act_in(0) + ", " + act_out(0) + ", " + fnum(a.f("theta")) + div + ");\n",
              CudaGrid::rows, 128);
        break;
      }
      case OpKind::kv_write:
        entry(0, "  lk::kv_write_kernel<T, " + kv_args() + ", " + num(attr("head_dim")) + ">(st, int(layer), " +
                     act_in(0) + ", " + act_in(1) + ");\n",
              CudaGrid::rows, 256);
        break;
      case OpKind::kv_read:
        entry(0, "  lk::kv_read_kernel<T, " + kv_args() + ", " + num(attr("head_dim")) + ", " + num(TP) +
                     ">(st, int(layer), " + act_out(0) + ", " + act_out(1) + ");\n",
              CudaGrid::seq_x, 128, attr("kv_heads"));
        break;
      case OpKind::qk:
        entry(0, "  lk::qk_kernel<T, " + num(attr("heads")) + ", " + num(attr("kv_heads")) + ", " + num(attr("head_dim")) +
                     ", " + num(S) + ", " + num(TP) + ">(st, " + act_in(0) + ", " + act_in(1) + ", " +
                     ptr("float*", outs[0]) + ", " + fnum(a.f("scale")) + "f);\n",
              CudaGrid::seq_x, 128, attr("heads"));
        break;
      case OpKind::mask:
      case OpKind::softmax: {
        int64_t h = c(in(0).shape[1]);
        entry(0, std::string("  lk::") + (n.kind == OpKind::mask ? "mask" : "softmax") + "_kernel<" + num(h) + ", " +
                     num(S) + ", " + num(TP) + ">(st, " + ptr("const float*", data[0]) + ", " + ptr("float*", outs[0]) +
                     ");\n",
              CudaGrid::seq_x, 128, h);
        break;
      }
      case OpKind::pv: {
        int64_t h = c(in(0).shape[1]);
        entry(0, "  lk::pv_kernel<T, " + num(h) + ", " + num(attr("kv_heads")) + ", " + num(attr("head_dim")) + ", " +
                     num(S) + ", " + num(TP) + ">(st, " + ptr("const float*", data[0]) + ", " + act_in(1) + ", " +
                     act_out(0) + ");\n",
              CudaGrid::seq_x, 128, h);
        break;
      }
      case OpKind::rope_kvwrite: {
        auto [table, div] = rope_divisors_arg();
        entry(0, table + "  lk::rope_kvwrite_kernel<T, " + kv_args() + ", " + num(attr("heads")) + ", " +
                     num(attr("head_dim")) + ">(st, int(layer), " + act_in(0) + ", " + act_in(1) + ", " + act_in(2) +
                     ", " + act_out(0) + ", " + fnum(a.f("theta")) + div + ");\n",
              CudaGrid::rows_x, 256, (attr("heads") + 2 * attr("kv_heads") + 7) / 8);
        break;
      }
      case OpKind::flash_attention:
        entry(0, "  lk::flash_attention_kernel<T, " + kv_args() + ", " + num(attr("heads")) + ", " + num(attr("head_dim")) +
                     ">(st, int(layer), " + act_in(0) + ", " + act_out(0) + ", " + fnum(a.f("scale")) + "f);\n",
              CudaGrid::flash, 128, attr("heads"), 64, -1, 0, 1);
        break;
      case OpKind::decode_attention: {
        KvFacts kv = kv_facts(g);
        // Splits over the context (tune_cuda_split, else the default rule).
        int64_t splits = tuned("tune_cuda_split", cuda_decode_default_splits(kv.capacity));
        int64_t gq = attr("heads") / attr("kv_heads"), d = attr("head_dim");
        entry(0, "  lk::decode_attention_kernel<T, " + kv_args() + ", " + num(attr("heads")) + ", " + num(d) + ", " +
                     num(splits) + ">(st, int(layer), " + act_in(0) + ", " + act_out(0) + ", " + fnum(a.f("scale")) +
                     "f);\n",
              CudaGrid::decode_splits, 128, attr("kv_heads"), splits, -1, 0, 1);
        k.scratch_bytes = kv.slots * attr("kv_heads") * splits * gq * (d + 2) * 4;
        k.counters = kv.slots * attr("kv_heads");
        break;
      }
      case OpKind::moe_router: {
        int64_t K = c(in(0).shape.back());
        entry(0, "  lk::router_kernel<T, " + fmt_args(in(1), K) + ", " + num(attr("experts")) + ", " + num(attr("top_k")) +
                     ">(st, " + act_in(0) + ", " + wptr(1) + ", " + sptr(1) + ", " + ptr("int*", outs[0]) + ", " +
                     ptr("float*", outs[1]) + ");\n",
              CudaGrid::rows, 256);
        break;
      }
      case OpKind::moe_dispatch:
        entry(0, "  lk::dispatch_kernel<T, " + num(c(in(0).shape.back())) + ", " + num(attr("top_k")) + ">(st, " +
                     act_in(0) + ", " + act_out(0) + ");\n",
              CudaGrid::rows, 128);
        break;
      case OpKind::moe_combine:
        entry(0, "  lk::combine_kernel<T, " + num(c(in(0).shape.back())) + ", " + num(attr("top_k")) + ">(st, " +
                     act_in(0) + ", " + ptr("const float*", data[1]) + ", " + act_out(0) + ");\n",
              CudaGrid::rows, 128);
        break;
      case OpKind::sample:
        entry(0, "  lk::argmax_kernel<" + num(c(in(0).shape[1])) + ">(st, " + ptr("const float*", data[0]) + ", " +
                     ptr("int*", outs[0]) + ");\n",
              CudaGrid::seqs, 256);
        break;
      case OpKind::all_reduce:
      case OpKind::all_gather: fail("tensor parallelism is simulated only; the CUDA backend runs tp = 1");
    }
    char sym[40];
    std::snprintf(sym, sizeof sym, "k_%016llx", (unsigned long long)fnv1a(code + (k.fp8 ? "fp8" : "")));
    for (size_t i = 0; i < k.entries.size(); ++i) {
      static const char* const kRole[] = {"_gemv", "_gemm"};
      std::string role = i < 2                                ? kRole[i]
                         : i == size_t(k.blas.norm_entry)    ? "_norm"
                         : i == size_t(k.blas.dequant_entry) ? "_dequant"
                         : i == size_t(k.gemv_mma_entry)     ? "_gemv_mma"
                                                             : "_silu_mul";
      std::string s = std::string(sym) + (k.entries.size() > 1 ? role : "");
      k.entries[i].symbol = s;
      std::string ph = "$SYM" + std::to_string(i);
      for (size_t at; (at = code.find(ph)) != std::string::npos;) code.replace(at, ph.size(), s);
    }
    std::string head = "// kernel " + n.name + " = " + std::string(op_name(n.kind)) + " (" + k.label + ")\n";
    if (!n.absorbed.empty()) {
      head += "// absorbs:";
      for (const std::string& s : n.absorbed) head += " " + s;
      head += "\n";
    }
    for (size_t i = 0; i < k.bufs.size(); ++i) head += "//   b[" + std::to_string(i) + "] " + k.bufs[i] + "\n";
    k.body = head + code;
    k.source = (k.fp8 ? "#define LATHE_FP8 1\n" : "") + std::string(cuda_prelude_text()) +
               "\n// ---------------------------------------------------------------- kernel\n" + code;
  }
};

}  // namespace

int cuda_step_entry(const CudaKernel& k, int64_t rows, int64_t n_seq, bool blas) {
  const auto& en = k.entries;
  if (en.size() < 2 || en[0].grid != CudaGrid::warps) return 0;  // not GEMM-family: one entry
  // lm_head (its tiled entry's rows are sequences) counts the sequences' last rows.
  const int64_t used = en[1].grid == CudaGrid::gemm_tiles && en[1].p1 == 1 ? n_seq : rows;
  const bool route = blas && k.blas.on();
  if (used > en[0].max_rows) return route ? kCudaBlasRoute : 1;
  if (k.batched_min_rows > 0 && used >= k.batched_min_rows) {
    if (k.gemv_mma_entry >= 0) return k.gemv_mma_entry;
    if (route) return kCudaBlasRoute;
  }
  return 0;
}

CudaKernel emit_cuda_kernel(const Graph& g, NodeId id) {
  Emitter e{g, g.node(id), {}, {}, {}, {}, {}, {}};
  e.run();
  return e.k;
}

std::vector<CudaKernel> emit_cuda_kernels(const Graph& g) {
  std::vector<CudaKernel> out;
  for (NodeId id : g.topo_order()) out.push_back(emit_cuda_kernel(g, id));
  return out;
}

}  // namespace lathe
