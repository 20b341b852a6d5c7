#include "simulator/serve_trace.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace lathe {

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o;
}

std::string us(double seconds) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.3f", seconds * 1e6);
  return buf;
}

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::string serve_trace_json(const ServeResult& r, const std::string& title) {
  // The steps track stops after run.max_step_spans steps (the requests' tracks go on):
  // the trace says so rather than looking like a run that went idle.
  const std::string steps_note = int64_t(r.step_spans.size()) < r.steps
                                     ? "the steps track holds the first " + std::to_string(r.step_spans.size()) +
                                           " of " + std::to_string(r.steps) + " steps"
                                     : "the steps track holds every step";
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"title\":\"" + esc(title) +
                    "\",\"note\":\"simulated serving run (lathe), not a measurement; " + steps_note +
                    "\"},\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& ev) {
    if (!first) out += ",\n";
    first = false;
    out += ev;
  };
  std::set<std::pair<int, int>> tracks;
  std::set<int> replicas;
  for (const SlotSpan& s : r.spans) tracks.insert({s.replica, s.slot}), replicas.insert(s.replica);
  for (const StepSpan& s : r.step_spans) replicas.insert(s.replica);
  const int scheduler_pid = 100000;
  emit("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(scheduler_pid) +
       ",\"args\":{\"name\":\"scheduler (bucket means)\"}}");
  for (int p : replicas) {
    emit("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + std::to_string(p + 1) +
         ",\"args\":{\"name\":\"replica " + std::to_string(p) + "\"}}");
    emit("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(p + 1) +
         ",\"tid\":0,\"args\":{\"name\":\"steps\"}}");
  }
  for (const auto& [p, slot] : tracks)
    emit("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(p + 1) + ",\"tid\":" +
         std::to_string(slot + 1) + ",\"args\":{\"name\":\"slot " + std::to_string(slot) + "\"}}");
  for (const SlotSpan& s : r.spans) {
    const Request& q = r.requests[size_t(s.request)];
    emit("{\"ph\":\"X\",\"name\":\"" + std::string(s.prefill ? "prefill" : "decode") + " #" +
         std::to_string(s.request) + "\",\"cat\":\"" + (s.prefill ? "prefill" : "decode") +
         "\",\"pid\":" + std::to_string(s.replica + 1) + ",\"tid\":" + std::to_string(s.slot + 1) +
         ",\"ts\":" + us(s.start_s) + ",\"dur\":" + us(s.end_s - s.start_s) +
         ",\"args\":{\"request\":" + std::to_string(s.request) +
         ",\"priority\":" + std::to_string(q.priority) + ",\"prompt\":" + std::to_string(q.prompt) +
         ",\"output\":" + std::to_string(q.output) + "}}");
  }
  for (const StepSpan& s : r.step_spans)
    emit("{\"ph\":\"X\",\"name\":\"step\",\"cat\":\"step\",\"pid\":" +
         std::to_string(s.replica + 1) + ",\"tid\":0,\"ts\":" + us(s.start_s) + ",\"dur\":" +
         us(s.end_s - s.start_s) + ",\"args\":{\"decode_seqs\":" + std::to_string(s.decode_seqs) +
         ",\"prefill_tokens\":" + std::to_string(s.prefill_tokens) + "}}");
  struct Counter {
    const char* name;
    const TimeSeries* s;
    double scale;
  };
  double cap = std::max(1.0, double(r.kv_capacity_tokens) * double(r.replicas));
  const Counter counters[] = {{"waiting requests", &r.queue, 1.0},
                              {"running sequences", &r.running, 1.0},
                              {"KV occupancy %", &r.kv_tokens, 100.0 / cap}};
  for (const Counter& c : counters) {
    const auto& mean = c.s->bucket_mean();
    for (size_t i = 0; i < mean.size(); ++i)
      emit("{\"ph\":\"C\",\"name\":\"" + std::string(c.name) +
           "\",\"pid\":" + std::to_string(scheduler_pid) + ",\"ts\":" + us(c.s->origin() + double(i) * c.s->dt()) +
           ",\"args\":{\"value\":" + num(mean[i] * c.scale) + "}}");
  }
  out += "\n]}\n";
  return out;
}

}  // namespace lathe
