#include "simulator/serve_metrics.h"

#include <algorithm>
#include <cmath>

namespace lathe {

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  p.n = int64_t(v.size());
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / double(v.size());
  auto at = [&](double q) {
    double pos = q * double(v.size() - 1);
    size_t lo = size_t(std::floor(pos));
    size_t hi = std::min(v.size() - 1, lo + 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
  };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  p.max = v.back();
  return p;
}

size_t TimeSeries::bucket(double t) {
  size_t b = size_t((t - origin_) / dt_);
  while (max_buckets_ > 0 && b >= 2 * max_buckets_) {
    for (size_t i = 0; 2 * i < area_.size(); ++i) {
      bool pair = 2 * i + 1 < area_.size();
      area_[i] = area_[2 * i] + (pair ? area_[2 * i + 1] : 0.0);
      max_[i] = std::max(max_[2 * i], pair ? max_[2 * i + 1] : 0.0);
    }
    area_.resize((area_.size() + 1) / 2);
    max_.resize(area_.size());
    dt_ *= 2;
    b = size_t((t - origin_) / dt_);
  }
  return b;
}

void TimeSeries::set(double t, double v) {
  if (t < last_t_) t = last_t_;  // events never go back in time; guard rounding
  integral_ += value_ * (t - last_t_);
  // The value held since the last change counts toward the maxima only when it was
  // held for some time: events at one instant (an arrival dispatched at once) are not
  // states anyone could observe.
  if (t > last_t_) peak_ = std::max(peak_, value_);
  while (last_t_ < t) {
    size_t b = bucket(last_t_);
    // A segment that starts on an edge can divide to the bucket before it (the edge is
    // origin + (b + 1) dt rounded): it belongs to the next one (it went whole into that
    // earlier bucket, a mean of 95 beside a max of 64).
    while (origin_ + double(b + 1) * dt_ <= last_t_) b = bucket(origin_ + (double(b) + 1.5) * dt_);
    double end = std::min(t, origin_ + double(b + 1) * dt_);
    if (area_.size() <= b) {
      area_.resize(b + 1, 0.0);
      max_.resize(b + 1, 0.0);
    }
    area_[b] += value_ * (end - last_t_);
    max_[b] = std::max(max_[b], value_);
    last_t_ = end;
  }
  size_t b = bucket(t);
  if (max_.size() <= b) {
    area_.resize(b + 1, 0.0);
    max_.resize(b + 1, 0.0);
  }
  value_ = v;
}

void TimeSeries::finish(double t) {
  set(t, value_);
  mean_.resize(area_.size());
  for (size_t i = 0; i < area_.size(); ++i) {
    double width = std::min(dt_, std::max(0.0, last_t_ - origin_ - double(i) * dt_));
    mean_[i] = width > 0 ? area_[i] / width : 0;
  }
}

}  // namespace lathe
