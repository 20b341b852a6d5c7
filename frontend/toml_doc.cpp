#include "frontend/toml_doc.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <toml++/toml.h>

#include "ir/assert.h"

namespace lathe {

const TomlValue* TomlValue::get(std::string_view key) const {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == key) return &values[i];
  return nullptr;
}

std::string_view TomlValue::kind_name() const {
  switch (kind) {
    case Kind::table: return "a table";
    case Kind::array: return "an array";
    case Kind::string: return "a string";
    case Kind::integer: return "an integer";
    case Kind::floating: return "a float";
    case Kind::boolean: return "a boolean";
    case Kind::other: return "a date/time";
  }
  return "?";
}

namespace {

constexpr int kMaxTomlDepth = 64;

TomlValue convert(const toml::node& n, int depth, std::string_view source) {
  if (depth > kMaxTomlDepth) throw Error("TOML nesting deeper than " + std::to_string(kMaxTomlDepth) + " levels");
  TomlValue v;
  v.line = int(n.source().begin.line);
  v.column = int(n.source().begin.column);
  if (auto t = n.as_table()) {
    v.kind = TomlValue::Kind::table;
    std::vector<std::pair<std::string, TomlValue>> members;
    for (auto&& [k, child] : *t) members.emplace_back(std::string(k.str()), convert(child, depth + 1, source));
    // toml++ keeps keys sorted; restore source order for messages and iteration.
    std::stable_sort(members.begin(), members.end(), [](const auto& a, const auto& b) {
      return std::pair(a.second.line, a.second.column) < std::pair(b.second.line, b.second.column);
    });
    for (auto& [k, child] : members) {
      v.keys.push_back(std::move(k));
      v.values.push_back(std::move(child));
    }
  } else if (auto a = n.as_array()) {
    v.kind = TomlValue::Kind::array;
    for (auto&& child : *a) v.array.push_back(convert(child, depth + 1, source));
  } else if (auto s = n.as_string()) {
    v.kind = TomlValue::Kind::string;
    v.str = s->get();
    // Spec strings are names, descriptions, paths: a control character (an escape
    // sequence written as \u001b) would reach the terminal in every table that shows it.
    for (unsigned char c : v.str)
      if (c < 0x20 && c != '\t' && c != '\n') {
        char hex[8];
        std::snprintf(hex, sizeof hex, "%02x", c);
        throw Error(std::string(source) + ":" + std::to_string(v.line) + ":" + std::to_string(v.column) +
                    ": a string holds the control character \\x" + hex);
      }
  } else if (auto i = n.as_integer()) {
    v.kind = TomlValue::Kind::integer;
    v.integer = i->get();
  } else if (auto f = n.as_floating_point()) {
    v.kind = TomlValue::Kind::floating;
    v.floating = f->get();
  } else if (auto b = n.as_boolean()) {
    v.kind = TomlValue::Kind::boolean;
    v.boolean = b->get();
  } else {
    v.kind = TomlValue::Kind::other;
  }
  return v;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string number_str(const TomlValue& v) {
  switch (v.kind) {
    case TomlValue::Kind::integer: return std::to_string(v.integer);
    case TomlValue::Kind::floating: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", v.floating);
      return buf;
    }
    case TomlValue::Kind::string: return "\"" + v.str + "\"";
    case TomlValue::Kind::boolean: return v.boolean ? "true" : "false";
    default: return std::string(v.kind_name());
  }
}

bool bare_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// toml++ builds a dotted key's tables recursively: a key of ~40,000 components
// (`a.a.a...`, 80 KB) overflowed the stack inside toml::parse, before convert() could
// refuse the depth. So dotted chains are counted first, outside strings and comments:
// a chain is bare or quoted components joined by dots (whitespace allowed around
// them); anything else ends it (a float's one dot, `1.5, 2.5` in an array, stays 1).
void check_key_chains(std::string_view text, std::string_view source) {
  int line = 1, col = 1, dots = 0;
  auto fail = [&] {
    throw Error(std::string(source) + ":" + std::to_string(line) + ":" + std::to_string(col) +
                ": TOML key nested deeper than " + std::to_string(kMaxTomlDepth) + " levels");
  };
  for (size_t i = 0; i < text.size(); ++i, ++col) {
    const char c = text[i];
    if (c == '\n') {
      ++line, col = 0, dots = 0;
    } else if (c == '#') {  // a comment, to the end of the line
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i, ++col;
      dots = 0;
    } else if (c == '"' || c == '\'') {
      // Skip the string; `at` and `at_col` are the index and column of the character
      // looked at, and i / col end on the string's last character.
      const bool multi = text.substr(i, 3) == std::string(3, c);
      const size_t open = multi ? 3 : 1;
      size_t at = i + open;
      int at_col = col + int(open);
      bool closed = false;
      while (at < text.size()) {
        if (text[at] == '\n') {
          if (!multi) break;  // an unterminated string: toml++ reports it
          ++line, ++at, at_col = 1;
        } else if (c == '"' && text[at] == '\\' && at + 1 < text.size() && text[at + 1] != '\n') {
          at += 2, at_col += 2;  // an escaped character in a basic string
        } else if (text.substr(at, open) == std::string(open, c)) {
          closed = true;
          break;
        } else {
          ++at, ++at_col;
        }
      }
      if (closed) {
        i = at + open - 1, col = at_col + int(open) - 1;
      } else {
        i = at - 1, col = at_col - 1;  // before the newline (or the end), which the loop takes
      }
      if (multi) dots = 0;  // a value, not a key component
    } else if (c == '.') {
      if (++dots >= kMaxTomlDepth) fail();
    } else if (!bare_key_char(c) && c != ' ' && c != '\t') {
      dots = 0;
    }
  }
}

}  // namespace

TomlValue parse_toml(std::string_view text, std::string_view source) {
  check_key_chains(text, source);
  try {
    toml::table t = toml::parse(text, source);
    TomlValue root = convert(t, 0, source);
    root.line = 1;
    root.column = 1;
    return root;
  } catch (const toml::parse_error& e) {
    throw Error(std::string(source) + ":" + std::to_string(e.source().begin.line) + ":" +
                std::to_string(e.source().begin.column) + ": TOML syntax error: " +
                std::string(e.description()));
  }
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

TableReader::TableReader(const TomlValue& table, std::string path, std::string source)
    : t_(table), path_(std::move(path)), source_(std::move(source)) {}

void TableReader::fail_at(const TomlValue& v, std::string_view key, const std::string& why) const {
  std::string full = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  throw Error(source_ + ":" + std::to_string(v.line) + ":" + std::to_string(v.column) + ": " + full + ": " + why);
}

void TableReader::fail_table(const std::string& why) const {
  throw Error(source_ + ":" + std::to_string(t_.line) + ":" + std::to_string(t_.column) + ": " +
              (path_.empty() ? std::string("(top level)") : "[" + path_ + "]") + ": " + why);
}

const TomlValue* TableReader::lookup(std::string_view key, TomlValue::Kind want, std::string_view want_name) {
  known_.insert(std::string(key));
  const TomlValue* v = t_.get(key);
  if (!v) return nullptr;
  bool ok = v->kind == want || (want == TomlValue::Kind::floating && v->kind == TomlValue::Kind::integer);
  if (!ok) fail_at(*v, key, "expected " + std::string(want_name) + ", got " + std::string(v->kind_name()) +
                                (v->kind == TomlValue::Kind::table || v->kind == TomlValue::Kind::array
                                     ? ""
                                     : " (" + number_str(*v) + ")"));
  return v;
}

std::optional<int64_t> TableReader::get_int(std::string_view key, int64_t min, int64_t max) {
  const TomlValue* v = lookup(key, TomlValue::Kind::integer, "an integer");
  if (!v) return std::nullopt;
  if (v->integer < min || v->integer > max)
    fail_at(*v, key, "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                         "], got " + std::to_string(v->integer));
  return v->integer;
}

void TableReader::fail_missing(std::string_view key, std::string_view what) const {
  // A misspelt key is the likeliest cause: point at it.
  std::vector<std::string> present;
  for (const std::string& k : t_.keys)
    if (!known_.count(k)) present.push_back(k);
  std::string near = closest_match(key, present);
  if (!near.empty())
    fail_at(*t_.get(near), near, "unknown key (did you mean '" + std::string(key) + "'?); '" + std::string(key) +
                                     "' (" + std::string(what) + ") is required");
  fail_table("missing required key '" + std::string(key) + "' (" + std::string(what) + ")");
}

int64_t TableReader::require_int(std::string_view key, int64_t min, int64_t max) {
  auto v = get_int(key, min, max);
  if (!v) fail_missing(key, "an integer");
  return *v;
}

std::optional<double> TableReader::get_double(std::string_view key, double min, double max, bool zero_ok) {
  const TomlValue* v = lookup(key, TomlValue::Kind::floating, "a number");
  if (!v) return std::nullopt;
  double d = v->kind == TomlValue::Kind::integer ? double(v->integer) : v->floating;
  if (!std::isfinite(d) || ((d < min || d > max) && !(zero_ok && d == 0))) {
    char buf[128];
    if (min == max) std::snprintf(buf, sizeof buf, "expected %s%g, got %g", zero_ok ? "0 or " : "", min, d);
    else std::snprintf(buf, sizeof buf, "expected %sa number in [%g, %g], got %g", zero_ok ? "0 or " : "", min, max, d);
    fail_at(*v, key, buf);
  }
  return d;
}

std::optional<std::string> TableReader::get_string(std::string_view key) {
  const TomlValue* v = lookup(key, TomlValue::Kind::string, "a string");
  if (!v) return std::nullopt;
  return v->str;
}

std::string TableReader::require_string(std::string_view key) {
  auto v = get_string(key);
  if (!v) fail_missing(key, "a string");
  return *v;
}

std::optional<bool> TableReader::get_bool(std::string_view key) {
  const TomlValue* v = lookup(key, TomlValue::Kind::boolean, "a boolean");
  if (!v) return std::nullopt;
  return v->boolean;
}

const TomlValue* TableReader::get_table(std::string_view key) {
  return lookup(key, TomlValue::Kind::table, "a table");
}

void TableReader::finish() const {
  std::vector<std::string> known(known_.begin(), known_.end());
  for (size_t i = 0; i < t_.keys.size(); ++i) {
    const std::string& k = t_.keys[i];
    const TomlValue& v = t_.values[i];
    if (known_.count(k)) continue;
    std::string hint = closest_match(k, known);
    std::string msg = "unknown key";
    if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
    else {
      msg += "; valid keys: ";
      for (size_t i = 0; i < known.size(); ++i) msg += (i ? ", " : "") + known[i];
    }
    fail_at(v, k, msg);
  }
}

}  // namespace lathe
