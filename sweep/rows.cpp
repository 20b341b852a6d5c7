// Sweep rows: CSV / JSONL formatting and parsing, Pareto fronts.
#include <cctype>
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "ir/assert.h"
#include "sweep/sweep.h"

namespace lathe {

double SweepRow::metric(SweepMetric m) const {
  switch (m) {
    case SweepMetric::ttft_ms:
      return ttft_ms;
    case SweepMetric::tpot_ms:
      return tpot_ms;
    case SweepMetric::e2e_ms:
      return e2e_ms;
    case SweepMetric::tokens_per_s:
      return tokens_per_s;
    case SweepMetric::decode_tokens_per_s:
      return decode_tokens_per_s;
    case SweepMetric::prefill_tokens_per_s:
      return prefill_tokens_per_s;
    case SweepMetric::memory_gb:
      return memory_gb;
    case SweepMetric::cost_per_mtok:
      return cost_per_mtok;
  }
  return 0;
}

RowFormat row_format_for(const std::string& path) {
  std::string lower = path;  // rows.JSONL wrote CSV
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (lower.ends_with(".jsonl") || lower.ends_with(".json") || lower.ends_with(".ndjson")) return RowFormat::jsonl;
  return RowFormat::csv;
}

namespace {

// The columns, in order. Each knows how to write and read its field.
enum class Kind { str, i64, u64, dbl, boolean };
struct Column {
  const char* name;
  Kind kind;
  std::string SweepRow::*s = nullptr;
  int64_t SweepRow::*i = nullptr;
  uint64_t SweepRow::*u = nullptr;
  double SweepRow::*d = nullptr;
  bool SweepRow::*b = nullptr;
};
#define S(n)                                                        \
  Column {                                                          \
#n, Kind::str, &SweepRow::n, nullptr, nullptr, nullptr, nullptr \
  }
#define I(n)                                                        \
  Column {                                                          \
#n, Kind::i64, nullptr, &SweepRow::n, nullptr, nullptr, nullptr \
  }
#define U(n)                                                        \
  Column {                                                          \
#n, Kind::u64, nullptr, nullptr, &SweepRow::n, nullptr, nullptr \
  }
#define D(n)                                                        \
  Column {                                                          \
#n, Kind::dbl, nullptr, nullptr, nullptr, &SweepRow::n, nullptr \
  }
#define B(n)                                                            \
  Column {                                                              \
#n, Kind::boolean, nullptr, nullptr, nullptr, nullptr, &SweepRow::n \
  }
const Column kColumns[] = {S(sweep_id),
                           U(point),
                           S(model),
                           S(hardware),
                           I(batch),
                           I(prompt),
                           I(gen),
                           S(weights),
                           S(kv),
                           S(kv_layout),
                           S(fusion),
                           I(tp),
                           S(act),
                           B(feasible),
                           S(violates),
                           D(ttft_ms),
                           D(tpot_ms),
                           D(e2e_ms),
                           D(prefill_ms),
                           D(decode_ms),
                           D(tokens_per_s),
                           D(decode_tokens_per_s),
                           D(prefill_tokens_per_s),
                           S(prefill_bound),
                           S(decode_bound),
                           D(weights_gb),
                           D(kv_gb),
                           D(activations_gb),
                           D(memory_gb),
                           D(capacity_gb),
                           B(fits),
                           I(max_batch),
                           I(devices),
                           D(cost_per_mtok)};
#undef S
#undef I
#undef U
#undef D
#undef B

// %.7g of a finite v with 1e-5 <= |v| < 1e15 (the figures rows hold), or false where
// the digits are not certain. The value is scaled to [1e6, 1e7) by an exact power of
// ten (one rounding: an error below 2e-9 of a unit in the 7th digit); a fraction
// within 1e-6 of one half could round either way and is left to std::to_chars.
bool general7_fast(char* buf, double v, char** end) {
  static constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  double a = std::fabs(v);
  if (!(a >= 1e-5 && a < 1e15)) return false;
  uint64_t bits;
  std::memcpy(&bits, &a, sizeof bits);
  int e2 = int((bits >> 52) & 0x7ff) - 1023;  // a is normal: a = 1.f x 2^e2
  int e10 = (e2 * 78913) >> 18;               // floor(e2 log10 2): log10(a) is in [e10, e10 + 1)
  double scaled = 0;
  for (int tries = 0; tries < 2; ++tries) {
    int k = 6 - e10;
    scaled = k >= 0 ? a * kPow10[k] : a / kPow10[-k];
    if (scaled < 9999999.999999) break;
    ++e10;
  }
  if (scaled < 1e6 || scaled >= 9999999.999999) return false;
  double whole = std::floor(scaled), frac = scaled - whole;
  if (std::fabs(frac - 0.5) < 1e-6) return false;
  auto digits = int64_t(whole) + (frac > 0.5 ? 1 : 0);
  if (digits == 10000000) {
    digits = 1000000;
    ++e10;
  }
  static constexpr char kPairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  char d[7];
  auto rest = uint32_t(digits % 1000000);
  d[0] = char('0' + digits / 1000000);
  std::memcpy(d + 1, kPairs + 2 * (rest / 10000), 2);
  std::memcpy(d + 3, kPairs + 2 * (rest / 100 % 100), 2);
  std::memcpy(d + 5, kPairs + 2 * (rest % 100), 2);
  int last = 6;  // last significant digit
  while (last > 0 && d[last] == '0') --last;
  char* p = buf;
  if (v < 0) *p++ = '-';
  if (e10 >= -4 && e10 < 7) {
    if (e10 < 0) {
      *p++ = '0';
      *p++ = '.';
      for (int i = 0; i < -e10 - 1; ++i) *p++ = '0';
      for (int i = 0; i <= last; ++i) *p++ = d[i];
    } else {
      for (int i = 0; i <= e10; ++i) *p++ = d[i];
      if (last > e10) {
        *p++ = '.';
        for (int i = e10 + 1; i <= last; ++i) *p++ = d[i];
      }
    }
  } else {
    *p++ = d[0];
    if (last > 0) {
      *p++ = '.';
      for (int i = 1; i <= last; ++i) *p++ = d[i];
    }
    *p++ = 'e';
    *p++ = e10 < 0 ? '-' : '+';
    int x = std::abs(e10);
    if (x >= 10)
      *p++ = char('0' + x / 10);
    else
      *p++ = '0';
    *p++ = char('0' + x % 10);
  }
  *end = p;
  return true;
}

// %.7g of v at p (at most 40 bytes; std::to_chars where the fast path declines).
char* write_double(char* p, char* limit, double v) {
  char* end = nullptr;
  if (general7_fast(p, v, &end)) return end;
  return std::to_chars(p, limit, v, std::chars_format::general, 7).ptr;
}

}  // namespace

void append_double(std::string& out, double v) {
  char buf[64];
  out.append(buf, write_double(buf, buf + sizeof buf, v));
}

namespace {

// s as a CSV field at p (quoted when it holds a comma, quote or newline); at most
// 2 size + 2 bytes.
char* write_csv_string(char* p, const std::string& s) {
  if (std::none_of(s.begin(), s.end(), [](char c) { return c == ',' || c == '"' || c == '\n'; })) {
    std::memcpy(p, s.data(), s.size());
    return p + s.size();
  }
  *p++ = '"';
  for (char c : s) {
    if (c == '"') *p++ = '"';
    *p++ = c;
  }
  *p++ = '"';
  return p;
}

// s as a JSON string at p; at most 6 size + 2 bytes.
char* write_json_string(char* p, const std::string& s) {
  *p++ = '"';
  if (std::none_of(s.begin(), s.end(), [](char c) { return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20; })) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  } else {
    static constexpr char kHex[] = "0123456789abcdef";
    for (char c : s) {
      if (c == '"' || c == '\\') {
        *p++ = '\\';
        *p++ = c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        std::memcpy(p, "\\u00", 4);
        p[4] = kHex[(c >> 4) & 15];
        p[5] = kHex[c & 15];
        p += 6;
      } else {
        *p++ = c;
      }
    }
  }
  *p++ = '"';
  return p;
}

// Every number a row holds is a count or a figure >= 0 (sizes, times, rates, bytes,
// cost), finite: a hand-edited "nan", "inf" or "-5" would be ranked as a best plan.
template <typename T>
T checked_number(T v, const std::string& text, const std::string& where, const char* column) {
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v) || v < 0)
      throw Error(where + ": column " + column + ": '" + text + "' is not a finite number >= 0");
  } else if constexpr (std::is_signed_v<T>) {
    if (v < 0) throw Error(where + ": column " + column + ": '" + text + "' is negative");
  }
  return v;
}

template <typename T>
T parse_number(const std::string& text, const std::string& where, const char* column) {
  T v{};
  auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size()) {
    if constexpr (std::is_unsigned_v<T>)  // from_chars reads no sign into an unsigned type
      if (!text.empty() && text[0] == '-') throw Error(where + ": column " + column + ": '" + text + "' is negative");
    throw Error(where + ": column " + column + ": '" + text + "' is not a number");
  }
  return checked_number(v, text, where, column);
}

}  // namespace

std::string row_header(RowFormat f) {
  if (f == RowFormat::jsonl) return "";
  std::string h;
  for (const Column& c : kColumns) h += (h.empty() ? "" : ",") + std::string(c.name);
  return h + "\n";
}

std::string format_row(const SweepRow& r, RowFormat f) {
  std::string out;
  out.reserve(400);
  append_row(out, r, f);
  return out;
}

// Rows are written straight into `out`'s memory: it is grown once to a bound on the
// row's length and cut back to what was written (sweeps write millions of rows).
void append_row(std::string& out, const SweepRow& r, RowFormat f) {
  constexpr size_t kColumnCount = sizeof kColumns / sizeof kColumns[0];
  static const auto keys = [] {  // ,"name":   (JSON; the first without the comma)
    std::array<std::string, kColumnCount> k;
    for (size_t i = 0; i < kColumnCount; ++i) k[i] = std::string(i ? "," : "") + "\"" + kColumns[i].name + "\":";
    return k;
  }();
  const bool json = f == RowFormat::jsonl;
  size_t bound = 4;
  for (size_t i = 0; i < kColumnCount; ++i) {
    const Column& c = kColumns[i];
    bound += (json ? keys[i].size() : 1) + (c.kind == Kind::str ? 6 * (r.*c.s).size() + 2 : 40);
  }
  const size_t at = out.size();
  out.resize(at + bound);
  char* p = out.data() + at;
  char* const limit = p + bound;
  auto put = [&p](const char* s, size_t n) {
    std::memcpy(p, s, n);
    p += n;
  };
  if (json) *p++ = '{';
  for (size_t i = 0; i < kColumnCount; ++i) {
    const Column& c = kColumns[i];
    if (json)
      put(keys[i].data(), keys[i].size());
    else if (i)
      *p++ = ',';
    switch (c.kind) {
      case Kind::str: {
        const std::string& v = r.*c.s;
        if (json)
          p = write_json_string(p, v);
        else
          p = write_csv_string(p, v);
        break;
      }
      case Kind::i64:
        p = std::to_chars(p, limit, r.*c.i).ptr;
        break;
      case Kind::u64:
        p = std::to_chars(p, limit, r.*c.u).ptr;
        break;
      case Kind::dbl:
        p = write_double(p, limit, r.*c.d);
        break;
      case Kind::boolean:
        if (r.*c.b)
          put("true", 4);
        else
          put("false", 5);
        break;
    }
  }
  if (json) *p++ = '}';
  *p++ = '\n';
  LATHE_ASSERT(p <= limit, "sweep row longer than its bound");
  out.resize(size_t(p - out.data()));
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(std::move(cur));
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(std::move(cur));
  return out;
}

SweepRow parse_row(const std::string& line, RowFormat f, const std::vector<std::string>& header,
                   const std::string& where) {
  SweepRow r;
  auto set = [&](const Column& c, const std::string& text) {
    switch (c.kind) {
      case Kind::str:
        r.*c.s = text;
        break;
      case Kind::i64:
        r.*c.i = parse_number<int64_t>(text, where, c.name);
        break;
      case Kind::u64:
        r.*c.u = parse_number<uint64_t>(text, where, c.name);
        break;
      case Kind::dbl:
        r.*c.d = parse_number<double>(text, where, c.name);
        break;
      case Kind::boolean:
        if (text != "true" && text != "false")
          throw Error(where + ": column " + c.name + ": expected true or false");
        r.*c.b = text == "true";
        break;
    }
  };
  if (f == RowFormat::csv) {
    std::vector<std::string> cells = split_csv_line(line);
    if (cells.size() != header.size())
      throw Error(where + ": " + std::to_string(cells.size()) + " fields, the header has " +
                  std::to_string(header.size()));
    for (const Column& c : kColumns) {
      auto it = std::find(header.begin(), header.end(), c.name);
      if (it == header.end())
        throw Error(where + ": the header lacks column " + c.name + " (not a lathe sweep file?)");
      set(c, cells[size_t(it - header.begin())]);
    }
    return r;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": not JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(where + ": expected a JSON object per line");
  for (const Column& c : kColumns) {
    if (!j.contains(c.name))
      throw Error(where + ": missing field " + c.name + " (not a lathe sweep file?)");
    const auto& v = j[c.name];
    // JSON numbers as written: an integer column takes an integer in range (nlohmann
    // would turn 1.5 into 1, -1 into 2^64 - 1 and 1e300 into 0).
    const bool integer_ok = c.kind == Kind::u64 ? v.is_number_unsigned()
                                                : v.is_number_unsigned() || v.is_number_integer();
    if ((c.kind == Kind::i64 || c.kind == Kind::u64) && v.is_number() && !integer_ok)
      throw Error(where + ": field " + c.name + ": " + v.dump() + " is not a whole number >= 0");
    if (c.kind == Kind::i64 && v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
      throw Error(where + ": field " + c.name + ": " + v.dump() + " is out of range");
    try {
      switch (c.kind) {
        case Kind::str:
          r.*c.s = v.get<std::string>();
          break;
        case Kind::i64:
          r.*c.i = checked_number(v.get<int64_t>(), v.dump(), where, c.name);
          break;
        case Kind::u64:
          r.*c.u = v.get<uint64_t>();
          break;
        case Kind::dbl:
          r.*c.d = checked_number(v.get<double>(), v.dump(), where, c.name);
          break;
        case Kind::boolean:
          r.*c.b = v.get<bool>();
          break;
      }
    } catch (const nlohmann::json::exception&) {
      throw Error(where + ": field " + c.name + " has the wrong type");
    }
  }
  return r;
}

// ---- Pareto ----

bool dominates(const SweepRow& a, const SweepRow& b, const std::vector<Objective>& objectives) {
  bool better = false;
  for (const Objective& o : objectives) {
    double x = a.metric(o.metric), y = b.metric(o.metric);
    if (!o.minimize) std::swap(x, y);  // now lower is better
    if (x > y) return false;
    if (x < y) better = true;
  }
  return better;
}

std::vector<SweepRow> pareto_front(const std::vector<SweepRow>& rows,
                                   const std::vector<Objective>& objectives) {
  LATHE_ASSERT(!objectives.empty(), "pareto_front needs an objective");
  // Sort by the objectives lexicographically (each in its better-first direction):
  // a row can only be dominated by rows before it.
  std::vector<const SweepRow*> order;
  order.reserve(rows.size());
  for (const SweepRow& r : rows) order.push_back(&r);
  auto key_less = [&](const SweepRow* a, const SweepRow* b) {
    for (const Objective& o : objectives) {
      double x = a->metric(o.metric), y = b->metric(o.metric);
      if (x != y) return o.minimize ? x < y : x > y;
    }
    return a->point < b->point;
  };
  std::sort(order.begin(), order.end(), key_less);
  std::vector<const SweepRow*> front;
  for (const SweepRow* r : order) {
    bool dominated = false;
    for (const SweepRow* f : front)
      if (dominates(*f, *r, objectives)) {
        dominated = true;
        break;
      }
    if (!dominated) front.push_back(r);
  }
  std::vector<SweepRow> out;
  for (const SweepRow* f : front) out.push_back(*f);
  return out;
}

}  // namespace lathe
