#include "runtime/reference.h"

#include <algorithm>
#include <cmath>

#include "ir/assert.h"

namespace lathe {

double normalized_error(const std::vector<float>& a, const std::vector<double>& b) {
  LATHE_ASSERT(a.size() == b.size(), "normalized_error: sizes differ");
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = double(a[i]) - b[i];
    num += d * d;
    den += b[i] * b[i];
  }
  if (!std::isfinite(num)) return INFINITY;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

Reference::Reference(const Graph& prefill, const Graph& decode, const WeightSource& source)
    : prefill_(prefill), decode_(decode), source_(source) {
  layers_ = decode.attrs.i("layers");
  kv_heads_ = decode.attrs.i("kv_heads");
  head_dim_ = decode.attrs.i("head_dim");
  vocab_ = decode.attrs.i("vocab");
  for (const Graph* g : {&prefill, &decode})
    for (ValueId v : g->values_of(ValueKind::weight)) {
      std::vector<int64_t> shape;
      for (const Dim& d : g->value(v).shape) shape.push_back(d.coef);
      shapes_[g->value(v).name] = shape;
    }
}

const std::vector<double>& Reference::weight(const std::string& name) {
  auto it = weights_.find(name);
  if (it != weights_.end()) return it->second;
  const std::vector<int64_t>& shape = shapes_.at(name);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> f(static_cast<size_t>(n));
  source_(name, shape, f.data());
  return weights_[name] = std::vector<double>(f.begin(), f.end());
}

std::vector<std::vector<double>> Reference::prefill(const std::vector<std::vector<int32_t>>& prompts) {
  lengths_.assign(prompts.size(), 0);
  k_.assign(size_t(layers_), std::vector<std::vector<double>>(prompts.size()));
  v_ = k_;
  return run(prefill_, prompts);
}

std::vector<std::vector<double>> Reference::decode(const std::vector<int32_t>& tokens) {
  LATHE_ASSERT(tokens.size() == lengths_.size(), "reference decode: one token per sequence");
  std::vector<std::vector<int32_t>> t;
  for (int32_t x : tokens) t.push_back({x});
  return run(decode_, t);
}

// Values are row-packed: [B, S, X...] as rows x X; per-sequence attention tensors as
// [seq][head][i][t] with the step's largest S and T.
std::vector<std::vector<double>> Reference::run(const Graph& g, const std::vector<std::vector<int32_t>>& tokens) {
  std::vector<Seq> seqs;
  int64_t rows = 0, max_len = 0, max_ctx = 0;
  for (size_t s = 0; s < tokens.size(); ++s) {
    Seq q{lengths_[s], int64_t(tokens[s].size()), rows};
    seqs.push_back(q);
    rows += q.len;
    max_len = std::max(max_len, q.len);
    max_ctx = std::max(max_ctx, q.past + q.len);
  }
  const int64_t B = int64_t(seqs.size()), L = max_len, T = max_ctx, D = head_dim_;
  std::vector<std::vector<double>> val(g.value_capacity());
  auto width = [&](ValueId v) {  // elements per row of a [B, S, ...] value
    int64_t w = 1;
    const Shape& s = g.value(v).shape;
    for (size_t i = 2; i < s.size(); ++i) w *= s[i].coef;
    return w;
  };
  std::vector<double>& tok = val[size_t(g.find_value("tokens"))];
  for (const auto& t : tokens) tok.insert(tok.end(), t.begin(), t.end());
  std::vector<std::vector<double>> logits;
  for (NodeId id : g.topo_order()) {
    const Node& n = g.node(id);
    const Attrs& a = n.attrs;
    auto in = [&](size_t i) -> const std::vector<double>& {
      const Value& v = g.value(n.inputs[i]);
      if (v.kind == ValueKind::weight) return weight(v.name);
      return val[size_t(n.inputs[i])];
    };
    auto out = [&](size_t o, int64_t size) -> std::vector<double>& {
      std::vector<double>& r = val[size_t(n.outputs[o])];
      r.assign(size_t(size), 0.0);
      return r;
    };
    if (is_gemm(n.kind) && (a.s("prologue", "none") != "none" || a.s("epilogue", "none") != "none"))
      throw Error("reference: " + n.name + " is fused; the reference runs unfused graphs only");
    switch (n.kind) {
      case OpKind::embedding: {
        const auto& w = in(1);
        int64_t H = g.value(n.inputs[1]).shape[1].coef;
        auto& y = out(0, rows * H);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t k = 0; k < H; ++k) y[size_t(r * H + k)] = w[size_t(int64_t(tok[size_t(r)]) * H + k)];
        break;
      }
      case OpKind::rms_norm: {
        const auto &x = in(0), &w = in(1);
        int64_t H = int64_t(w.size());
        auto& y = out(0, rows * H);
        for (int64_t r = 0; r < rows; ++r) {
          double ss = 0;
          for (int64_t k = 0; k < H; ++k) ss += x[size_t(r * H + k)] * x[size_t(r * H + k)];
          double sc = 1.0 / std::sqrt(ss / double(H) + a.f("eps"));
          for (int64_t k = 0; k < H; ++k) y[size_t(r * H + k)] = x[size_t(r * H + k)] * sc * w[size_t(k)];
        }
        break;
      }
      case OpKind::matmul:
      case OpKind::lm_head: {
        if (n.inputs.size() != 2) throw Error("reference: " + n.name + " has several weights (fused)");
        const auto &x = in(0), &w = in(1);
        const Shape& ws = g.value(n.inputs[1]).shape;
        int64_t N = ws[0].coef, K = ws[1].coef;
        bool last = n.kind == OpKind::lm_head;
        int64_t M = last ? B : rows;
        auto& y = out(0, M * N);
        for (int64_t m = 0; m < M; ++m) {
          int64_t src = last ? seqs[size_t(m)].row0 + seqs[size_t(m)].len - 1 : m;
          for (int64_t j = 0; j < N; ++j) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k) s += x[size_t(src * K + k)] * w[size_t(j * K + k)];
            y[size_t(m * N + j)] = s;
          }
        }
        if (last) {
          for (int64_t m = 0; m < B; ++m) logits.emplace_back(y.begin() + m * N, y.begin() + (m + 1) * N);
        }
        break;
      }
      case OpKind::rope: {
        const auto& x = in(0);
        int64_t H = a.i("heads");
        double theta = a.f("theta");
        std::string why;
        auto divisors = rope_divisors_of(a, &why);
        if (!divisors) throw Error("reference: node '" + n.name + "': " + why);
        auto& y = out(0, rows * H * D);
        for (const Seq& s : seqs)
          for (int64_t i = 0; i < s.len; ++i) {
            int64_t r = s.row0 + i, pos = s.past + i;
            for (int64_t h = 0; h < H; ++h)
              for (int64_t p = 0; p < D / 2; ++p) {
                double freq = std::pow(theta, -2.0 * double(p) / double(D));
                if (!divisors->empty()) freq /= (*divisors)[size_t(p)];
                double ang = double(pos) * freq;
                double c = std::cos(ang), sn = std::sin(ang);
                size_t o = size_t((r * H + h) * D + 2 * p);
                y[o] = x[o] * c - x[o + 1] * sn;
                y[o + 1] = x[o] * sn + x[o + 1] * c;
              }
          }
        break;
      }
      case OpKind::kv_write: {
        const auto &k = in(0), &v = in(1);
        int64_t layer = a.i("layer"), KVH = kv_heads_;
        for (size_t s = 0; s < seqs.size(); ++s)
          for (int64_t i = 0; i < seqs[s].len; ++i) {
            int64_t r = seqs[s].row0 + i;
            auto& kc = k_[size_t(layer)][s];
            auto& vc = v_[size_t(layer)][s];
            kc.insert(kc.end(), k.begin() + r * KVH * D, k.begin() + (r + 1) * KVH * D);
            vc.insert(vc.end(), v.begin() + r * KVH * D, v.begin() + (r + 1) * KVH * D);
          }
        out(0, 0);  // the cache view: the cache itself
        break;
      }
      case OpKind::kv_read: {
        int64_t layer = a.i("layer"), KVH = kv_heads_;
        auto& ko = out(0, B * KVH * T * D);
        auto& vo = out(1, B * KVH * T * D);
        for (size_t s = 0; s < seqs.size(); ++s)
          for (int64_t t = 0; t < seqs[s].past + seqs[s].len; ++t)
            for (int64_t h = 0; h < KVH; ++h)
              for (int64_t d = 0; d < D; ++d) {
                size_t o = size_t(((int64_t(s) * KVH + h) * T + t) * D + d), c = size_t((t * KVH + h) * D + d);
                ko[o] = k_[size_t(layer)][s][c];
                vo[o] = v_[size_t(layer)][s][c];
              }
        break;
      }
      case OpKind::qk: {
        const auto &q = in(0), &k = in(1);
        int64_t H = a.i("heads"), KVH = a.i("kv_heads");
        double scale = a.f("scale");
        auto& y = out(0, B * H * L * T);
        for (size_t s = 0; s < seqs.size(); ++s)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < seqs[s].len; ++i)
              for (int64_t t = 0; t < seqs[s].past + seqs[s].len; ++t) {
                double dot = 0;
                for (int64_t d = 0; d < D; ++d)
                  dot += q[size_t(((seqs[s].row0 + i) * H + h) * D + d)] *
                         k[size_t(((int64_t(s) * KVH + h / (H / KVH)) * T + t) * D + d)];
                y[size_t(((int64_t(s) * H + h) * L + i) * T + t)] = dot * scale;
              }
        break;
      }
      case OpKind::mask: {
        const auto& x = in(0);
        int64_t H = g.value(n.inputs[0]).shape[1].coef;
        auto& y = out(0, int64_t(x.size()));
        for (size_t s = 0; s < seqs.size(); ++s)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < seqs[s].len; ++i)
              for (int64_t t = 0; t < seqs[s].past + seqs[s].len; ++t) {
                size_t o = size_t(((int64_t(s) * H + h) * L + i) * T + t);
                y[o] = t <= seqs[s].past + i ? x[o] : -INFINITY;
              }
        break;
      }
      case OpKind::softmax: {
        const auto& x = in(0);
        int64_t H = g.value(n.inputs[0]).shape[1].coef;
        auto& y = out(0, int64_t(x.size()));
        for (size_t s = 0; s < seqs.size(); ++s)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < seqs[s].len; ++i) {
              size_t o = size_t(((int64_t(s) * H + h) * L + i) * T);
              int64_t ctx = seqs[s].past + seqs[s].len;
              double mx = -INFINITY, sum = 0;
              for (int64_t t = 0; t < ctx; ++t) mx = std::max(mx, x[o + size_t(t)]);
              for (int64_t t = 0; t < ctx; ++t) sum += std::exp(x[o + size_t(t)] - mx);
              for (int64_t t = 0; t < ctx; ++t) y[o + size_t(t)] = std::exp(x[o + size_t(t)] - mx) / sum;
            }
        break;
      }
      case OpKind::pv: {
        const auto &p = in(0), &v = in(1);
        int64_t H = g.value(n.inputs[0]).shape[1].coef, KVH = a.i("kv_heads");
        auto& y = out(0, rows * H * D);
        for (size_t s = 0; s < seqs.size(); ++s)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < seqs[s].len; ++i)
              for (int64_t d = 0; d < D; ++d) {
                double acc = 0;
                for (int64_t t = 0; t < seqs[s].past + seqs[s].len; ++t)
                  acc += p[size_t(((int64_t(s) * H + h) * L + i) * T + t)] *
                         v[size_t(((int64_t(s) * KVH + h / (H / KVH)) * T + t) * D + d)];
                y[size_t(((seqs[s].row0 + i) * H + h) * D + d)] = acc;
              }
        break;
      }
      case OpKind::silu: {
        const auto& x = in(0);
        auto& y = out(0, int64_t(x.size()));
        for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] / (1.0 + std::exp(-x[i]));
        break;
      }
      case OpKind::mul:
      case OpKind::add: {
        const auto &x = in(0), &z = in(1);
        auto& y = out(0, int64_t(x.size()));
        for (size_t i = 0; i < x.size(); ++i) y[i] = n.kind == OpKind::mul ? x[i] * z[i] : x[i] + z[i];
        break;
      }
      case OpKind::moe_router: {
        const auto &x = in(0), &w = in(1);
        int64_t E = a.i("experts"), K = a.i("top_k"), H = width(n.inputs[0]);
        auto& ids = out(0, rows * K);
        auto& gates = out(1, rows * K);
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<double> lg(static_cast<size_t>(E));
          for (int64_t e = 0; e < E; ++e) {
            double s = 0;
            for (int64_t k = 0; k < H; ++k) s += x[size_t(r * H + k)] * w[size_t(e * H + k)];
            lg[size_t(e)] = s;
          }
          std::vector<int64_t> order(static_cast<size_t>(E));
          for (int64_t e = 0; e < E; ++e) order[size_t(e)] = e;
          std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) { return lg[size_t(p)] > lg[size_t(q)]; });
          double mx = lg[size_t(order[0])], sum = 0;
          for (int64_t j = 0; j < K; ++j) sum += std::exp(lg[size_t(order[size_t(j)])] - mx);
          for (int64_t j = 0; j < K; ++j) {
            ids[size_t(r * K + j)] = double(order[size_t(j)]);
            gates[size_t(r * K + j)] = std::exp(lg[size_t(order[size_t(j)])] - mx) / sum;
          }
        }
        break;
      }
      case OpKind::moe_dispatch: {
        const auto& x = in(0);
        int64_t K = a.i("top_k"), H = width(n.inputs[0]);
        auto& y = out(0, rows * K * H);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < K; ++j)
            for (int64_t k = 0; k < H; ++k) y[size_t((r * K + j) * H + k)] = x[size_t(r * H + k)];
        break;
      }
      case OpKind::expert_matmul: {
        if (n.inputs.size() != 3) throw Error("reference: " + n.name + " is fused");
        const auto &x = in(0), &ids = in(1), &w = in(2);
        const Shape& ws = g.value(n.inputs[2]).shape;
        int64_t N = ws[1].coef, Kd = ws[2].coef, P = int64_t(ids.size());
        auto& y = out(0, P * N);
        for (int64_t p = 0; p < P; ++p) {
          int64_t e = int64_t(ids[size_t(p)]);
          for (int64_t j = 0; j < N; ++j) {
            double s = 0;
            for (int64_t k = 0; k < Kd; ++k) s += x[size_t(p * Kd + k)] * w[size_t((e * N + j) * Kd + k)];
            y[size_t(p * N + j)] = s;
          }
        }
        break;
      }
      case OpKind::moe_combine: {
        const auto &x = in(0), &gt = in(1);
        int64_t K = a.i("top_k"), H = g.value(n.inputs[0]).shape[3].coef;
        auto& y = out(0, rows * H);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t k = 0; k < H; ++k) {
            double acc = 0;
            for (int64_t j = 0; j < K; ++j) acc += gt[size_t(r * K + j)] * x[size_t((r * K + j) * H + k)];
            y[size_t(r * H + k)] = acc;
          }
        break;
      }
      case OpKind::sample: {
        const auto& x = in(0);
        auto& y = out(0, B);
        int64_t V = int64_t(x.size()) / B;
        for (int64_t b = 0; b < B; ++b)
          y[size_t(b)] = double(std::max_element(x.begin() + b * V, x.begin() + (b + 1) * V) - (x.begin() + b * V));
        break;
      }
      default:
        throw Error("reference: " + std::string(op_name(n.kind)) + " (" + n.name +
                    ") is not an unfused op; run the reference on graphs built without passes");
    }
  }
  for (size_t s = 0; s < seqs.size(); ++s) lengths_[s] += seqs[s].len;
  return logits;
}

}  // namespace lathe
