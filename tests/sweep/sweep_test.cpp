#include "sweep/sweep.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "frontend/builder.h"
#include "frontend/specs.h"
#include "ir/assert.h"
#include "passes/pipeline.h"

namespace lathe {
namespace {

SweepSpec spec_of(const std::string& body) {
  return parse_sweep_toml("[sweep]\n" + body, "t.toml");
}

// A small but varied space: two hardware targets with a what-if, three weight formats
// (fp8 only on the H100), two KV dtypes, two fusion sets, two TP degrees and workload
// axes; constraints that some plans fail.
const char* kSpace =
    "models = [\"llama-3-8b\"]\n"
    "hardware = [\"a100-80g\", \"h100-sxm\"]\n"
    "batch = [1, 8, 64, 256]\n"
    "prompt = [128, 2048]\n"
    "gen = [2, 64]\n"
    "weights = [\"auto\", \"int4:g128\", \"fp8\"]\n"
    "kv = [\"auto\", \"int8\"]\n"
    "fusion = [\"all\", \"none\"]\n"
    "tp = [1, 2]\n"
    "objectives = [\"min tpot_ms\", \"max tokens_per_s\", \"min cost_per_mtok\"]\n"
    "[sweep.whatif]\nhbm_bandwidth_gbs = [\"x1\", \"x1.5\"]\n"
    "[sweep.constraints]\nttft_ms = 3000\ntpot_ms = 40\n";

SweepSummary run(const SweepSpace& s, SweepOptions o = {}) {
  o.keep_rows = true;
  if (o.threads == 0) o.threads = 2;
  return run_sweep(s, o);
}

// A second space for the shared fronts: a dense and an MoE model, KV layouts, formats.
const char* kFrontSpace =
    "models = [\"tiny\", \"tiny-moe\"]\n"
    "hardware = [\"a100-80g\"]\n"
    "batch = [1, 4]\n"
    "prompt = [64]\n"
    "gen = [8]\n"
    "weights = [\"auto\", \"int8\", \"int4:g32\"]\n"
    "kv = [\"auto\", \"int8\"]\n"
    "kv_layout = [\"auto\", \"paged:16\", \"TLHD\"]\n"
    "act = [\"auto\", \"f32\"]\n";

// The figures of a sweep row equal simulate() of a plan built and lowered for that
// point alone (as `lathe simulate` does): one point of every plan shape (the sweep
// lowers the structural passes once for all formats of a model and finishes a copy
// per shape), and a spread of other points.
void expect_rows_equal_simulate(const char* space, size_t min_shapes) {
  SweepSpace s = expand_sweep(spec_of(space));
  SweepSummary sum = run(s);
  ASSERT_GT(sum.rows.size(), 20u);
  std::vector<const SweepRow*> picked;
  std::set<std::string> shapes;
  for (const SweepRow& row : sum.rows)
    if (shapes.insert(row.model + "/" + row.hardware + "/" + row.weights + "/" + row.kv + "/" + row.kv_layout + "/" +
                      row.act + "/" + row.fusion + "/" + std::to_string(row.tp))
            .second)
      picked.push_back(&row);
  EXPECT_GE(picked.size(), min_shapes);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 8; ++i) picked.push_back(&sum.rows[rng() % sum.rows.size()]);
  for (const SweepRow* rp : picked) {
    const SweepRow& row = *rp;
    PointPlan pp = point_plan(s, row.point);
    ModelSpec m = load_model(pp.model);
    Target t = load_target_spec(pp.hardware);
    LowerHooks h;
    h.record = false;
    Lowered l = lower(build_graph(m, build_options(m, t, pp.options, pp.workload, Phase::prefill)),
                      build_graph(m, build_options(m, t, pp.options, pp.workload, Phase::decode)),
                      pp.options, t, pp.workload, h);
    SimOptions so;
    so.per_op = false;
    SimResult r = simulate(l.prefill, l.decode, t, pp.workload, so);
    std::string where = "point " + std::to_string(row.point);
    EXPECT_EQ(row.ttft_ms, r.ttft_s * 1e3) << where;
    EXPECT_EQ(row.tpot_ms, r.tpot_s * 1e3) << where;
    EXPECT_EQ(row.e2e_ms, r.e2e_s * 1e3) << where;
    EXPECT_EQ(row.tokens_per_s, r.tokens_per_s) << where;
    EXPECT_EQ(row.weights_gb, r.mem.weights / 1e9) << where;
    EXPECT_EQ(row.kv_gb, r.mem.kv / 1e9) << where;
    // Activations: the sweep's peak of live values at the point (what an ideal planner
    // needs) vs the memory plan's arena planned for this point, which is never below
    // it (best fit leaves gaps on some plans; docs/sweeps.md).
    double arena_gb = r.mem.activations / 1e9;
    EXPECT_LE(row.activations_gb, arena_gb * (1 + 1e-12)) << where;
    EXPECT_GT(row.activations_gb, 0) << where;
    if (row.fits != r.mem.fits) {
      EXPECT_LT(std::fabs(r.mem.total - r.mem.capacity) / 1e9, arena_gb - row.activations_gb)
          << where;
    }
    EXPECT_EQ(row.batch, pp.workload.batch);
    EXPECT_EQ(row.kv_layout, l.decode.attrs.s("kv_layout"));
    EXPECT_EQ(row.act, l.decode.attrs.s("act_dtype"));
  }
}

TEST(Sweep, RowsEqualSimulateOfThePoint) { expect_rows_equal_simulate(kSpace, 20); }

// Every shape of two models x formats x layouts x activations, lowered from shared
// fronts, against its own lowering.
TEST(Sweep, RowsFromSharedFrontsEqualSimulateOfThePoint) { expect_rows_equal_simulate(kFrontSpace, 30); }

TEST(Sweep, SkipsPointsThatCannotBePlannedAndSaysWhy) {
  SweepSpace s = expand_sweep(spec_of(kSpace));
  SweepSummary sum = run(s);
  int64_t skipped = 0;
  for (const auto& [why, n] : sum.skipped) skipped += n;
  EXPECT_EQ(sum.evaluated + skipped, int64_t(s.size));
  // fp8 weights on the A100 (both what-if variants): a quarter of the A100 half.
  bool fp8 = false;
  for (const auto& [why, n] : sum.skipped)
    fp8 |= why.find("weights fp8 not supported on a100-80g") != std::string::npos;
  EXPECT_TRUE(fp8);
  for (const SweepRow& r : sum.rows)
    EXPECT_FALSE(r.hardware.starts_with("a100-80g") && r.weights == "fp8");
}

// Constraints: a row is feasible exactly when it meets them; the violation counts add up.
TEST(Sweep, ConstraintsMarkRowsAndAreCounted) {
  SweepSpace s = expand_sweep(spec_of(kSpace));
  SweepSummary sum = run(s);
  int64_t feasible = 0, fits = 0, ttft = 0, tpot = 0;
  for (const SweepRow& r : sum.rows) {
    bool ok = r.fits && r.ttft_ms <= 3000 && r.tpot_ms <= 40;
    EXPECT_EQ(r.feasible, ok) << r.point;
    feasible += ok;
    fits += !r.fits;
    ttft += r.ttft_ms > 3000;
    tpot += r.tpot_ms > 40;
  }
  EXPECT_EQ(sum.feasible, feasible);
  ASSERT_EQ(sum.violations.size(), 3u);
  EXPECT_EQ(sum.violations[0].second, fits);
  EXPECT_EQ(sum.violations[1].second, ttft);
  EXPECT_EQ(sum.violations[2].second, tpot);
  EXPECT_GT(fits, 0);
  EXPECT_GT(feasible, 0);
}

// The Pareto front: no front row is dominated by any feasible row, and every feasible
// row off the front is dominated by a front row.
TEST(Sweep, ParetoFrontHasNoDominatedPointAndCoversTheRest) {
  SweepSpace s = expand_sweep(spec_of(kSpace));
  SweepSummary sum = run(s);
  const auto& obj = s.spec.objectives;
  std::vector<SweepRow> feasible;
  for (const SweepRow& r : sum.rows)
    if (r.feasible) feasible.push_back(r);
  ASSERT_FALSE(sum.front.empty());
  std::set<uint64_t> on_front;
  for (const SweepRow& f : sum.front) {
    on_front.insert(f.point);
    EXPECT_TRUE(f.feasible);
    for (const SweepRow& r : feasible)
      EXPECT_FALSE(dominates(r, f, obj)) << r.point << " dominates " << f.point;
  }
  for (const SweepRow& r : feasible) {
    if (on_front.count(r.point)) continue;
    bool covered = false;
    for (const SweepRow& f : sum.front) covered |= dominates(f, r, obj);
    EXPECT_TRUE(covered) << "point " << r.point << " is neither on the front nor dominated";
  }
  // The best plan of each objective is on the front and is the extreme feasible value.
  for (size_t i = 0; i < obj.size(); ++i) {
    ASSERT_TRUE(sum.best[i].has_value());
    for (const SweepRow& r : feasible) {
      double v = r.metric(obj[i].metric), b = sum.best[i]->metric(obj[i].metric);
      EXPECT_TRUE(obj[i].minimize ? b <= v : b >= v);
    }
  }
  // The front computed again from all rows (as lathe merge does) is the same.
  SweepSummary again = summarize_rows(s.spec, sum.rows);
  ASSERT_EQ(again.front.size(), sum.front.size());
  for (size_t i = 0; i < sum.front.size(); ++i) EXPECT_EQ(again.front[i].point, sum.front[i].point);
}

std::string text_of(const std::vector<SweepRow>& rows, RowFormat f) {
  std::string s = row_header(f);
  for (const SweepRow& r : rows) s += format_row(r, f);
  return s;
}

// The shards of a sweep, joined in point order, are the full sweep row for row, and
// the output does not depend on the thread count.
TEST(Sweep, ShardUnionIsTheFullSweep) {
  for (int64_t samples : {int64_t(0), int64_t(300)}) {
    SweepSpace s = expand_sweep(spec_of(kSpace), samples, 5);
    SweepOptions o;
    o.samples = samples;
    o.seed = 5;
    o.threads = 1;
    std::vector<SweepRow> full = run(s, o).rows;
    std::vector<SweepRow> joined;
    const int shards = 3;
    for (int i = 0; i < shards; ++i) {
      SweepOptions so = o;
      so.shard = i;
      so.shards = shards;
      so.threads = 2;
      so.block = 7;
      std::vector<SweepRow> part = run(s, so).rows;
      for (const SweepRow& r : part) EXPECT_EQ(r.sweep_id, s.id);
      joined.insert(joined.end(), part.begin(), part.end());
    }
    std::sort(joined.begin(), joined.end(),
              [](const SweepRow& a, const SweepRow& b) { return a.point < b.point; });
    ASSERT_EQ(joined.size(), full.size()) << "samples " << samples;
    EXPECT_EQ(text_of(joined, RowFormat::csv), text_of(full, RowFormat::csv));
    if (samples > 0) {
      std::set<uint64_t> points;
      for (const SweepRow& r : full) points.insert(r.point);
      EXPECT_EQ(points.size(), full.size());
      EXPECT_LE(full.size(), size_t(samples));
    }
  }
}

// Rows read back (CSV and JSONL) format to the same text; merging is independent of
// the order of the rows.
TEST(Sweep, RowsRoundTripAndMergeIsOrderIndependent) {
  SweepSpace s = expand_sweep(spec_of(kSpace), 200, 3);
  SweepOptions o;
  o.samples = 200;
  o.seed = 3;
  std::vector<SweepRow> rows = run(s, o).rows;
  std::vector<std::string> header =
      split_csv_line(row_header(RowFormat::csv).substr(0, row_header(RowFormat::csv).size() - 1));
  for (RowFormat f : {RowFormat::csv, RowFormat::jsonl})
    for (const SweepRow& r : rows) {
      std::string line = format_row(r, f);
      SweepRow back = parse_row(line.substr(0, line.size() - 1), f, header, "here");
      EXPECT_EQ(format_row(back, f), line);
    }
  SweepSummary a = summarize_rows(s.spec, rows);
  std::mt19937_64 rng(11);
  std::shuffle(rows.begin(), rows.end(), rng);
  SweepSummary b = summarize_rows(s.spec, rows);
  ASSERT_EQ(a.front.size(), b.front.size());
  for (size_t i = 0; i < a.front.size(); ++i) EXPECT_EQ(a.front[i].point, b.front[i].point);
  for (size_t i = 0; i < a.best.size(); ++i) EXPECT_EQ(a.best[i]->point, b.best[i]->point);
}

// Strings that need quoting or escaping: the CSV fields split back and the JSONL line
// is read by an independent JSON parser (nlohmann) to the same values.
TEST(Sweep, RowsEscapeStrings) {
  SweepRow r;
  r.sweep_id = "a,b";
  r.model = "my \"model\"\\v2.toml";
  r.hardware = std::string("h\x01x\ny", 5);
  r.weights = "int4:g128";
  r.batch = 3;
  r.point = 18446744073709551615ull;
  r.tpot_ms = 0.1234567;
  r.ttft_ms = 1.5e-7;
  r.fits = true;
  std::vector<std::string> header =
      split_csv_line(row_header(RowFormat::csv).substr(0, row_header(RowFormat::csv).size() - 1));
  std::string csv = format_row(r, RowFormat::csv);
  EXPECT_EQ(csv.substr(0, 28), "\"a,b\",18446744073709551615,\"");
  SweepRow back = parse_row(csv.substr(0, csv.size() - 1), RowFormat::csv, header, "here");
  EXPECT_EQ(back.sweep_id, r.sweep_id);
  EXPECT_EQ(back.model, r.model);
  EXPECT_EQ(back.point, r.point);
  std::string line = format_row(r, RowFormat::jsonl);
  ASSERT_EQ(line.back(), '\n');
  nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["sweep_id"], r.sweep_id);
  EXPECT_EQ(j["model"], r.model);
  EXPECT_EQ(j["hardware"], r.hardware);
  EXPECT_EQ(j["batch"], 3);
  EXPECT_EQ(j["point"].get<uint64_t>(), r.point);
  EXPECT_EQ(j["tpot_ms"].get<double>(), 0.1234567);
  EXPECT_EQ(j["ttft_ms"].get<double>(), 1.5e-7);
  EXPECT_EQ(j["fits"], true);
  EXPECT_EQ(j.size(), header.size());
  EXPECT_NE(line.find("\"model\":\"my \\\"model\\\"\\\\v2.toml\""), std::string::npos) << line;
  EXPECT_NE(line.find("\\u0001"), std::string::npos) << line;
  // A negative count, a non-finite or negative figure, or a JSON integer written as a
  // fraction is refused when read back (merge ranked a hand-edited "-5" ms as the best).
  SweepRow neg = r;
  neg.batch = -3;
  EXPECT_THROW(parse_row(format_row(neg, RowFormat::csv).substr(0, csv.size() - 1), RowFormat::csv, header, "here"),
               Error);
  EXPECT_THROW(parse_row(format_row(neg, RowFormat::jsonl), RowFormat::jsonl, header, "here"), Error);
  for (const nlohmann::json& bad : {nlohmann::json(-5.0), nlohmann::json("nan"), nlohmann::json(nullptr)}) {
    nlohmann::json k = nlohmann::json::parse(line);
    k["tpot_ms"] = bad;
    EXPECT_THROW(parse_row(k.dump(), RowFormat::jsonl, header, "here"), Error) << bad.dump();
  }
  for (const char* point : {"1.5", "-1", "1e300"}) {
    nlohmann::json k = nlohmann::json::parse(line);
    k["point"] = nlohmann::json::parse(point);
    EXPECT_THROW(parse_row(k.dump(), RowFormat::jsonl, header, "here"), Error) << point;
  }
  std::string cells = csv.substr(0, csv.size() - 1);
  const size_t at = cells.find(",0.1234567,");
  ASSERT_NE(at, std::string::npos);
  for (const char* bad : {"-5", "nan", "inf"})
    EXPECT_THROW(parse_row(cells.substr(0, at + 1) + bad + cells.substr(at + 10), RowFormat::csv, header, "here"),
                 Error)
        << bad;
}

TEST(Sweep, InvalidSpacesAreErrors) {
  // Cost needs a price on every target.
  EXPECT_THROW(expand_sweep(spec_of("models = [\"tiny\"]\nhardware = [\"jetson-agx-orin-64g\"]\n"
                                    "objectives = [\"min cost_per_mtok\"]\n")),
               Error);
  // A TP degree that does not divide the heads: every point skipped with the reason.
  SweepSpace s =
      expand_sweep(spec_of("models = [\"llama-3-8b\"]\nhardware = [\"h100-sxm\"]\ntp = [3]\n"));
  SweepSummary sum = run(s);
  EXPECT_EQ(sum.evaluated, 0);
  ASSERT_EQ(sum.skipped.size(), 1u);
  EXPECT_NE(sum.skipped.begin()->first.find("tp=3"), std::string::npos);
  // TP above 1 needs a link: the points of the target without one are skipped with the
  // target named; the GPU's are costed.
  SweepSpace l = expand_sweep(
      spec_of("models = [\"tiny\"]\nhardware = [\"cpu-host\", \"h100-sxm\"]\ntp = [1, 2]\nprompt = 64\ngen = 16\n"));
  SweepSummary ls = run(l);
  EXPECT_EQ(ls.evaluated, 3);
  ASSERT_EQ(ls.skipped.size(), 1u);
  EXPECT_NE(ls.skipped.begin()->first.find("cpu-host: tp 2 needs a link"), std::string::npos)
      << ls.skipped.begin()->first;
}

TEST(Sweep, CostPerTokenFollowsThePrice) {
  SweepSpace s =
      expand_sweep(spec_of("models = [\"tiny\"]\nhardware = [\"a100-80g\"]\ntp = [1, 2]\n"));
  SweepSummary sum = run(s);
  double price = load_target("a100-80g").price_per_hour;
  for (const SweepRow& r : sum.rows)
    EXPECT_NEAR(r.cost_per_mtok, double(r.tp) * price / 3600.0 / r.tokens_per_s * 1e6,
                1e-9 * r.cost_per_mtok);
}

// The rows' figures are written by a fast path; they must read exactly as
// std::to_chars(general, 7) writes them: random magnitudes, both signs, exact and
// near ties at the 7th digit, powers of ten, carries to the next decade, and the
// values outside the fast path (zero, tiny, huge, inf, nan).
TEST(SweepRows, FiguresAreWrittenAsToCharsGeneral7) {
  auto expected = [](double v) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 7);
    return std::string(buf, r.ptr);
  };
  auto written = [](double v) {
    std::string s;
    append_double(s, v);
    return s;
  };
  std::vector<double> values = {0.0,
                                -0.0,
                                1e-5,
                                1e15,
                                9.9999995e14,
                                1e-300,
                                5e-324,
                                1e300,
                                std::numeric_limits<double>::infinity(),
                                std::nan(""),
                                9999999.5,
                                999999.95,
                                0.5,
                                1234567.5,
                                1234568.5,
                                0.000123456785,
                                99999.995,
                                12345678,
                                1.0 / 3.0};
  for (int e = -8; e <= 17; ++e) {
    double p = std::pow(10.0, e);
    for (double m : {1.0, 9.9999995, 9.999999499999, 9.9999994, 1.0000005, 1.00000049999, 5.0})
      values.push_back(m * p);
    values.push_back(std::nextafter(p, 0.0));
    values.push_back(std::nextafter(p, 1e300));
  }
  std::mt19937_64 rng(29);
  std::uniform_real_distribution<double> exponent(-7.0, 16.0);
  std::uniform_int_distribution<int64_t> digits(1000000, 9999999);
  std::uniform_int_distribution<int> shift(-12, 14);
  for (int i = 0; i < 300000; ++i) {
    values.push_back(std::pow(10.0, exponent(rng)));
    // Ties (d + 0.5) and near ties at the 7th significant digit, at many scales.
    double tie = (double(digits(rng)) + 0.5) * std::pow(10.0, shift(rng));
    values.push_back(tie);
    values.push_back(std::nextafter(tie, 0.0));
    values.push_back(std::nextafter(tie, 1e300));
  }
  int checked = 0;
  for (double v : values)
    for (double x : {v, -v}) {
      ASSERT_EQ(written(x), expected(x)) << "value " << std::hexfloat << x;
      ++checked;
    }
  EXPECT_GT(checked, 1000000);
}

}  // namespace
}  // namespace lathe
