#include "simulator/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ir/assert.h"

namespace lathe {

namespace {

std::string esc_xml(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string esc_json(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
      continue;
    }
    o += c;
  }
  return o;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}
// A count (FLOPs, bytes) to the last bit.
std::string exact(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
// Whole nanoseconds as microseconds with three decimals, exactly ("12.345").
std::string micros(int64_t ns) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
  return buf;
}

}  // namespace

std::string roofline_svg(const SimResult& r, const Target& t, const std::string& title) {
  const double W = 900, H = 600, L = 80, R = 180, T = 50, B = 60;
  double bw = t.bandwidth_bytes_per_s();
  struct Roof {
    std::string name;
    double flops;
  };
  std::vector<Roof> roofs;
  auto add_roof = [&](const std::string& name, double p) {
    if (p <= 0) return;
    for (Roof& r : roofs)
      if (std::fabs(r.flops - p) < 1e-6 * p) {  // equal peaks share one roof
        r.name += "/" + name;
        return;
      }
    roofs.push_back({name, p});
  };
  add_roof("fp8", t.peak_fp8 * 1e12);
  add_roof("int8", t.peak_int8 * 1e12);
  add_roof("bf16", t.peak_bf16 * 1e12);
  add_roof("fp16", t.peak_fp16 * 1e12);
  add_roof("tf32", t.peak_tf32 * 1e12);
  add_roof("fp32", t.peak_fp32 * 1e12);
  std::sort(roofs.begin(), roofs.end(), [](const Roof& a, const Roof& b) { return a.flops > b.flops; });
  double top = 0;
  for (const Roof& rf : roofs) top = std::max(top, rf.flops);
  // Axis ranges: intensity 1e-2 .. 1e4 FLOP/B, throughput spanning 5 decades under the top roof.
  double xmin = 1e-2, xmax = 1e4;
  double ymax = top * 2, ymin = ymax / 1e6;
  // Every kernel's achieved rate and the bandwidth slope's left end within the range:
  // an all-reduce at 0.8 GFLOP/s was drawn at the bottom edge (4 GFLOP/s), and a slope
  // clamped there bent.
  for (const OpRow& o : r.ops)
    if (o.bytes > 0 && o.flops > 0) {
      double ai = o.flops / o.bytes;
      xmin = std::min(xmin, ai / 2);
      xmax = std::max(xmax, ai * 2);
      if (o.time_s > 0) ymin = std::min(ymin, o.flops / o.time_s / 2);  // per step or not: the same rate
    }
  if (bw > 0) ymin = std::min(ymin, xmin * bw);
  auto X = [&](double v) { return L + (std::log10(v) - std::log10(xmin)) / (std::log10(xmax) - std::log10(xmin)) * (W - L - R); };
  auto Y = [&](double v) {
    v = std::clamp(v, ymin, ymax);
    return T + (std::log10(ymax) - std::log10(v)) / (std::log10(ymax) - std::log10(ymin)) * (H - T - B);
  };
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                  num(W) + "\" height=\"" + num(H) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(W / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"14\">" + esc_xml(title) + "</text>\n";
  // Grid and axes (decades).
  for (int e = int(std::ceil(std::log10(xmin))); e <= int(std::floor(std::log10(xmax))); ++e) {
    double x = X(std::pow(10.0, e));
    s += "<line x1=\"" + num(x) + "\" y1=\"" + num(T) + "\" x2=\"" + num(x) + "\" y2=\"" + num(H - B) +
         "\" stroke=\"#ddd\"/>\n<text x=\"" + num(x) + "\" y=\"" + num(H - B + 16) +
         "\" text-anchor=\"middle\">1e" + std::to_string(e) + "</text>\n";
  }
  for (int e = int(std::ceil(std::log10(ymin))); e <= int(std::floor(std::log10(ymax))); ++e) {
    double y = Y(std::pow(10.0, e));
    s += "<line x1=\"" + num(L) + "\" y1=\"" + num(y) + "\" x2=\"" + num(W - R) + "\" y2=\"" + num(y) +
         "\" stroke=\"#ddd\"/>\n<text x=\"" + num(L - 6) + "\" y=\"" + num(y + 4) + "\" text-anchor=\"end\">1e" +
         std::to_string(e) + "</text>\n";
  }
  s += "<rect x=\"" + num(L) + "\" y=\"" + num(T) + "\" width=\"" + num(W - L - R) + "\" height=\"" + num(H - T - B) +
       "\" fill=\"none\" stroke=\"black\"/>\n";
  s += "<text x=\"" + num((L + W - R) / 2) + "\" y=\"" + num(H - 20) +
       "\" text-anchor=\"middle\">arithmetic intensity (FLOP/byte)</text>\n";
  s += "<text transform=\"translate(20," + num((T + H - B) / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">achieved FLOP/s</text>\n";
  // Roofs: min(peak, intensity x bandwidth).
  int k = 0;
  for (const Roof& rf : roofs) {
    // The slope up to the ridge, then flat; a ridge left of the range (a what-if
    // bandwidth so high that every kernel is compute-bound) leaves only the flat part.
    double ridge = rf.flops / bw;
    double x0 = xmin, x1 = std::clamp(ridge, xmin, xmax);
    std::string color = k == 0 ? "#c0392b" : "#7f8c8d";
    std::string points = ridge > xmin ? num(X(x0)) + "," + num(Y(x0 * bw)) + " " : std::string();
    if (ridge < xmax)  // the ridge, then flat to the right edge
      points += num(X(x1)) + "," + num(Y(rf.flops)) + " " + num(X(xmax)) + "," + num(Y(rf.flops));
    else  // a ridge right of the range (a slow memory): the slope alone
      points += num(X(xmax)) + "," + num(Y(xmax * bw));
    s += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"" + (k == 0 ? "2" : "1") + "\" points=\"" +
         points + "\"/>\n";
    s += "<text x=\"" + num(W - R + 4) + "\" y=\"" + num(Y(rf.flops) + 4) + "\" fill=\"" + color + "\">" + esc_xml(rf.name) +
         " " + num(rf.flops / 1e12) + " TFLOP/s</text>\n";
    ++k;
  }
  s += "<text x=\"" + num(X(xmin) + 6) + "\" y=\"" + num(Y(xmin * bw * 3) - 6) + "\" fill=\"#c0392b\">" +
       num(bw / 1e9) + " GB/s</text>\n";
  // Kernels: one point per distinct (phase, kernel, intensity).
  std::vector<std::string> seen;
  for (const OpRow& o : r.ops) {
    if (o.bytes <= 0 || o.flops <= 0) continue;
    double ai = o.flops / o.bytes;
    double t_step = o.phase == Phase::decode ? o.time_s / std::max(1, r.decode.steps) : o.time_s;
    double flops_step = o.phase == Phase::decode ? o.flops / std::max(1, r.decode.steps) : o.flops;
    if (t_step <= 0) continue;
    std::string key = std::string(phase_name(o.phase)) + o.kernel + num(ai);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    const char* color = o.phase == Phase::prefill ? "#2874a6" : "#e67e22";
    s += "<circle cx=\"" + num(X(ai)) + "\" cy=\"" + num(Y(flops_step / t_step)) + "\" r=\"4\" fill=\"" + color +
         "\" fill-opacity=\"0.7\"><title>" + esc_xml(std::string(phase_name(o.phase)) + " " + o.kernel + ": " +
                                                      num(ai) + " FLOP/B, " + num(flops_step / t_step / 1e12) +
                                                      " TFLOP/s, " + std::string(bound_name(o.bound)) + "-bound") +
         "</title></circle>\n";
  }
  s += "<circle cx=\"" + num(W - R + 10) + "\" cy=\"" + num(H - B - 30) + "\" r=\"4\" fill=\"#2874a6\"/><text x=\"" +
       num(W - R + 18) + "\" y=\"" + num(H - B - 26) + "\">prefill kernel</text>\n";
  s += "<circle cx=\"" + num(W - R + 10) + "\" cy=\"" + num(H - B - 14) + "\" r=\"4\" fill=\"#e67e22\"/><text x=\"" +
       num(W - R + 18) + "\" y=\"" + num(H - B - 10) + "\">decode kernel</text>\n";
  return s + "</svg>\n";
}

std::string trace_json(const SimResult& r, const std::string& title, int full_steps) {
  // Timestamps are whole nanoseconds in an int64 (exact sums, no gaps): 292 years at
  // most. A timeline longer than that (batch 65536 of 16M-token prompts on a CPU) is
  // refused rather than written with wrapped, negative times.
  double total_s = 0;
  for (const OpRow& o : r.ops) total_s += o.time_s;
  if (!(total_s * 1e9 < 9.0e18)) {
    char years[32];
    std::snprintf(years, sizeof years, "%.3g", total_s / 3.15576e7);
    throw Error(std::string("--trace: the simulated timeline is ") + years +
                " years long; a trace's nanosecond timestamps hold at most 285 years (shorten the workload)");
  }
  std::string s = "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"title\": \"" + esc_json(title) +
                  "\", \"note\": \"simulated timeline (lathe), not a measurement; every decode step is drawn at the mean step's kernel times\"},\n\"traceEvents\": [\n";
  s += "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"" + esc_json(title) + "\"}},\n";
  s += "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 1, \"args\": {\"name\": \"prefill\"}},\n";
  s += "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 2, \"args\": {\"name\": \"decode\"}}";
  // Events start where the one before ended: each one's start and end are the running
  // sum of the durations rounded to whole nanoseconds, so no two overlap or leave a gap.
  double ts = 0;  // microseconds
  auto event = [&](const std::string& name, const std::string& cat, int tid, double dur_us, double flops, double bytes,
                   const std::string& bound, const std::string& extra_args = "") {
    const int64_t start = std::llround(ts * 1e3), end = std::llround((ts + dur_us) * 1e3);
    s += ",\n{\"name\": \"" + esc_json(name) + "\", \"cat\": \"" + cat + "\", \"ph\": \"X\", \"pid\": 1, \"tid\": " +
         std::to_string(tid) + ", \"ts\": " + micros(start) + ", \"dur\": " + micros(end - start) +
         ", \"args\": {\"flops\": " + exact(flops) + ", \"bytes\": " + exact(bytes) + ", \"bound\": \"" + bound + "\"" +
         extra_args + "}}";
    ts += dur_us;
  };
  for (const OpRow& o : r.ops)
    if (o.phase == Phase::prefill)
      event(o.name, "prefill," + o.kernel, 1, o.time_s * 1e6, o.flops, o.bytes, std::string(bound_name(o.bound)));
  const int64_t steps = r.decode.steps;
  std::vector<const OpRow*> dec;
  for (const OpRow& o : r.ops)
    if (o.phase == Phase::decode) dec.push_back(&o);
  auto full_step = [&](int64_t step) {
    for (const OpRow* o : dec)
      event(o->name + " (step " + std::to_string(step + 1) + ")", "decode," + o->kernel, 2,
            o->time_s / double(steps) * 1e6, o->flops / double(steps), o->bytes / double(steps),
            std::string(bound_name(o->bound)));
  };
  // The first and last full_steps steps kernel by kernel; the steps between, all drawn at
  // the mean step, as one event (so the file's size does not grow with gen).
  const int64_t head = std::min<int64_t>(steps, full_steps);
  const int64_t tail_from = std::max<int64_t>(head, steps - full_steps);
  for (int64_t step = 0; step < head; ++step) full_step(step);
  if (tail_from > head) {
    const double n = double(tail_from - head);
    double t = 0, f = 0, b = 0;
    for (const OpRow* o : dec) t += o->time_s / double(steps), f += o->flops / double(steps), b += o->bytes / double(steps);
    const std::string first = std::to_string(head + 1), last = std::to_string(tail_from);
    event(head + 1 == tail_from ? "decode step " + first : "decode steps " + first + "-" + last, "decode,steps", 2,
          t * n * 1e6, f * n, b * n, "mixed", ", \"steps\": " + std::to_string(tail_from - head));
  }
  for (int64_t step = tail_from; step < steps; ++step) full_step(step);
  return s + "\n]}\n";
}

}  // namespace lathe
