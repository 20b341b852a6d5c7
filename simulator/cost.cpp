#include "simulator/cost.h"

#include <algorithm>
#include <cmath>

#include "ir/assert.h"
#include "ir/buffers.h"

namespace lathe {

std::string_view bound_name(Bound b) {
  switch (b) {
    case Bound::compute: return "compute";
    case Bound::memory: return "memory";
    case Bound::launch: return "launch";
    case Bound::network: return "network";
  }
  return "?";
}

std::string_view kernel_class_name(KernelClass k) {
  switch (k) {
    case KernelClass::gemm: return "gemm";
    case KernelClass::gemv: return "gemv";
    case KernelClass::attention_prefill: return "attention_prefill";
    case KernelClass::attention_decode: return "attention_decode";
    case KernelClass::elementwise: return "elementwise";
    case KernelClass::collective: return "collective";
  }
  return "?";
}

std::string kernel_label(const Node& n) {
  if (!is_gemm(n.kind)) return std::string(op_name(n.kind));
  std::string pro = n.attrs.s("prologue", "none"), epi = n.attrs.s("epilogue", "none");
  auto parts = gemm_parts(n.kind, n.attrs, n.inputs.size());
  std::string s = pro == "rms_norm" ? "norm_" : (pro == "gather" ? "gather_" : "");
  s += std::string(op_name(n.kind));
  if (parts && parts->num_weights > 1 && epi != "silu_mul") s += "_x" + std::to_string(parts->num_weights);
  if (epi == "silu_mul") s += parts && parts->num_weights == 2 ? "_gate_up_silu" : "_silu_mul";
  else if (epi != "none") s += "_" + epi;
  return s;
}

double attention_flops(double B, double heads, double head_dim, double S, double T, double waste_pairs) {
  // Causal pairs: query i (0-based among the S new) sees T - S + i + 1 keys.
  double pairs = S * (T - S) + S * (S + 1) / 2.0;
  return 4.0 * B * heads * head_dim * (pairs + S * waste_pairs);
}

double expected_experts_touched(double experts, double top_k, double tokens) {
  if (experts <= 0) return 0;
  return experts * (1.0 - std::pow(1.0 - top_k / experts, tokens));
}

double kv_read_run_bytes(const KvLayout& l, int64_t context, int64_t kv_heads, int64_t head_dim, double bits) {
  double row = double(head_dim) * bits / 8.0;
  switch (l.kind) {
    case KvLayoutKind::LHTD: return double(context) * row;          // a head's positions are contiguous
    case KvLayoutKind::LTHD:                                        // per position, one head's vector
    case KvLayoutKind::TLHD: return row;
    case KvLayoutKind::paged: return double(std::min<int64_t>(l.block, context)) * row;
  }
  (void)kv_heads;
  return row;
}

int64_t kv_block_of(const Graph& decode) {
  auto l = parse_kv_layout(decode.attrs.s("kv_layout", "LHTD"));
  return l && l->kind == KvLayoutKind::paged ? l->block : 1;
}

double contiguity_efficiency(double run_bytes, const Target& t) {
  // Each run costs a fixed overhead: one 32-byte sector on GPUs, about two cache
  // lines of lost prefetch on CPUs. A heuristic, documented in docs/simulator.md.
  double overhead = t.is_gpu() ? 32.0 : 128.0;
  return run_bytes / (run_bytes + overhead);
}

namespace {

// The graph side of cost_node: finds the operands and attributes the formulas of
// Costing read, once per node.
struct FormBuilder {
  const Graph& g;
  const Node& n;

  const Value& in(size_t i) const { return g.value(n.inputs[i]); }

  // The KV state behind a cache view: the state input of the node that wrote the
  // view (the graph holds one state value; found without scanning every value).
  const Value& kv_state(const Value& view) const {
    if (view.kind == ValueKind::state) return view;
    if (view.producer != kNone)
      for (ValueId v : g.node(view.producer).inputs)
        if (g.value(v).kind == ValueKind::state) return g.value(v);
    return g.value(g.values_of(ValueKind::state).front());
  }

  // S new positions of K and V for all B sequences, in the cache format: the state
  // [L, 2, B, T, kvh, d] with one layer and T bound to S.
  static ValueSize kv_new(const Value& cache_state) {
    Value one = cache_state;
    const Shape& s = cache_state.shape;
    one.shape = {Dim::c(1), s[1], s[2], s[3], s[4], s[5]};
    for (Dim& d : one.shape) {
      d.s = uint8_t(d.s + d.t);
      d.t = 0;
    }
    return value_size(one);
  }

  // The whole context of one layer (B sequences, T positions, K and V): the cache
  // view [B, T, 2, kvh, d] in the state's format.
  ValueSize kv_context(const Value& cache_view) const {
    Value one = kv_state(cache_view);
    const Shape& s = cache_view.shape;
    one.shape = {s[0], s[1], s[2], s[3], s[4]};
    return value_size(one);
  }

  CostForm build() const {
    CostForm f;
    f.kind = n.kind;
    auto act = parse_dtype(g.attrs.s("act_dtype", "f32"));
    f.act = act ? *act : DType::f32;
    auto layout = parse_kv_layout(g.attrs.s("kv_layout", "LHTD"));
    f.kv_layout = layout ? *layout : KvLayout{};
    for (ValueId v : n.inputs) f.inputs.push_back(value_size(g.value(v)));
    for (ValueId v : n.outputs) f.outputs.push_back(value_size(g.value(v)));
    const Attrs& a = n.attrs;
    switch (n.kind) {
      case OpKind::matmul:
      case OpKind::lm_head:
      case OpKind::expert_matmul: {
        auto p = gemm_parts(n.kind, a, n.inputs.size());
        LATHE_ASSERT(p.has_value(), "bad gemm node " + n.name);
        f.gemm = *p;
        f.k_dim = in(size_t(p->x)).shape.back();
        for (int w = 0; w < p->num_weights; ++w) {
          const Value& wv = in(size_t(p->first_weight + w));
          f.weight_cols.push_back(wv.shape[wv.shape.size() - 2]);
        }
        if (n.kind == OpKind::expert_matmul) {
          f.top_k = in(size_t(p->idx)).shape[2];
          f.num_experts = in(size_t(p->first_weight)).shape[0];
        }
        break;
      }
      case OpKind::embedding: f.hidden = in(1).shape[1]; break;
      case OpKind::moe_router:
        f.hidden = in(0).shape.back();
        f.experts = a.i("experts");
        break;
      case OpKind::kv_write: f.kv_new = kv_new(in(2)); break;
      case OpKind::rope_kvwrite: f.kv_new = kv_new(in(3)); break;
      case OpKind::kv_read:
        f.kv_context = kv_context(in(0));
        f.kv_heads = a.i("kv_heads");
        f.head_dim = a.i("head_dim");
        break;
      case OpKind::flash_attention:
      case OpKind::decode_attention:
        f.kv_heads = a.i("kv_heads");
        f.kv_context = kv_context(in(1));
        [[fallthrough]];
      case OpKind::qk:
      case OpKind::pv:
        f.heads = a.i("heads");
        f.head_dim = a.i("head_dim");
        break;
      case OpKind::all_reduce:
      case OpKind::all_gather: f.tp = std::max<int64_t>(1, a.i("tp", 1)); break;
      default: break;
    }
    return f;
  }
};

// The formulas: a node's cost from its form at one target and bindings. Every size is
// read through dim() or vb() and the context length through context(), which note
// whether the result depends on T.
struct Costing {
  const CostForm& f;
  const Target& t;
  const Bindings& b;
  const CostOptions& o;
  NodeCost c;
  bool reads_context = false;

  const ValueSize& in(size_t i) const { return f.inputs[i]; }
  const ValueSize& out(size_t i) const { return f.outputs[i]; }
  double dim(const Dim& d) {
    reads_context |= d.t > 0;
    return double(d.eval(b));
  }
  double vb(const ValueSize& v) {
    reads_context |= v.depends_on_context();
    return v.bytes(b);
  }
  double elems(const ValueSize& v) { return dim(v.elems); }
  int64_t context() {
    reads_context = true;
    return b.T;
  }
  double all_inputs() {
    double s = 0;
    for (const ValueSize& v : f.inputs) s += vb(v);
    return s;
  }
  double all_outputs() {
    double s = 0;
    for (const ValueSize& v : f.outputs) s += vb(v);
    return s;
  }
  double eff(double e) const { return o.ideal ? 1.0 : e; }

  // Compute efficiency of a GEMM of M rows and N columns on this target: tile
  // padding and wave quantization on GPUs (best of a few tile shapes, as cuBLAS
  // heuristics pick); on CPUs, for BLAS GEMMs, the large-M efficiency times
  // M / (M + gemm_half_rows): the share of time spent multiplying when packing the
  // weights costs a fixed gemm_half_rows rows' worth (`lathe probe` measures both at
  // two row counts).
  // `groups` GEMMs of M x N in one launch (a grouped expert GEMM) share the waves.
  // `gemv_kernel`: the CPU backend runs this node on its GEMV loop (a matmul or LM head
  // of at most kCpuGemvRows rows, an expert GEMM of at most 16 token-expert pairs; not
  // attention's qk/pv or the router, with loops of their own).
  double gemm_efficiency(double M, double N, double groups = 1, bool gemv_kernel = false) const {
    if (o.ideal) return 1.0;
    if (!t.is_gpu()) {
      // The generated GEMV kernels pack nothing, and run at their own efficiency
      // (efficiency.gemv; unset: the GEMMs').
      if (gemv_kernel) return t.eff.gemv_of();
      if (M <= double(kCpuGemvRows)) return t.eff.gemm;
      const bool blas = t.gemm_half_rows > 0;
      return t.eff.gemm * (blas ? M / (M + t.gemm_half_rows) : 1.0);
    }
    if (M <= 0 || N <= 0) return t.eff.gemm;
    double sms = std::max(1.0, t.sm_count);
    // split_k: the GEMM is split over K to fill the SMs (no wave quantization); only the
    // small-M tiles are, and their partial sums' traffic is not counted. Splitting the
    // big tiles too when they are fewer than the SMs was tried and rejected
    // (docs/simulator.md, "GEMM efficiency").
    auto tile_eff = [&](double tm, double tn, double rel, bool split_k) {
      double mt = std::ceil(M / tm), nt = std::ceil(N / tn);
      double pad = (M / (mt * tm)) * (N / (nt * tn));
      double tiles = mt * nt * std::round(groups);
      double wave = split_k ? 1.0 : tiles / (std::ceil(tiles / sms) * sms);
      return rel * pad * wave;
    };
    double best = 0;
    if (M <= 64) {
      // Small-M kernels: 16/32/64-row tiles, split over K to fill the machine.
      double tm = M <= 16 ? 16 : (M <= 32 ? 32 : 64);
      best = tile_eff(tm, 128, 1.0, true);
    } else {
      double TM = t.gemm_tile_m, TN = t.gemm_tile_n;
      // Half-height tiles count like half-width ones (the same work per byte a tile
      // loads); they pad fewer rows just past a multiple of the tile height.
      best = std::max({tile_eff(TM, TN, 1.0, false), tile_eff(TM, TN / 2, 0.9, false),
                       tile_eff(TM / 2, TN, 0.9, false), tile_eff(TM / 2, TN / 2, 0.75, false)});
    }
    return t.eff.gemm * best;
  }

  void gemm() {
    const GemmParts& p = f.gemm;
    const ValueSize& x = in(size_t(p.x));
    double K = dim(f.k_dim);
    double tokens = double(b.B) * double(b.S);
    double rows = elems(x) / K;  // activation rows read
    double sumN = 0, weight_bytes = 0;
    DType wdtype = DType::f32;
    for (int w = 0; w < p.num_weights; ++w) {
      const ValueSize& wv = in(size_t(p.first_weight + w));
      sumN += dim(f.weight_cols[size_t(w)]);
      weight_bytes += vb(wv);
      wdtype = wv.format.dtype;
    }
    double M = rows;  // rows the GEMM computes
    if (f.kind == OpKind::lm_head) {
      M = double(b.B);  // the last token of each sequence
      rows = M;
    }
    double extra_bytes = 0;
    if (f.kind == OpKind::expert_matmul) {
      double k = dim(f.top_k);
      double E = dim(f.num_experts);
      double pairs = tokens * k;
      double touched = expected_experts_touched(E, k, tokens);
      weight_bytes *= touched / E;
      M = pairs;  // token-expert pairs
      extra_bytes += vb(in(size_t(p.idx)));
      if (p.gates >= 0) extra_bytes += vb(in(size_t(p.gates)));
      c.flops = 2.0 * M * K * sumN;
      // Grouped GEMM: each touched expert computes pairs / touched rows, all of them in
      // one launch, so the waves count every touched expert's tiles. The expected count
      // of touched experts is a hair under E where it should be E (1 - (1 - k/E)^n);
      // a row count within rounding of a whole number is taken as that number, so it
      // does not pick the next tile size up.
      double per_expert = pairs / std::max(1.0, touched);
      if (std::abs(per_expert - std::round(per_expert)) < 1e-6 * per_expert) per_expert = std::round(per_expert);
      double e = gemm_efficiency(per_expert, sumN / p.num_weights, std::max(1.0, touched), pairs <= 16);
      c.cls = per_expert <= 16 ? KernelClass::gemv : KernelClass::gemm;
      set_compute(e, wdtype);
    } else {
      c.flops = 2.0 * M * K * sumN;
      c.cls = M <= 16 ? KernelClass::gemv : KernelClass::gemm;
      set_compute(gemm_efficiency(M, sumN / p.num_weights, 1, M <= double(kCpuGemvRows)), wdtype);
    }
    // CPUs with 8-bit dot products (peak_int8, which `lathe probe` measures where the
    // host has VNNI): the CPU backend's integer kernels quantize the activations to
    // int8 and multiply with dot products instead of dequantizing the weights, for int4
    // and int8 everywhere except MoE prefill (expert GEMMs of more than 16 token-expert
    // pairs). They reach efficiency.int_dot (int4) / int8_dot (int8) of the dot-product
    // peak (`lathe probe` measures both GEMMs at two reduction lengths and two row
    // counts; the register tiles also unpack, convert and scale every block, so well
    // under the peak).
    const bool expert = f.kind == OpKind::expert_matmul;
    const bool gemv_rows = expert ? M <= 16 : M <= kCpuGemvRows;
    const bool int_dot = !t.is_gpu() && t.peak_int8 > 0 && is_integer_quant(wdtype) && (!expert || gemv_rows);
    if (int_dot) {
      c.math = DType::int8;
      // lathe's own register tiles, not BLAS. GEMMs pay two fixed costs besides their
      // dot-product steps, which add in time: each register tile's setup and reduction
      // (int_dot_half_k of reduction length) and the per-call work on the weights
      // (int_dot_half_rows of rows).
      const bool i4 = wdtype == DType::int4;
      double e = eff(t.eff.int_dot_of(i4, gemv_rows));
      const double half_k = i4 ? t.int_dot_half_k : t.int8_dot_half_k;
      const double half_rows = i4 ? t.int_dot_half_rows : t.int8_dot_half_rows;
      // The register tiles take kCpuQTileRows rows at a time and a partial last tile
      // repeats a row, so the tiles' work counts whole tiles (9 rows cost 12; `lathe
      // probe` fits the factors at 32 and 128 rows, whole tiles); the per-call term
      // does not grow with them. Time = 2 K N (Mt (1 + half_k / K) + half_rows) / (peak e).
      if (!o.ideal && !gemv_rows && M > 0) {
        const double Mt = std::ceil(M / kCpuQTileRows) * kCpuQTileRows;
        e /= Mt / M * (1.0 + (half_k > 0 ? half_k / K : 0.0)) + (half_rows > 0 ? half_rows / M : 0.0);
      }
      // The GEMVs: each output's and each row's fixed work against K (int_dot_gemv_half_k).
      const double gemv_half_k = i4 ? t.int_dot_gemv_half_k : t.int8_dot_gemv_half_k;
      if (!o.ideal && gemv_rows && gemv_half_k > 0 && K > 0) e /= 1.0 + gemv_half_k / K;
      c.compute_s = c.flops / (t.peak_int8 * 1e12 * std::max(1e-6, e));
    }
    if (p.norm >= 0) {
      // The fused RMSNorm's scalar work (4 operations per input element) is counted and
      // timed, as the unfused norm's is: counted alone, an --ideal GEMM row ran at
      // 100.3% of the matrix peak.
      const double norm_flops = 4.0 * rows * K;
      c.flops += norm_flops;
      c.compute_s += norm_flops / (t.peak_fp32 * 1e12 * eff(t.eff.scalar));
      extra_bytes += vb(in(size_t(p.norm)));
    }
    double x_bytes = rows * K * dtype_bits(x.dtype) / 8.0;
    if (p.residual >= 0) extra_bytes += vb(in(size_t(p.residual)));
    c.bytes = x_bytes + weight_bytes + extra_bytes + all_outputs();
    c.memory_s = c.bytes / (t.bandwidth_bytes_per_s() * eff(t.eff.memory));
    if (is_integer_quant(wdtype) && !o.ideal && !int_dot) {
      // Dequantization runs on the scalar units: unpack, convert, scale per weight
      // element (int8 2 ops, int4 3), once per tile of rows on GPUs (tiles reuse the
      // dequantized weights across their rows), once on CPUs (dequantize, then GEMM).
      double weight_elems = 0;
      for (int w = 0; w < p.num_weights; ++w) weight_elems += elems(in(size_t(p.first_weight + w)));
      double tile_rows = M;  // rows over which one dequantized weight is reused
      if (f.kind == OpKind::expert_matmul) {
        double k = dim(f.top_k);
        double E = dim(f.num_experts);
        double touched = expected_experts_touched(E, k, tokens);
        weight_elems *= touched / E;
        tile_rows = M / std::max(1.0, touched);  // each touched expert: its own rows
      }
      double passes = t.is_gpu() ? std::ceil(tile_rows / std::max(1.0, t.gemm_tile_m)) : 1.0;
      c.compute_s += dequant_s(weight_elems, wdtype, passes);
    }
  }

  // Seconds of scalar work converting elems values of dtype to the math's type, passes
  // times: 3 operations per int4 value (unpack, convert, scale), 2 per int8, 1 per value
  // of a 16-bit or fp8 format, at peak_fp32 x efficiency.scalar x efficiency.dequant.
  double dequant_s(double elems, DType dtype, double passes = 1.0) const {
    const double ops = dtype == DType::int4 ? 3.0 : dtype == DType::int8 ? 2.0 : dtype == DType::f32 ? 0.0 : 1.0;
    return elems * ops * passes /
           (t.peak_fp32 * 1e12 * t.eff.scalar * std::max(1e-3, t.eff.dequant));  // the spec minimum
  }

  // Sets compute_s from c.flops at the matrix peak of the operand dtype.
  void set_compute(double efficiency, DType weight_dtype) {
    DType math = f.act;
    if (weight_dtype == DType::fp8_e4m3) math = DType::fp8_e4m3;
    c.math = math;
    double peak = t.matrix_peak_flops(math);
    if (peak <= 0) peak = t.peak_fp32 * 1e12;
    c.compute_s = c.flops / (peak * std::max(1e-6, efficiency));
  }

  void scalar(double flops, double bytes) {
    c.flops = flops;
    c.bytes = bytes;
    c.cls = KernelClass::elementwise;
    c.compute_s = flops / (t.peak_fp32 * 1e12 * eff(t.eff.scalar));
    c.memory_s = bytes / (t.bandwidth_bytes_per_s() * eff(t.eff.elementwise));
  }

  void attention(bool flash_prefill, bool decode_kernel) {
    int64_t h = f.heads, kvh = f.kv_heads, d = f.head_dim;
    int64_t context_len = context();
    c.flops = attention_flops(double(b.B), double(h), double(d), double(b.S), double(context_len),
                              flash_prefill && !o.ideal ? kFlashWastePairs : 0.0);
    double kv_bytes = vb(f.kv_context);
    c.bytes = vb(in(0)) + kv_bytes + all_outputs();
    double bits = f.kv_context.format.bits_per_element(double(d));
    if (decode_kernel) {
      c.cls = KernelClass::attention_decode;
      double run = kv_read_run_bytes(f.kv_layout, context_len, kvh, d, bits);
      double contig = o.ideal ? 1.0 : contiguity_efficiency(run, t);
      // Only the cache reads are strided by the layout; queries and outputs stream.
      c.memory_s = (c.bytes - kv_bytes + kv_bytes / contig) / (t.bandwidth_bytes_per_s() * eff(t.eff.memory));
      c.compute_s = c.flops / (t.peak_fp32 * 1e12 * eff(t.eff.scalar));
      c.math = DType::f32;
      // The kernel converts every cached element it reads to f32, costed as a GEMM's
      // dequantization. A round count for both backends: the CPU kernels apply int8 /
      // int4 scales per row (folded into the scores and probabilities) and widen bf16
      // with a shift; the CUDA kernels scale per element.
      if (!o.ideal) c.compute_s += dequant_s(elems(f.kv_context), f.kv_context.format.dtype);
    } else {
      c.cls = KernelClass::attention_prefill;
      c.memory_s = c.bytes / (t.bandwidth_bytes_per_s() * eff(t.eff.memory));
      c.math = f.act;
      double peak = t.matrix_peak_flops(c.math);
      double e = eff(t.eff.attention);
      // CPUs: the fixed costs per head_dim and per KV-head group (Target).
      if (!o.ideal && !t.is_gpu() && d > 0 && kvh > 0)
        e /= 1.0 + t.attention_half_dim / double(d) + t.attention_half_group * double(kvh) / double(h);
      c.compute_s = c.flops / (peak * std::max(1e-6, e));
    }
  }

  double overlap(double cs, double ms) const { return overlap_time(cs, ms, t, o); }

  void run() {
    double B = double(b.B), S = double(b.S);
    switch (f.kind) {
      case OpKind::matmul:
      case OpKind::lm_head:
      case OpKind::expert_matmul: gemm(); break;
      case OpKind::embedding: {
        double H = dim(f.hidden);
        double row_bytes = in(1).format.bytes(1, H);
        scalar(0, vb(in(0)) + B * S * row_bytes + all_outputs());
        break;
      }
      case OpKind::rms_norm: scalar(4.0 * elems(in(0)), all_inputs() + all_outputs()); break;
      case OpKind::rope: scalar(3.0 * elems(in(0)), vb(in(0)) + all_outputs()); break;
      case OpKind::silu: scalar(4.0 * elems(in(0)), all_inputs() + all_outputs()); break;
      case OpKind::mul:
      case OpKind::add: scalar(elems(in(0)), all_inputs() + all_outputs()); break;
      case OpKind::mask: scalar(elems(in(0)), vb(in(0)) + all_outputs()); break;
      case OpKind::softmax: scalar(5.0 * elems(in(0)), vb(in(0)) + all_outputs()); break;
      case OpKind::sample: scalar(2.0 * elems(in(0)), vb(in(0)) + all_outputs()); break;
      case OpKind::kv_write: {
        // Reads the new K and V, writes S positions of the cache (quantizing).
        double new_kv = vb(f.kv_new);
        scalar(4.0 * elems(in(0)), vb(in(0)) + vb(in(1)) + new_kv);
        break;
      }
      case OpKind::rope_kvwrite: {
        double new_kv = vb(f.kv_new);
        scalar(3.0 * (elems(in(0)) + elems(in(1))) + 4.0 * elems(in(1)),
               vb(in(0)) + vb(in(1)) + vb(in(2)) + vb(out(0)) + new_kv);
        break;
      }
      case OpKind::kv_read: {
        const double kv_bytes = vb(f.kv_context);
        scalar(2.0 * elems(out(0)), kv_bytes + all_outputs());
        // The cache reads are strided by the layout, as in decode attention (unfused, the
        // layouts cost the same).
        const int64_t d = f.head_dim;
        const double bits = f.kv_context.format.bits_per_element(double(d));
        const double contig =
            o.ideal ? 1.0 : contiguity_efficiency(kv_read_run_bytes(f.kv_layout, context(), f.kv_heads, d, bits), t);
        c.memory_s = (c.bytes - kv_bytes + kv_bytes / contig) / (t.bandwidth_bytes_per_s() * eff(t.eff.elementwise));
        break;
      }
      case OpKind::qk:
      case OpKind::pv: {
        double T = double(context());
        c.flops = 2.0 * B * double(f.heads) * S * T * double(f.head_dim);
        c.bytes = all_inputs() + all_outputs();
        c.cls = S <= 16 ? KernelClass::gemv : KernelClass::gemm;
        set_compute(gemm_efficiency(S, T), f.act);
        c.memory_s = c.bytes / (t.bandwidth_bytes_per_s() * eff(t.eff.memory));
        break;
      }
      case OpKind::flash_attention: attention(true, false); break;
      case OpKind::decode_attention: attention(false, true); break;
      case OpKind::moe_router: {
        double H = dim(f.hidden), E = double(f.experts);
        c.flops = 2.0 * B * S * H * E + 5.0 * B * S * E;
        c.bytes = all_inputs() + all_outputs();
        c.cls = KernelClass::gemv;
        set_compute(gemm_efficiency(B * S, E), in(1).format.dtype);
        c.memory_s = c.bytes / (t.bandwidth_bytes_per_s() * eff(t.eff.memory));
        break;
      }
      case OpKind::moe_dispatch:
      case OpKind::moe_combine: scalar(elems(out(0)), all_inputs() + all_outputs()); break;
      case OpKind::all_reduce:
      case OpKind::all_gather: {
        double tp = double(f.tp);
        double bytes = f.kind == OpKind::all_reduce ? vb(in(0)) : vb(out(0));
        c.cls = KernelClass::collective;
        c.bytes = bytes;
        c.network_s = collective_seconds(f.kind == OpKind::all_reduce, bytes, tp, t);
        c.flops = f.kind == OpKind::all_reduce ? elems(in(0)) * (tp - 1) / tp : 0;
        break;
      }
    }
    c.launch_s = o.ideal ? 0.0 : t.launch_overhead_us * 1e-6;
    double busy = std::max(overlap(c.compute_s, c.memory_s), c.network_s);
    c.busy_s = busy;
    c.time_s = busy + c.launch_s;
    if (c.network_s >= std::max(c.compute_s, c.memory_s)) c.bound = Bound::network;
    else c.bound = c.compute_s >= c.memory_s ? Bound::compute : Bound::memory;
    if (c.launch_s > busy) c.bound = Bound::launch;
  }
};

}  // namespace

double overlap_time(double compute_s, double memory_s, const Target& t, const CostOptions& o) {
  double p = o.ideal ? 1000.0 : t.roofline_exponent;
  double hi = std::max(compute_s, memory_s), lo = std::min(compute_s, memory_s);
  if (hi <= 0) return 0;
  if (p >= 1000) return hi;
  double r = lo / hi;
  // The common exponents without pow (p = 2 gives the same value; p = 4 within an ulp).
  if (p == 2) return hi * std::sqrt(1.0 + r * r);
  if (p == 4) return hi * std::sqrt(std::sqrt(1.0 + (r * r) * (r * r)));
  return hi * std::pow(1.0 + std::pow(r, p), 1.0 / p);
}

double collective_seconds(bool all_reduce, double bytes, double devices, const Target& t) {
  const double n = devices, W = t.link_bytes_per_s() / 2, step = t.interconnect_latency_us * 1e-6;
  if (n <= 1) return 0;
  auto time = [&](double buffers, double steps) { return (W > 0 ? buffers * bytes / W : 0) + steps * step; };
  const double share = (n - 1) / n;  // of the buffer that lives on the other devices
  if (!(t.nvlink_gbs > 0 && t.nvlink_switch > 0))
    return all_reduce ? time(2 * share, 2 * (n - 1)) : time(share, n - 1);
  if (!all_reduce) return time(share, 1);
  return std::min(time(n - 1, 1), time(2 * share, 2));
}

CostForm cost_form(const Graph& g, const Node& n) { return FormBuilder{g, n}.build(); }

NodeCost cost_node(const CostForm& f, const Target& t, const Bindings& b, const CostOptions& o,
                   bool* reads_context) {
  Costing c{f, t, b, o, {}};
  c.run();
  if (reads_context) *reads_context = c.reads_context;
  return c.c;
}

NodeCost cost_node(const Graph& g, const Node& n, const Target& t, const Bindings& b, const CostOptions& o) {
  return cost_node(cost_form(g, n), t, b, o);
}

}  // namespace lathe
