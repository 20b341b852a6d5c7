#include "simulator/requests.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "ir/assert.h"
#include "simulator/random.h"

namespace lathe {

namespace {

constexpr double kMaxArrivalSeconds = 1e9;  // as --duration

int64_t draw_tokens(Random& rng, const Distribution& d, const char* what) {
  double v = rng.sample(d, true);
  if (!(v <= double(kMaxRequestTokens)))
    throw Error(std::string(what) + " length " + distribution_name(d) + " drew " + std::to_string(v) +
                " tokens, more than the " + std::to_string(kMaxRequestTokens) + " a request may have");
  return int64_t(v);
}

}  // namespace

std::vector<Request> generate_requests(const ArrivalOptions& a) {
  if (!(a.rate_per_s > 0)) throw Error("arrival rate must be positive");
  if (a.requests <= 0 && !(a.duration_s > 0))
    throw Error("give a positive duration or a request count");
  if (a.priority_mix.empty()) throw Error("priority mix must not be empty");
  const int64_t cap = int64_t(1) << 26;
  auto too_many = [&] {
    return Error("rate x duration is about " + std::to_string(int64_t(a.rate_per_s * a.duration_s)) +
                 " requests, more than one run simulates (" + std::to_string(cap) +
                 "); lower --rate or --duration, or give --requests");
  };
  // A Poisson count has standard deviation sqrt(mean): a mean within six of them of the
  // cap is refused here, before generating (and holding) gigabytes of requests that a
  // draw above the cap would then throw away.
  const double mean = a.rate_per_s * a.duration_s;
  if (a.requests <= 0 && mean + 6 * std::sqrt(mean) > double(cap)) throw too_many();
  if (a.requests > cap) throw Error("at most " + std::to_string(cap) + " requests per run");
  Random rng(a.seed);
  std::vector<Request> out;
  double t = 0;
  while (true) {
    t += rng.exponential(a.rate_per_s);
    if (a.requests > 0 ? int64_t(out.size()) >= a.requests : t >= a.duration_s) break;
    if (int64_t(out.size()) >= cap) throw too_many();  // a Poisson draw above the mean
    Request r;
    r.arrival_s = t;
    r.prompt = draw_tokens(rng, a.prompt, "prompt");
    r.output = draw_tokens(rng, a.output, "output");
    r.priority = int(rng.pick(a.priority_mix));
    out.push_back(r);
  }
  return out;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t c = line.find(',', start);
    out.push_back(
        trim(line.substr(start, c == std::string_view::npos ? std::string_view::npos : c - start)));
    if (c == std::string_view::npos) break;
    start = c + 1;
  }
  return out;
}

}  // namespace

std::vector<Request> parse_trace_csv(std::string_view text, const std::string& source) {
  static const char* kColumns[] = {"arrival_s", "prompt_tokens", "output_tokens", "priority"};
  std::vector<Request> out;
  int line_no = 0;
  bool first_data = true;
  // A UTF-8 byte order mark (spreadsheet exports) is not part of the header: it showed
  // as an invisible character in "got 'arrival_s'".
  size_t pos = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line =
        trim(text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    std::vector<std::string_view> f = split(line);
    auto fail = [&](const std::string& why) -> void {
      throw Error(source + ":" + std::to_string(line_no) + ": " + why);
    };
    if (first_data) {
      first_data = false;
      if (f[0] == kColumns[0]) {  // header: check the column names
        if (f.size() < 3 || f.size() > 4)
          fail("header must be arrival_s,prompt_tokens,output_tokens[,priority]");
        for (size_t i = 0; i < f.size(); ++i)
          if (f[i] != kColumns[i])
            fail("column " + std::to_string(i + 1) + " must be '" + kColumns[i] + "', got '" +
                 std::string(f[i]) + "'");
        continue;
      }
    }
    if (f.size() < 3 || f.size() > 4)
      fail(
          "expected 3 or 4 comma-separated values "
          "(arrival_s,prompt_tokens,output_tokens[,priority]), got " +
          std::to_string(f.size()));
    Request r;
    auto number = [&](size_t i, double lo) {
      double v = 0;
      auto [p, ec] = std::from_chars(f[i].data(), f[i].data() + f[i].size(), v);
      if (ec != std::errc() || p != f[i].data() + f[i].size() || !std::isfinite(v) || v < lo)
        fail(std::string(kColumns[i]) + ": expected a number >= " + std::to_string(int64_t(lo)) +
             ", got '" + std::string(f[i]) + "'");
      return v;
    };
    auto integer = [&](size_t i, int64_t lo, int64_t hi) {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(f[i].data(), f[i].data() + f[i].size(), v);
      if (ec != std::errc() || p != f[i].data() + f[i].size() || v < lo || v > hi)
        fail(std::string(kColumns[i]) + ": expected an integer in [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "], got '" + std::string(f[i]) + "'");
      return v;
    };
    r.arrival_s = number(0, 0);
    // The bound --duration has: beyond it, steps of milliseconds vanish in the arrival
    // times' rounding (1e300 gave 0 ms latencies and 1e12 requests/s).
    if (r.arrival_s > kMaxArrivalSeconds)
      fail("arrival_s: expected at most 1e9 seconds (about 32 years), got '" + std::string(f[0]) + "'");
    r.prompt = integer(1, 1, kMaxRequestTokens);
    r.output = integer(2, 1, kMaxRequestTokens);
    r.priority = f.size() == 4 ? int(integer(3, 0, 1000)) : 0;
    r.line = line_no;
    if (out.size() == size_t(1) << 26) fail("more than 67108864 requests, more than one run simulates");
    out.push_back(r);
  }
  if (out.empty()) throw Error(source + ": the trace has no requests");
  std::stable_sort(out.begin(), out.end(),
                   [](const Request& a, const Request& b) { return a.arrival_s < b.arrival_s; });
  return out;
}

}  // namespace lathe
