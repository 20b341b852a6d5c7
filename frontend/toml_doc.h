// A parsed TOML document as plain C++ values with source positions, plus a reader
// that turns values into typed fields with located errors. TOML++ is included in
// toml_doc.cpp only, so spec parsers compile fast and stay independent of it.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lathe {

struct TomlValue {
  enum class Kind : uint8_t { table, array, string, integer, floating, boolean, other };
  Kind kind = Kind::table;
  int line = 0, column = 0;
  std::string str;
  int64_t integer = 0;
  double floating = 0;
  bool boolean = false;
  // Table members in source order: keys[i] names values[i]. (Two vectors rather than
  // a vector of pairs: a pair of this still-incomplete type does not compile with clang.)
  std::vector<std::string> keys;
  std::vector<TomlValue> values;
  std::vector<TomlValue> array;

  const TomlValue* get(std::string_view key) const;
  std::string_view kind_name() const;
};

// Parses TOML text. Throws lathe::Error("source:line:col: why") on a syntax error.
TomlValue parse_toml(std::string_view text, std::string_view source);

// Closest candidate within a small edit distance, or "" (for "did you mean").
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// Reads the keys of one table. Every get_* marks its key as known; finish() reports
// the first unknown key (with a did-you-mean). Errors throw lathe::Error formatted as
// "source:line:col: path.key: expected ..., got ...".
class TableReader {
 public:
  TableReader(const TomlValue& table, std::string path, std::string source);

  bool has(std::string_view key) const { return t_.get(key) != nullptr; }
  std::optional<int64_t> get_int(std::string_view key, int64_t min, int64_t max);
  int64_t require_int(std::string_view key, int64_t min, int64_t max);
  // `zero_ok`: 0 is also accepted (a field whose 0 means "not set").
  std::optional<double> get_double(std::string_view key, double min, double max, bool zero_ok = false);
  std::optional<std::string> get_string(std::string_view key);
  std::string require_string(std::string_view key);
  std::optional<bool> get_bool(std::string_view key);
  // A sub-table; nullptr when absent. Marks the key known.
  const TomlValue* get_table(std::string_view key);
  // Marks a key as known without reading it.
  void allow(std::string_view key) { known_.insert(std::string(key)); }
  void finish() const;

  [[noreturn]] void fail_at(const TomlValue& v, std::string_view key, const std::string& why) const;
  [[noreturn]] void fail_table(const std::string& why) const;
  [[noreturn]] void fail_missing(std::string_view key, std::string_view what) const;
  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }

 private:
  const TomlValue* lookup(std::string_view key, TomlValue::Kind want, std::string_view want_name);
  const TomlValue& t_;
  std::string path_, source_;
  std::set<std::string> known_;
};

}  // namespace lathe
