#include "ir/shape.h"

#include <charconv>

namespace lathe {

std::string Dim::str() const {
  std::string out;
  auto append = [&](const std::string& part) {
    if (!out.empty()) out += '*';
    out += part;
  };
  if (coef != 1 || is_const()) append(std::to_string(coef));
  for (int i = 0; i < b; ++i) append("B");
  for (int i = 0; i < s; ++i) append("S");
  for (int i = 0; i < t; ++i) append("T");
  return out;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += s[i].str();
  }
  return out + "]";
}

std::optional<Dim> parse_dim(std::string_view s) {
  Dim d{1, 0, 0, 0};
  bool any = false;
  while (!s.empty()) {
    size_t star = s.find('*');
    std::string_view part = s.substr(0, star);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (part == "B") {
      ++d.b;
    } else if (part == "S") {
      ++d.s;
    } else if (part == "T") {
      ++d.t;
    } else {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
      if (ec != std::errc() || p != part.data() + part.size() || v < 0) return std::nullopt;
      d.coef *= v;
    }
    any = true;
    if (star == std::string_view::npos) break;
    s.remove_prefix(star + 1);
  }
  if (!any) return std::nullopt;
  return d;
}

int64_t num_elements(const Shape& s, const Bindings& x) {
  int64_t n = 1;
  for (const Dim& d : s) n *= d.eval(x);
  return n;
}

Dim product(const Shape& s) {
  Dim d = Dim::c(1);
  for (const Dim& x : s) d = d * x;
  return d;
}

}  // namespace lathe
