#include "ir/scenario.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace lathe {

namespace {

bool parse_number(std::string_view s, double& out) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(out);
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);  // 1234567 as written, not 1.23457e+06
  return buf;
}

}  // namespace

double Distribution::mean() const {
  switch (kind) {
    case Kind::fixed:
      return a;
    case Kind::uniform:
      return 0.5 * (a + b);
    case Kind::lognormal:
      return a * std::exp(0.5 * b * b);
  }
  return a;
}

double Distribution::min() const {
  switch (kind) {
    case Kind::fixed:
      return a;
    case Kind::uniform:
      return a;
    case Kind::lognormal:
      return 0;
  }
  return 0;
}

namespace {
std::optional<Distribution> parse_unbounded(std::string_view s, std::string* why) {
  auto fail = [&](const std::string& msg) -> std::optional<Distribution> {
    if (why)
      *why = msg + " (expected fixed:V, uniform:LO,HI or lognormal:MEDIAN,SIGMA; got '" +
             std::string(s) + "')";
    return std::nullopt;
  };
  size_t colon = s.find(':');
  if (colon == std::string_view::npos) {
    double v = 0;  // a bare number is a fixed value
    if (parse_number(s, v) && v > 0) return Distribution{Distribution::Kind::fixed, v, 0};
    return fail("not a distribution");
  }
  std::string_view kind = s.substr(0, colon), args = s.substr(colon + 1);
  if (kind != "fixed" && kind != "uniform" && kind != "lognormal")
    return fail("unknown distribution '" + std::string(kind) + "'");
  size_t comma = args.find(',');
  double x = 0, y = 0;
  if (kind == "fixed") {
    if (comma != std::string_view::npos || !parse_number(args, x) || x <= 0)
      return fail("fixed needs one positive value");
    return Distribution{Distribution::Kind::fixed, x, 0};
  }
  if (comma == std::string_view::npos || !parse_number(args.substr(0, comma), x) ||
      !parse_number(args.substr(comma + 1), y))
    return fail(std::string(kind) + " needs two numbers");
  if (kind == "uniform") {
    if (x <= 0 || y < x) return fail("uniform needs 0 < LO <= HI");
    return Distribution{Distribution::Kind::uniform, x, y};
  }
  if (kind == "lognormal") {
    if (x <= 0 || y < 0 || y > 5) return fail("lognormal needs MEDIAN > 0 and 0 <= SIGMA <= 5");
    return Distribution{Distribution::Kind::lognormal, x, y};
  }
  return fail("unknown distribution '" + std::string(kind) + "'");
}
}  // namespace

std::optional<Distribution> parse_distribution(std::string_view s, std::string* why, double hi) {
  std::optional<Distribution> d = parse_unbounded(s, why);
  if (d && hi > 0 && (d->a > hi || (d->kind == Distribution::Kind::uniform && d->b > hi))) {
    if (why) *why = "values above " + num(hi) + " (got '" + std::string(s) + "')";
    return std::nullopt;
  }
  return d;
}

std::optional<Distribution> parse_token_distribution(std::string_view s, std::string* why) {
  std::optional<Distribution> d = parse_distribution(s, why, double(kMaxRequestTokens));
  if (!d || d->kind == Distribution::Kind::lognormal) return d;
  for (double v : {d->a, d->kind == Distribution::Kind::uniform ? d->b : d->a})
    if (v < 1 || v != std::floor(v)) {
      if (why) *why = "token counts are whole numbers of at least 1 (got '" + std::string(s) + "')";
      return std::nullopt;
    }
  return d;
}

std::string distribution_name(const Distribution& d) {
  switch (d.kind) {
    case Distribution::Kind::fixed:
      return "fixed:" + num(d.a);
    case Distribution::Kind::uniform:
      return "uniform:" + num(d.a) + "," + num(d.b);
    case Distribution::Kind::lognormal:
      return "lognormal:" + num(d.a) + "," + num(d.b);
  }
  return "?";
}

std::string_view batching_name(BatchingKind k) {
  switch (k) {
    case BatchingKind::static_batch:
      return "static";
    case BatchingKind::dynamic_batch:
      return "dynamic";
    case BatchingKind::continuous:
      return "continuous";
    case BatchingKind::chunked:
      return "chunked";
  }
  return "?";
}

std::optional<BatchingKind> parse_batching(std::string_view s) {
  for (BatchingKind k : {BatchingKind::static_batch, BatchingKind::dynamic_batch,
                         BatchingKind::continuous, BatchingKind::chunked})
    if (batching_name(k) == s) return k;
  return std::nullopt;
}

std::string_view router_name(RouterKind k) {
  return k == RouterKind::round_robin ? "round-robin" : "least-loaded";
}

std::optional<RouterKind> parse_router(std::string_view s) {
  if (s == "round-robin") return RouterKind::round_robin;
  if (s == "least-loaded") return RouterKind::least_loaded;
  return std::nullopt;
}

std::string_view rag_mode_name(RagMode m) {
  switch (m) {
    case RagMode::sequential:
      return "sequential";
    case RagMode::overlapped:
      return "overlapped";
    case RagMode::prefetch:
      return "prefetch";
    case RagMode::timeout:
      return "timeout";
  }
  return "?";
}

std::optional<RagMode> parse_rag_mode(std::string_view s) {
  for (RagMode m : {RagMode::sequential, RagMode::overlapped, RagMode::prefetch, RagMode::timeout})
    if (rag_mode_name(m) == s) return m;
  return std::nullopt;
}

std::string_view expert_load_name(ExpertLoadKind k) {
  switch (k) {
    case ExpertLoadKind::uniform:
      return "uniform";
    case ExpertLoadKind::zipf:
      return "zipf";
    case ExpertLoadKind::histogram:
      return "histogram";
  }
  return "?";
}

std::string_view placement_name(PlacementKind k) {
  switch (k) {
    case PlacementKind::round_robin:
      return "round-robin";
    case PlacementKind::balanced:
      return "balanced";
    case PlacementKind::replicated:
      return "replicated";
  }
  return "?";
}

}  // namespace lathe
