#include "ir/text.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include "ir/assert.h"

namespace lathe {

namespace {

char sigil(ValueKind k) {
  switch (k) {
    case ValueKind::weight: return '@';
    case ValueKind::state: return '$';
    default: return '%';
  }
}

std::string type_str(const Value& v) {
  std::string f;
  if (v.kind == ValueKind::weight || v.kind == ValueKind::state) {
    f = std::string(dtype_name(v.format.dtype));
    if (v.format.has_scales() && v.format.group > 0) f += ":g" + std::to_string(v.format.group);
  } else {
    f = std::string(dtype_name(v.dtype));
  }
  return f + shape_str(v.shape);
}

std::string double_str(double d) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, p);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string value_ref(const Value& v) { return sigil(v.kind) + v.name; }

std::string attr_value_str(const AttrValue& v) {
  if (auto p = std::get_if<int64_t>(&v)) return std::to_string(*p);
  if (auto p = std::get_if<double>(&v)) return double_str(*p);
  std::string out = "\"";
  for (char c : std::get<std::string>(v)) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string print_graph(const Graph& g) {
  std::string out = "lathe-ir 1\ngraph " + g.name + " phase=" + std::string(phase_name(g.phase)) + "\n";
  for (const auto& [k, v] : g.attrs.items()) out += "attr " + k + " = " + attr_value_str(v) + "\n";
  for (ValueKind kind : {ValueKind::input, ValueKind::state, ValueKind::weight})
    for (ValueId id : g.values_of(kind)) {
      const Value& v = g.value(id);
      out += std::string(value_kind_name(kind)) + " " + value_ref(v) + " : " + type_str(v) + "\n";
    }
  for (NodeId id : g.topo_order()) {
    const Node& n = g.node(id);
    out += "  node " + n.name + " = " + std::string(op_name(n.kind)) + "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (i) out += ", ";
      out += value_ref(g.value(n.inputs[i]));
    }
    out += ")";
    if (!n.attrs.items().empty()) {
      out += " {";
      bool first = true;
      for (const auto& [k, v] : n.attrs.items()) {
        if (!first) out += ", ";
        first = false;
        out += k + " = " + attr_value_str(v);
      }
      out += "}";
    }
    if (!n.absorbed.empty()) {
      out += " absorbed(";
      for (size_t i = 0; i < n.absorbed.size(); ++i) out += (i ? ", " : "") + n.absorbed[i];
      out += ")";
    }
    out += " ->";
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value& v = g.value(n.outputs[i]);
      out += (i ? ", " : " ") + value_ref(v) + ": " + type_str(v);
      if (v.offset >= 0) out += " @" + std::to_string(v.offset);
    }
    out += "\n";
  }
  return out + "end\n";
}

// ---- parser ----
namespace {

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

struct Cursor {
  std::string_view s;
  size_t pos = 0;
  std::string_view source;
  int line = 0;

  [[noreturn]] void fail(const std::string& why) const {
    throw Error(std::string(source) + ":" + std::to_string(line) + ":" + std::to_string(pos + 1) +
                ": " + why);
  }
  void ws() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\r')) ++pos;
  }
  bool at_end() {
    ws();
    return pos >= s.size();
  }
  bool peek(char c) {
    ws();
    return pos < s.size() && s[pos] == c;
  }
  bool accept(char c) {
    if (!peek(c)) return false;
    ++pos;
    return true;
  }
  bool accept_word(std::string_view w) {
    ws();
    if (s.substr(pos, w.size()) != w) return false;
    if (pos + w.size() < s.size() && name_char(s[pos + w.size()])) return false;
    pos += w.size();
    return true;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "'");
  }
  std::string name() {
    ws();
    size_t start = pos;
    while (pos < s.size() && name_char(s[pos])) ++pos;
    if (pos == start) fail("expected a name");
    return std::string(s.substr(start, pos - start));
  }
  int64_t integer() {
    ws();
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data() + pos, s.data() + s.size(), v);
    if (ec != std::errc()) fail("expected an integer");
    pos = size_t(p - s.data());
    return v;
  }
  AttrValue attr_value() {
    ws();
    if (accept('"')) {
      std::string out;
      while (pos < s.size() && s[pos] != '"') {
        if (s[pos] == '\\' && pos + 1 < s.size()) ++pos;
        out += s[pos++];
      }
      if (pos >= s.size()) fail("unterminated string");
      ++pos;
      return out;
    }
    size_t start = pos;
    while (pos < s.size() && (std::isalnum(static_cast<unsigned char>(s[pos])) || s[pos] == '.' ||
                              s[pos] == '-' || s[pos] == '+'))
      ++pos;
    std::string_view tok = s.substr(start, pos - start);
    if (tok.empty()) fail("expected a value");
    if (tok.find_first_of(".eEn") != std::string_view::npos) {
      double d = 0;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), d);
      if (ec != std::errc() || p != tok.data() + tok.size()) fail("bad number '" + std::string(tok) + "'");
      return d;
    }
    int64_t v = 0;
    auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (ec != std::errc() || p != tok.data() + tok.size()) fail("bad integer '" + std::string(tok) + "'");
    return v;
  }
  // FORMAT '[' dims ']' where FORMAT = dtype(:gN)?
  Format format_and_shape(Shape* shape) {
    ws();
    size_t start = pos;
    while (pos < s.size() && (std::isalnum(static_cast<unsigned char>(s[pos])) || s[pos] == '_')) ++pos;
    auto t = parse_dtype(s.substr(start, pos - start));
    if (!t) fail("unknown dtype '" + std::string(s.substr(start, pos - start)) + "'");
    Format f{*t, 0, *t == DType::fp8_e4m3 ? DType::f32 : DType::f16};
    if (pos < s.size() && s[pos] == ':') {
      ++pos;
      if (pos >= s.size() || s[pos] != 'g') fail("expected ':gN' group size");
      ++pos;
      f.group = int(integer());
      if (f.group <= 0 || f.group > 1 << 20) fail("bad group size");
    }
    expect('[');
    shape->clear();
    if (!accept(']')) {
      do {
        ws();
        size_t ds = pos;
        while (pos < s.size() && s[pos] != ',' && s[pos] != ']') ++pos;
        auto d = parse_dim(s.substr(ds, pos - ds));
        if (!d) fail("bad dimension '" + std::string(s.substr(ds, pos - ds)) + "'");
        shape->push_back(*d);
      } while (accept(','));
      expect(']');
    }
    return f;
  }
};

}  // namespace

Graph parse_graph(std::string_view text, std::string_view source) {
  Graph g;
  bool header = false, graph_line = false, ended = false;
  int line_no = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(start, nl - start);
    start = nl + 1;
    ++line_no;
    Cursor c{line, 0, source, line_no};
    if (c.at_end() || c.peek('#')) {
      if (nl == text.size()) break;
      continue;
    }
    if (ended) c.fail("text after 'end'");
    if (!header) {
      if (!c.accept_word("lathe-ir")) c.fail("expected 'lathe-ir 1' header");
      if (c.integer() != 1) c.fail("unsupported IR version (this lathe reads version 1)");
      header = true;
      continue;
    }
    if (c.accept_word("graph")) {
      g.name = c.name();
      if (!c.accept_word("phase")) c.fail("expected phase=");
      c.expect('=');
      std::string p = c.name();
      if (p == "prefill") g.phase = Phase::prefill;
      else if (p == "decode") g.phase = Phase::decode;
      else c.fail("phase must be prefill or decode");
      graph_line = true;
      continue;
    }
    if (!graph_line) c.fail("expected 'graph NAME phase=...'");
    if (c.accept_word("end")) {
      ended = true;
      continue;
    }
    if (c.accept_word("attr")) {
      std::string k = c.name();
      if (g.attrs.has(k)) c.fail("graph attribute '" + k + "' is given twice");
      c.expect('=');
      g.attrs.set(k, c.attr_value());
      if (!c.at_end()) c.fail("trailing text");
      continue;
    }
    std::optional<ValueKind> decl;
    if (c.accept_word("input")) decl = ValueKind::input;
    else if (c.accept_word("state")) decl = ValueKind::state;
    else if (c.accept_word("weight")) decl = ValueKind::weight;
    if (decl) {
      char want = sigil(*decl);
      if (!c.accept(want)) c.fail(std::string("expected '") + want + "' before the name");
      Value v;
      v.name = c.name();
      v.kind = *decl;
      c.expect(':');
      Format f = c.format_and_shape(&v.shape);
      if (*decl == ValueKind::input) v.dtype = f.dtype;
      else v.format = f;
      if (!c.at_end()) c.fail("trailing text");
      if (g.find_value(v.name) != kNone) c.fail("duplicate value '" + v.name + "'");
      g.add_value(std::move(v));
      continue;
    }
    if (!c.accept_word("node")) c.fail("expected input, state, weight, node, attr or end");
    Node n;
    n.name = c.name();
    if (g.find_node(n.name) != kNone) c.fail("duplicate node '" + n.name + "'");
    c.expect('=');
    std::string op = c.name();
    auto kind = parse_op(op);
    if (!kind) c.fail("unknown op '" + op + "'");
    n.kind = *kind;
    c.expect('(');
    if (!c.accept(')')) {
      do {
        c.ws();
        if (c.pos >= line.size() || !std::strchr("%@$", line[c.pos])) c.fail("expected a value reference");
        ++c.pos;
        std::string ref = c.name();
        ValueId v = g.find_value(ref);
        if (v == kNone) c.fail("unknown value '" + ref + "'");
        n.inputs.push_back(v);
      } while (c.accept(','));
      c.expect(')');
    }
    if (c.accept('{')) {
      if (!c.accept('}')) {
        do {
          std::string k = c.name();
          if (n.attrs.has(k)) c.fail("attribute '" + k + "' is given twice");
          c.expect('=');
          n.attrs.set(k, c.attr_value());
        } while (c.accept(','));
        c.expect('}');
      }
    }
    if (c.accept_word("absorbed")) {
      c.expect('(');
      do {
        std::string a = c.name();
        c.expect(':');
        a += ":" + c.name();
        n.absorbed.push_back(a);
      } while (c.accept(','));
      c.expect(')');
    }
    c.ws();
    if (line.substr(c.pos, 2) != "->") c.fail("expected '->' before the outputs");
    c.pos += 2;
    do {
      if (!c.accept('%')) c.fail("expected an output '%name'");
      Value v;
      v.name = c.name();
      v.kind = ValueKind::activation;
      c.expect(':');
      v.dtype = c.format_and_shape(&v.shape).dtype;
      if (c.accept('@')) v.offset = c.integer();
      if (g.find_value(v.name) != kNone) c.fail("duplicate value '" + v.name + "'");
      n.outputs.push_back(g.add_value(std::move(v)));
    } while (c.accept(','));
    if (!c.at_end()) c.fail("trailing text");
    g.add_node(std::move(n));
    if (nl == text.size()) break;
  }
  if (!header) throw Error(std::string(source) + ": empty IR (no 'lathe-ir 1' header)");
  if (!graph_line) throw Error(std::string(source) + ": no 'graph' line");
  if (!ended) throw Error(std::string(source) + ": truncated IR (no 'end' line)");
  return g;
}

std::string graph_to_dot(const Graph& g) {
  auto esc = [](const std::string& s) {
    std::string o;
    for (char c : s) {
      if (c == '"' || c == '\\') o += '\\';
      o += c;
    }
    return o;
  };
  // Output types go in the producing node's label and weights are listed inside
  // their user; inputs and state get one small node per user. Long edges from one
  // shared node make Graphviz's layout slow on 80-layer graphs.
  std::string out = "digraph \"" + esc(g.name) +
                    "\" {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n  edge [fontsize=8];\n";
  for (NodeId id : g.topo_order()) {
    const Node& n = g.node(id);
    // Label lines are escaped one by one and joined with DOT's "\l" (left-aligned break).
    std::string label = esc(n.name + " = " + std::string(op_name(n.kind))) + "\\l";
    for (ValueId v : n.inputs)
      if (g.value(v).kind == ValueKind::weight)
        label += esc("  " + value_ref(g.value(v)) + " " + type_str(g.value(v))) + "\\l";
    for (ValueId v : n.outputs) label += esc("-> " + value_ref(g.value(v)) + ": " + type_str(g.value(v))) + "\\l";
    out += "  n" + std::to_string(id) + " [shape=box, style=rounded, label=\"" + label + "\"];\n";
    for (ValueId v : n.inputs) {
      const Value& val = g.value(v);
      if (val.kind == ValueKind::weight) continue;
      if (val.producer != kNone) {
        out += "  n" + std::to_string(val.producer) + " -> n" + std::to_string(id) + " [label=\"" +
               esc(value_ref(val)) + "\"];\n";
        continue;
      }
      std::string src = "s" + std::to_string(v) + "_" + std::to_string(id);
      out += "  " + src + " [shape=" + (val.kind == ValueKind::state ? "cylinder" : "ellipse") + ", label=\"" +
             esc(value_ref(val) + " " + type_str(val)) + "\"];\n  " + src + " -> n" + std::to_string(id) + ";\n";
    }
  }
  return out + "}\n";
}

}  // namespace lathe
