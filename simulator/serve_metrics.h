// Summaries of a serving run: percentiles of per-request latencies, and time series
// of piecewise-constant quantities (queue length, KV occupancy) integrated exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe {

struct Percentiles {
  int64_t n = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};
// Linear interpolation between order statistics (numpy's default); empty -> zeros.
Percentiles percentiles(std::vector<double> values);

struct ClassStats {
  int priority = -1;  // -1: all classes together
  int64_t requests = 0;
  Percentiles ttft, tpot, e2e, queue;
  int64_t slo_met = 0;  // requests meeting every SLO given
};

// A quantity that changes in steps: set(t, v) means "v from time t on". Keeps the
// exact integral over time from `origin`, the peak, and per-bucket means and maxima
// (buckets of `dt` seconds from `origin`) for plots and JSON. Maxima count values held
// for a positive time: a value replaced at the instant it was set (a queue of one
// dispatched at once) is not a peak. With max_buckets > 0, neighbouring buckets merge
// in pairs (dt doubles) whenever more than 2 x max_buckets would be needed, so a run
// far longer than dt x max_buckets stays small.
class TimeSeries {
 public:
  TimeSeries() = default;
  TimeSeries(double origin, double dt, size_t max_buckets = 0)
      : origin_(origin), dt_(dt), last_t_(origin), max_buckets_(max_buckets) {}
  void set(double t, double v);
  void finish(double t);  // closes the series at t and computes bucket means
  double integral() const { return integral_; }
  double peak() const { return peak_; }
  double time_average() const { return last_t_ > origin_ ? integral_ / (last_t_ - origin_) : 0; }
  double origin() const { return origin_; }
  double dt() const { return dt_; }
  const std::vector<double>& bucket_mean() const { return mean_; }  // valid after finish()
  const std::vector<double>& bucket_max() const { return max_; }

 private:
  size_t bucket(double t);  // index of t's bucket, merging buckets first if needed
  double origin_ = 0, dt_ = 1, last_t_ = 0, value_ = 0, integral_ = 0, peak_ = 0;
  size_t max_buckets_ = 0;
  std::vector<double> area_, max_, mean_;
};

}  // namespace lathe
