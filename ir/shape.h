// Shapes with symbolic dimensions.
//
// Three symbols describe a step: B (sequences in the batch), S (new tokens per
// sequence this step: the prompt length in prefill, 1 in decode) and T (context length
// after the step). A dimension is a monomial coef * B^b * S^s * T^t, which covers every
// shape a decoder produces ([B, S, 4096], [B, 32, S, T], ...). Cost models and codegen
// bind the symbols to numbers with Bindings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

struct Bindings {
  int64_t B = 1;
  int64_t S = 1;
  int64_t T = 1;
  bool operator==(const Bindings&) const = default;
};

struct Dim {
  int64_t coef = 1;
  uint8_t b = 0, s = 0, t = 0;  // exponents of B, S, T

  static Dim c(int64_t v) { return Dim{v, 0, 0, 0}; }
  static Dim B() { return Dim{1, 1, 0, 0}; }
  static Dim S() { return Dim{1, 0, 1, 0}; }
  static Dim T() { return Dim{1, 0, 0, 1}; }

  bool is_const() const { return b == 0 && s == 0 && t == 0; }
  int64_t eval(const Bindings& x) const {  // inline: the simulator evaluates dims per plan
    auto ipow = [](int64_t v, int e) {
      int64_t r = 1;
      for (int i = 0; i < e; ++i) r *= v;
      return r;
    };
    return coef * ipow(x.B, b) * ipow(x.S, s) * ipow(x.T, t);
  }
  Dim operator*(const Dim& o) const {
    return Dim{coef * o.coef, uint8_t(b + o.b), uint8_t(s + o.s), uint8_t(t + o.t)};
  }
  bool operator==(const Dim&) const = default;
  std::string str() const;
};

using Shape = std::vector<Dim>;

std::string shape_str(const Shape& s);
// Parses one dimension ("4096", "B", "2*B*S"); nullopt when malformed.
std::optional<Dim> parse_dim(std::string_view s);
int64_t num_elements(const Shape& s, const Bindings& x);
// Product of all dims as one monomial.
Dim product(const Shape& s);

}  // namespace lathe
