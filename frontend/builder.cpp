#include "frontend/builder.h"

#include <cmath>

#include "ir/assert.h"
#include "ir/buffers.h"

namespace lathe {

DType activation_dtype(const ModelSpec& m, const Target& t, const PlanOptions& o) {
  if (o.act_dtype) return *o.act_dtype;
  if (!t.is_gpu()) return DType::f32;
  return m.dtype;
}

BuildOptions build_options(const ModelSpec& m, const Target& t, const PlanOptions& o, const Workload& w,
                           Phase phase) {
  BuildOptions b;
  b.phase = phase;
  b.tp = o.tp;
  b.act = activation_dtype(m, t, o);
  b.workload = w;
  return b;
}

namespace {

struct Builder {
  const ModelSpec& m;
  const BuildOptions& o;
  Graph g;
  int64_t heads = 0, kv_heads = 0, ffn = 0, expert_ffn = 0, vocab = 0;
  ValueId kv_state = kNone;
  std::string rope_text;  // the layers' shared RoPE divisors attribute, made once

  Builder(const ModelSpec& spec, const BuildOptions& options) : m(spec), o(options) {}

  ValueId weight(const std::string& name, Shape shape) {
    Value v;
    v.name = name;
    v.kind = ValueKind::weight;
    v.format = Format{m.dtype, 0, DType::f16};
    v.shape = std::move(shape);
    return g.add_value(std::move(v));
  }
  ValueId op(OpKind k, const std::string& name, std::vector<ValueId> in, Attrs a, const std::string& out) {
    NodeId n = g.add_op(k, name, std::move(in), std::move(a), {out});
    return g.node(n).outputs[0];
  }
  std::pair<ValueId, ValueId> op2(OpKind k, const std::string& name, std::vector<ValueId> in, Attrs a,
                                  const std::string& out0, const std::string& out1) {
    NodeId n = g.add_op(k, name, std::move(in), std::move(a), {out0, out1});
    return {g.node(n).outputs[0], g.node(n).outputs[1]};
  }
  Attrs attn_attrs(int64_t layer) const {
    Attrs a;
    a.set("heads", heads);
    a.set("kv_heads", kv_heads);
    a.set("head_dim", m.head_dim);
    a.set("layer", layer);
    return a;
  }
  ValueId reduce(ValueId x, const std::string& name) {
    if (o.tp == 1) return x;
    Attrs a;
    a.set("tp", o.tp);
    return op(OpKind::all_reduce, name, {x}, a, name);
  }

  ValueId attention_block(int64_t l, ValueId x) {
    const std::string L = "l" + std::to_string(l) + ".", W = "layers." + std::to_string(l) + ".";
    const Dim H = Dim::c(m.hidden), D = Dim::c(m.head_dim);
    Attrs norm;
    norm.set("eps", m.norm_eps);
    ValueId h = op(OpKind::rms_norm, L + "attn_norm", {x, weight(W + "attn_norm", {H})}, norm, L + "h_attn");
    ValueId q = op(OpKind::matmul, L + "wq", {h, weight(W + "wq", {Dim::c(heads * m.head_dim), H})}, {}, L + "q");
    ValueId k = op(OpKind::matmul, L + "wk", {h, weight(W + "wk", {Dim::c(kv_heads * m.head_dim), H})}, {}, L + "k");
    ValueId v = op(OpKind::matmul, L + "wv", {h, weight(W + "wv", {Dim::c(kv_heads * m.head_dim), H})}, {}, L + "v");
    Attrs rq;
    rq.set("heads", heads);
    rq.set("head_dim", m.head_dim);
    rq.set("theta", m.rope_theta);
    if (m.rope_scaling) {
      if (rope_text.empty()) rope_text = rope_table_text(rope_divisors(*m.rope_scaling, m.rope_theta, m.head_dim));
      rq.set("rope_divisors", rope_text);
    }
    rq.set("layer", l);
    Attrs rk = rq;
    rk.set("heads", kv_heads);
    ValueId qr = op(OpKind::rope, L + "rope_q", {q}, rq, L + "q_rot");
    ValueId kr = op(OpKind::rope, L + "rope_k", {k}, rk, L + "k_rot");
    ValueId cache = op(OpKind::kv_write, L + "kv_write", {kr, v, kv_state}, attn_attrs(l), L + "kv");
    auto [kk, vv] = op2(OpKind::kv_read, L + "kv_read", {cache}, attn_attrs(l), L + "k_all", L + "v_all");
    Attrs qa = attn_attrs(l);
    qa.set("scale", 1.0 / std::sqrt(double(m.head_dim)));
    ValueId s = op(OpKind::qk, L + "qk", {qr, kk}, qa, L + "scores");
    if (o.phase == Phase::prefill) s = op(OpKind::mask, L + "mask", {s}, {}, L + "masked");
    ValueId p = op(OpKind::softmax, L + "softmax", {s}, {}, L + "probs");
    ValueId att = op(OpKind::pv, L + "pv", {p, vv}, attn_attrs(l), L + "attn");
    ValueId out = op(OpKind::matmul, L + "wo", {att, weight(W + "wo", {H, Dim::c(heads * m.head_dim)})}, {}, L + "attn_out");
    out = reduce(out, L + "attn_out_sum");
    (void)D;
    return op(OpKind::add, L + "attn_add", {x, out}, {}, L + "x_attn");
  }

  ValueId ffn_block(int64_t l, ValueId x) {
    const std::string L = "l" + std::to_string(l) + ".", W = "layers." + std::to_string(l) + ".";
    const Dim H = Dim::c(m.hidden);
    Attrs norm;
    norm.set("eps", m.norm_eps);
    ValueId h = op(OpKind::rms_norm, L + "ffn_norm", {x, weight(W + "ffn_norm", {H})}, norm, L + "h_ffn");
    ValueId out;
    if (!m.is_moe()) {
      const Dim F = Dim::c(ffn);
      ValueId gt = op(OpKind::matmul, L + "w_gate", {h, weight(W + "w_gate", {F, H})}, {}, L + "gate");
      ValueId up = op(OpKind::matmul, L + "w_up", {h, weight(W + "w_up", {F, H})}, {}, L + "up");
      ValueId act = op(OpKind::silu, L + "silu", {gt}, {}, L + "gate_act");
      ValueId prod = op(OpKind::mul, L + "mul", {act, up}, {}, L + "ffn_act");
      out = op(OpKind::matmul, L + "w_down", {prod, weight(W + "w_down", {H, F})}, {}, L + "ffn_out");
    } else {
      const Dim E = Dim::c(m.moe->experts), F = Dim::c(expert_ffn);
      Attrs ra;
      ra.set("experts", m.moe->experts);
      ra.set("top_k", m.moe->top_k);
      auto [ids, gates] = op2(OpKind::moe_router, L + "router", {h, weight(W + "router", {E, H})}, ra,
                              L + "expert_ids", L + "expert_gates");
      Attrs ka;
      ka.set("top_k", m.moe->top_k);
      ValueId xd = op(OpKind::moe_dispatch, L + "dispatch", {h, ids}, ka, L + "dispatched");
      ValueId gt = op(OpKind::expert_matmul, L + "experts.w_gate", {xd, ids, weight(W + "experts.w_gate", {E, F, H})}, ka,
                      L + "gate");
      ValueId up = op(OpKind::expert_matmul, L + "experts.w_up", {xd, ids, weight(W + "experts.w_up", {E, F, H})}, ka,
                      L + "up");
      ValueId act = op(OpKind::silu, L + "silu", {gt}, {}, L + "gate_act");
      ValueId prod = op(OpKind::mul, L + "mul", {act, up}, {}, L + "ffn_act");
      ValueId y = op(OpKind::expert_matmul, L + "experts.w_down",
                     {prod, ids, weight(W + "experts.w_down", {E, H, F})}, ka, L + "expert_out");
      out = op(OpKind::moe_combine, L + "combine", {y, gates}, ka, L + "ffn_out");
    }
    out = reduce(out, L + "ffn_out_sum");
    return op(OpKind::add, L + "ffn_add", {x, out}, {}, "x" + std::to_string(l + 1));
  }

  Graph build() {
    int64_t tp = o.tp;
    auto need = [&](bool ok, const std::string& why) {
      if (!ok) throw Error(m.name + ": cannot split over tp=" + std::to_string(tp) + " devices: " + why);
    };
    need(tp >= 1, "tp must be >= 1");
    need(m.heads % tp == 0, "heads (" + std::to_string(m.heads) + ") not divisible by tp");
    need(m.kv_heads % tp == 0 || tp % m.kv_heads == 0,
         "kv_heads (" + std::to_string(m.kv_heads) + ") and tp must divide one another");
    need(m.vocab % tp == 0, "vocab (" + std::to_string(m.vocab) + ") not divisible by tp");
    heads = m.heads / tp;
    kv_heads = m.kv_heads >= tp ? m.kv_heads / tp : 1;
    vocab = m.vocab / tp;
    if (m.is_moe()) {
      need(m.moe->expert_ffn % tp == 0, "expert_ffn not divisible by tp");
      expert_ffn = m.moe->expert_ffn / tp;
    } else {
      need(m.ffn % tp == 0, "ffn (" + std::to_string(m.ffn) + ") not divisible by tp");
      ffn = m.ffn / tp;
    }

    g.name = m.name + "." + std::string(phase_name(o.phase));
    g.phase = o.phase;
    g.attrs.set("model", m.name);
    g.attrs.set("layers", m.layers);
    g.attrs.set("hidden", m.hidden);
    g.attrs.set("heads", heads);
    g.attrs.set("kv_heads", kv_heads);
    g.attrs.set("head_dim", m.head_dim);
    g.attrs.set("vocab", m.vocab);
    g.attrs.set("max_context", m.max_context);
    g.attrs.set("rope_theta", m.rope_theta);
    if (m.rope_scaling) g.attrs.set("rope_scaling", m.rope_scaling->type);
    g.attrs.set("norm_eps", m.norm_eps);
    g.attrs.set("tp", tp);
    g.attrs.set("act_dtype", std::string(dtype_name(o.act)));
    g.attrs.set("kv_dtype", std::string(dtype_name(o.act)));
    g.attrs.set("kv_layout", std::string("LHTD"));
    g.attrs.set("prompt", o.workload.prompt);
    g.attrs.set("final_context", o.workload.final_context());
    if (m.is_moe()) {
      g.attrs.set("experts", m.moe->experts);
      g.attrs.set("top_k", m.moe->top_k);
    }
    const Workload& w = o.workload;
    if (o.phase == Phase::prefill) set_graph_bindings(g, {w.batch, w.prompt, w.prompt});
    else set_graph_bindings(g, {w.batch, 1, w.final_context()});

    const Dim B = Dim::B(), S = Dim::S(), T = Dim::T(), H = Dim::c(m.hidden);
    Value tokens;
    tokens.name = "tokens";
    tokens.kind = ValueKind::input;
    tokens.dtype = DType::i32;
    tokens.shape = {B, S};
    ValueId tok = g.add_value(tokens);
    Value kv;
    kv.name = "kv";
    kv.kind = ValueKind::state;
    kv.format = Format{o.act, 0, DType::f16};
    kv.shape = {Dim::c(m.layers), Dim::c(2), B, T, Dim::c(kv_heads), Dim::c(m.head_dim)};
    kv_state = g.add_value(kv);

    // A tied table is the LM head too: over tp devices it is split by vocabulary like the
    // head (each device looks up the tokens of its rows; an all-reduce joins them), as
    // Megatron's and vLLM's vocab-parallel embeddings are. An untied table is replicated.
    const bool tied = m.tie_embeddings;
    ValueId emb = weight("tok_embeddings", {Dim::c(tied ? vocab : m.vocab), H});
    ValueId x = op(OpKind::embedding, "embed", {tok, emb}, {}, "x0");
    if (tied) x = reduce(x, "embed_reduce");
    for (int64_t l = 0; l < m.layers; ++l) {
      x = attention_block(l, x);
      x = ffn_block(l, x);
    }
    Attrs norm;
    norm.set("eps", m.norm_eps);
    ValueId h = op(OpKind::rms_norm, "final_norm", {x, weight("norm", {H})}, norm, "h_final");
    ValueId head = tied ? emb : weight("lm_head", {Dim::c(vocab), H});
    ValueId logits = op(OpKind::lm_head, "lm_head", {h, head}, {}, "logits");
    if (tp > 1) {
      Attrs a;
      a.set("tp", tp);
      logits = op(OpKind::all_gather, "logits_gather", {logits}, a, "logits_all");
    }
    op(OpKind::sample, "sample", {logits}, {}, "next_tokens");
    return std::move(g);
  }
};

}  // namespace

Graph build_graph(const ModelSpec& m, const BuildOptions& o) {
  Builder b(m, o);
  return b.build();
}

}  // namespace lathe
