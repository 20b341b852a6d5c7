#include "ir/ops.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "ir/graph.h"

namespace lathe {

namespace {
constexpr std::array<std::string_view, kNumOpKinds> kOpNames = {
    "embedding", "rms_norm",      "matmul",      "rope",        "kv_write",
    "kv_read",   "qk",            "mask",        "softmax",     "pv",
    "silu",      "mul",           "add",         "moe_router",  "moe_dispatch",
    "expert_matmul", "moe_combine", "lm_head",   "sample",      "all_reduce",
    "all_gather", "rope_kvwrite", "flash_attention", "decode_attention",
};
}  // namespace

std::string_view op_name(OpKind k) { return kOpNames[size_t(k)]; }

std::optional<OpKind> parse_op(std::string_view s) {
  for (size_t i = 0; i < kOpNames.size(); ++i)
    if (kOpNames[i] == s) return OpKind(i);
  return std::nullopt;
}

bool is_gemm(OpKind k) {
  return k == OpKind::matmul || k == OpKind::expert_matmul || k == OpKind::lm_head;
}

// ---- Attrs ----
void Attrs::set(std::string_view key, AttrValue v) {
  auto it = std::lower_bound(items_.begin(), items_.end(), key,
                             [](const auto& p, std::string_view k) { return p.first < k; });
  if (it != items_.end() && it->first == key) {
    it->second = std::move(v);
    return;
  }
  items_.insert(it, {std::string(key), std::move(v)});
}

void Attrs::erase(std::string_view key) {
  std::erase_if(items_, [&](const auto& p) { return p.first == key; });
}

const AttrValue* Attrs::find(std::string_view key) const {
  auto it = std::lower_bound(items_.begin(), items_.end(), key,
                             [](const auto& p, std::string_view k) { return p.first < k; });
  if (it != items_.end() && it->first == key) return &it->second;
  return nullptr;
}

int64_t Attrs::i(std::string_view key, int64_t def) const {
  const AttrValue* v = find(key);
  if (!v) return def;
  if (auto p = std::get_if<int64_t>(v)) return *p;
  if (auto p = std::get_if<double>(v)) {
    // Out of int64 range (or NaN) would be undefined behaviour to convert.
    if (!(*p > -9.2e18 && *p < 9.2e18)) return def;
    return int64_t(*p);
  }
  return def;
}

double Attrs::f(std::string_view key, double def) const {
  const AttrValue* v = find(key);
  if (!v) return def;
  if (auto p = std::get_if<double>(v)) return *p;
  if (auto p = std::get_if<int64_t>(v)) return double(*p);
  return def;
}

std::string Attrs::s(std::string_view key, std::string_view def) const {
  const AttrValue* v = find(key);
  if (!v) return std::string(def);
  if (auto p = std::get_if<std::string>(v)) return *p;
  return std::string(def);
}

std::string rope_table_text(const std::vector<double>& values) {
  std::string out;
  char buf[32];
  for (double d : values) {
    if (!out.empty()) out += ',';
    std::snprintf(buf, sizeof buf, "%.17g", d);
    out += buf;
  }
  return out;
}

std::optional<std::vector<double>> rope_divisors_of(const Attrs& a, std::string* why) {
  std::vector<double> out;
  if (!a.has("rope_divisors")) return out;
  const std::string text = a.s("rope_divisors");
  const int64_t want = a.i("head_dim") / 2;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    double v = 0;
    auto r = std::from_chars(text.data() + pos, text.data() + end, v);
    if (r.ec != std::errc() || r.ptr != text.data() + end || !(v > 0) || !std::isfinite(v)) {
      if (why) *why = "rope_divisors: '" + text.substr(pos, end - pos) + "' is not a positive number";
      return std::nullopt;
    }
    out.push_back(v);
    pos = end + 1;
  }
  if (int64_t(out.size()) != want) {
    if (why)
      *why = "rope_divisors: " + std::to_string(out.size()) + " values for head_dim " +
             std::to_string(a.i("head_dim")) + " (want " + std::to_string(want) + ")";
    return std::nullopt;
  }
  return out;
}

std::vector<double> rope_frequencies(double theta, int64_t head_dim, const std::vector<double>& divisors) {
  std::vector<double> f(size_t(head_dim / 2));
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = std::pow(theta, -2.0 * double(i) / double(head_dim));
    if (!divisors.empty()) f[i] /= divisors[i];
  }
  return f;
}

std::optional<GemmParts> gemm_parts(OpKind k, const Attrs& a, size_t num_inputs) {
  GemmParts p;
  int pos = 1;
  std::string pro = a.s("prologue", "none"), epi = a.s("epilogue", "none");
  if (k == OpKind::matmul || k == OpKind::lm_head) {
    if (pro == "rms_norm") p.norm = pos++;
    else if (pro != "none") return std::nullopt;
    p.first_weight = pos;
    int extra = 0;
    if (epi == "residual") extra = 1;
    else if (epi != "none" && epi != "silu_mul") return std::nullopt;
    p.num_weights = int(num_inputs) - pos - extra;
    if (p.num_weights < 1) return std::nullopt;
    if (epi == "silu_mul" && p.num_weights != 2) return std::nullopt;
    if (k == OpKind::lm_head && (p.num_weights != 1 || epi != "none")) return std::nullopt;
    if (extra) p.residual = int(num_inputs) - 1;
    return p;
  }
  if (k == OpKind::expert_matmul) {
    if (pro != "none" && pro != "gather") return std::nullopt;
    p.idx = pos++;
    p.first_weight = pos;
    int extra = 0;
    if (epi == "combine_residual") extra = 2;
    else if (epi == "combine") extra = 1;
    else if (epi != "none" && epi != "silu_mul") return std::nullopt;
    p.num_weights = int(num_inputs) - pos - extra;
    if (p.num_weights < 1) return std::nullopt;
    if (epi == "silu_mul" && p.num_weights != 2) return std::nullopt;
    if (extra == 2) {
      p.gates = int(num_inputs) - 2;
      p.residual = int(num_inputs) - 1;
    } else if (extra == 1) {
      p.gates = int(num_inputs) - 1;
    }
    return p;
  }
  return std::nullopt;
}

// ---- shape inference ----
namespace {

struct Checker {
  const Graph& g;
  const Node& n;
  std::string* error;
  bool ok = true;

  const Value& in(size_t i) const { return g.value(n.inputs[i]); }
  bool fail(const std::string& msg) {
    if (ok && error) *error = std::string(op_name(n.kind)) + " '" + n.name + "': " + msg;
    ok = false;
    return false;
  }
  bool arity(size_t want) {
    if (n.inputs.size() != want)
      return fail("expects " + std::to_string(want) + " inputs, has " + std::to_string(n.inputs.size()));
    return true;
  }
  bool rank(size_t i, size_t r) {
    if (in(i).shape.size() != r)
      return fail("input " + std::to_string(i) + " (" + in(i).name + ") must have rank " +
                  std::to_string(r) + ", has " + shape_str(in(i).shape));
    return true;
  }
  bool same_dim(const Dim& a, const Dim& b, const std::string& what) {
    if (!(a == b)) return fail(what + ": " + a.str() + " vs " + b.str());
    return true;
  }
  DType act() const {
    auto t = parse_dtype(g.attrs.s("act_dtype", "f32"));
    return t ? *t : DType::f32;
  }
};

Shape with_last(Shape s, Dim d) {
  s.back() = d;
  return s;
}

}  // namespace

std::vector<TypeShape> infer_outputs(const Graph& g, const Node& n, std::string* error) {
  Checker c{g, n, error};
  std::vector<TypeShape> out;
  auto done = [&]() -> std::vector<TypeShape> { return c.ok ? out : std::vector<TypeShape>{}; };
  for (ValueId v : n.inputs)
    if (v < 0 || size_t(v) >= g.value_capacity() || !g.value(v).alive) {
      c.fail("has a dangling input");
      return {};
    }
  const Attrs& a = n.attrs;
  switch (n.kind) {
    case OpKind::embedding: {
      if (!c.arity(2) || !c.rank(0, 2) || !c.rank(1, 2)) return {};
      if (c.in(0).dtype != DType::i32) c.fail("token ids must be i32");
      out.push_back({c.act(), {c.in(0).shape[0], c.in(0).shape[1], c.in(1).shape[1]}});
      return done();
    }
    case OpKind::rms_norm: {
      if (!c.arity(2) || !c.rank(1, 1)) return {};
      c.same_dim(c.in(0).shape.back(), c.in(1).shape[0], "norm weight width");
      out.push_back(c.in(0).type());
      return done();
    }
    case OpKind::matmul:
    case OpKind::lm_head:
    case OpKind::expert_matmul: {
      auto p = gemm_parts(n.kind, a, n.inputs.size());
      if (!p) {
        c.fail("inputs do not match prologue='" + a.s("prologue", "none") + "' epilogue='" +
               a.s("epilogue", "none") + "'");
        return {};
      }
      const Value& x = c.in(size_t(p->x));
      if (x.shape.empty()) return c.fail("input has no shape"), std::vector<TypeShape>{};
      Dim K = x.shape.back();
      if (p->norm >= 0) {
        if (!c.rank(size_t(p->norm), 1)) return {};
        c.same_dim(c.in(size_t(p->norm)).shape[0], K, "norm weight width");
      }
      bool expert = n.kind == OpKind::expert_matmul;
      std::vector<Dim> ns;
      for (int w = 0; w < p->num_weights; ++w) {
        size_t wi = size_t(p->first_weight + w);
        if (!c.rank(wi, expert ? 3 : 2)) return {};
        const Shape& ws = c.in(wi).shape;
        c.same_dim(ws.back(), K, "weight " + c.in(wi).name + " reduction dim");
        ns.push_back(ws[ws.size() - 2]);
      }
      if (n.kind == OpKind::lm_head) {
        out.push_back({DType::f32, {x.shape[0], ns[0]}});
        return done();
      }
      Shape base = x.shape;
      if (expert) {
        if (p->idx >= 0 && c.in(size_t(p->idx)).dtype != DType::i32) c.fail("expert ids must be i32");
        const Shape& ids = c.in(size_t(p->idx)).shape;  // [B, S, k]
        if (ids.size() != 3) return c.fail("expert ids must be [B, S, k]"), std::vector<TypeShape>{};
        if (a.s("prologue", "none") == "gather") {
          if (x.shape.size() != 3) return c.fail("gathered input must be [B, S, K]"), std::vector<TypeShape>{};
          base = {x.shape[0], x.shape[1], ids[2], K};
        } else if (x.shape.size() != 4) {
          return c.fail("expert input must be [B, S, k, K]"), std::vector<TypeShape>{};
        }
      }
      std::string epi = a.s("epilogue", "none");
      if (epi == "silu_mul") {
        c.same_dim(ns[0], ns[1], "gate and up widths");
        out.push_back({x.dtype, with_last(base, ns[0])});
      } else if (epi == "combine_residual" || epi == "combine") {
        if (p->num_weights != 1) c.fail(epi + " takes one weight");
        Shape merged = {base[0], base[1], ns[0]};
        if (p->residual >= 0 && !(c.in(size_t(p->residual)).shape == merged)) c.fail("residual shape mismatch");
        out.push_back({x.dtype, merged});
      } else {
        for (const Dim& d : ns) out.push_back({x.dtype, with_last(base, d)});
        if (epi == "residual") {
          if (out.size() != 1) c.fail("residual epilogue takes one weight");
          else if (!(c.in(size_t(p->residual)).shape == out[0].shape)) c.fail("residual shape mismatch");
        }
      }
      return done();
    }
    case OpKind::rope: {
      if (!c.arity(1) || !c.rank(0, 3)) return {};
      if (std::string why; !rope_divisors_of(a, &why)) c.fail(why);
      c.same_dim(c.in(0).shape[2], Dim::c(a.i("heads") * a.i("head_dim")), "heads x head_dim");
      out.push_back(c.in(0).type());
      return done();
    }
    case OpKind::kv_write:
    case OpKind::rope_kvwrite: {
      bool fused = n.kind == OpKind::rope_kvwrite;
      size_t k = fused ? 1 : 0, state = fused ? 3 : 2;
      if (!c.arity(fused ? 4 : 3) || !c.rank(k, 3) || !c.rank(k + 1, 3) || !c.rank(state, 6)) return {};
      const Value& st = c.in(state);
      if (st.kind != ValueKind::state) c.fail("last input must be the KV state");
      int64_t kvh = a.i("kv_heads"), d = a.i("head_dim");
      c.same_dim(c.in(k).shape[2], Dim::c(kvh * d), "k width");
      c.same_dim(c.in(k + 1).shape[2], Dim::c(kvh * d), "v width");
      if (a.i("layer") < 0 || !st.shape[0].is_const() || a.i("layer") >= st.shape[0].coef)
        c.fail("layer out of range");
      if (fused) {
        if (std::string why; !rope_divisors_of(a, &why)) c.fail(why);
        c.same_dim(c.in(0).shape[2], Dim::c(a.i("heads") * d), "q width");
        out.push_back(c.in(0).type());
      }
      out.push_back({st.dtype, {st.shape[2], st.shape[3], Dim::c(2), st.shape[4], st.shape[5]}});
      return done();
    }
    case OpKind::kv_read: {
      if (!c.arity(1) || !c.rank(0, 5)) return {};
      const Shape& s = c.in(0).shape;
      out.push_back({c.act(), {s[0], s[3], s[1], s[4]}});
      out.push_back({c.act(), {s[0], s[3], s[1], s[4]}});
      return done();
    }
    case OpKind::qk: {
      if (!c.arity(2) || !c.rank(0, 3) || !c.rank(1, 4)) return {};
      int64_t h = a.i("heads"), kvh = a.i("kv_heads"), d = a.i("head_dim");
      if (kvh <= 0 || h % kvh) c.fail("heads must be a multiple of kv_heads");
      c.same_dim(c.in(0).shape[2], Dim::c(h * d), "q width");
      c.same_dim(c.in(1).shape[1], Dim::c(kvh), "k heads");
      out.push_back({DType::f32, {c.in(0).shape[0], Dim::c(h), c.in(0).shape[1], c.in(1).shape[2]}});
      return done();
    }
    case OpKind::mask:
    case OpKind::softmax:
    case OpKind::silu:
    case OpKind::all_reduce: {
      if (!c.arity(1)) return {};
      out.push_back(c.in(0).type());
      return done();
    }
    case OpKind::all_gather: {
      if (!c.arity(1)) return {};
      Shape s = c.in(0).shape;
      s.back() = s.back() * Dim::c(a.i("tp", 1));
      out.push_back({c.in(0).dtype, s});
      return done();
    }
    case OpKind::pv: {
      if (!c.arity(2) || !c.rank(0, 4) || !c.rank(1, 4)) return {};
      const Shape& p = c.in(0).shape;
      int64_t d = a.i("head_dim");
      out.push_back({c.in(1).dtype, {p[0], p[2], Dim::c(p[1].coef * d)}});
      return done();
    }
    case OpKind::mul:
    case OpKind::add: {
      if (!c.arity(2)) return {};
      if (!(c.in(0).type() == c.in(1).type()))
        c.fail("operands differ: " + shape_str(c.in(0).shape) + " vs " + shape_str(c.in(1).shape));
      out.push_back(c.in(0).type());
      return done();
    }
    case OpKind::moe_router: {
      if (!c.arity(2) || !c.rank(0, 3) || !c.rank(1, 2)) return {};
      c.same_dim(c.in(1).shape[0], Dim::c(a.i("experts")), "router rows");
      Shape s = {c.in(0).shape[0], c.in(0).shape[1], Dim::c(a.i("top_k"))};
      out.push_back({DType::i32, s});
      out.push_back({DType::f32, s});
      return done();
    }
    case OpKind::moe_dispatch: {
      if (!c.arity(2) || !c.rank(0, 3) || !c.rank(1, 3)) return {};
      const Shape& h = c.in(0).shape;
      out.push_back({c.in(0).dtype, {h[0], h[1], c.in(1).shape[2], h[2]}});
      return done();
    }
    case OpKind::moe_combine: {
      if (!c.arity(2) || !c.rank(0, 4) || !c.rank(1, 3)) return {};
      const Shape& y = c.in(0).shape;
      out.push_back({c.in(0).dtype, {y[0], y[1], y[3]}});
      return done();
    }
    case OpKind::sample: {
      if (!c.arity(1) || !c.rank(0, 2)) return {};
      out.push_back({DType::i32, {c.in(0).shape[0]}});
      return done();
    }
    case OpKind::flash_attention:
    case OpKind::decode_attention: {
      if (!c.arity(2) || !c.rank(0, 3) || !c.rank(1, 5)) return {};
      int64_t h = a.i("heads"), kvh = a.i("kv_heads"), d = a.i("head_dim");
      if (kvh <= 0 || h % kvh) c.fail("heads must be a multiple of kv_heads");
      c.same_dim(c.in(0).shape[2], Dim::c(h * d), "q width");
      out.push_back(c.in(0).type());
      return done();
    }
  }
  c.fail("unknown op kind");
  return {};
}

}  // namespace lathe
