#include "simulator/serve.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "ir/assert.h"
#include "ir/buffers.h"
#include "simulator/serve_replica.h"
#include "simulator/simulate.h"

namespace lathe {

void validate_serve_options(const ServeOptions& o) {
  auto bad = [](const std::string& why) { throw Error(why); };
  if (o.max_batch < 1 || o.max_batch > 65536) bad("max batch must be in [1, 65536]");
  if (!(o.batch_timeout_s >= 0)) bad("batch timeout must be >= 0");
  if (o.kv_block < 1 || o.kv_block > 4096) bad("KV block must be in [1, 4096] tokens");
  if (o.replicas < 1 || o.replicas > 4096) bad("replicas must be in [1, 4096]");
  if (!(o.memory_fraction > 0 && o.memory_fraction <= 1)) bad("memory fraction must be in (0, 1]");
  if (o.max_prefill_tokens < 1) bad("max prefill tokens must be >= 1");
  if (o.batching == BatchingKind::chunked && o.token_budget <= o.max_batch)
    bad("chunked prefill: the token budget (" + std::to_string(o.token_budget) +
        ") must exceed max batch (" + std::to_string(o.max_batch) +
        "): every step carries one token per decoding sequence");
  if (o.slo_ttft_s < 0 || o.slo_tpot_s < 0) bad("SLOs must be >= 0");
}

namespace {

// Peak activations of `seqs` (possibly fractional, >= 1) sequences of S new tokens at
// context T: each live value's bytes are linear in B at fixed S and T, so the peak (a
// maximum of sums) is convex in B and the chord between the whole numbers around
// `seqs` bounds it from above.
double peak_at(const Graph& g, double seqs, int64_t S, int64_t T) {
  int64_t k = std::max<int64_t>(1, int64_t(std::floor(seqs)));
  double f = seqs - double(k), lo = peak_live_bytes(g, {k, S, T});
  if (f <= 0) return lo;
  return lo + f * (peak_live_bytes(g, {k + 1, S, T}) - lo);
}

}  // namespace

double serve_activation_bytes(const Graph& prefill, const Graph& decode, const ServeOptions& o,
                              const std::vector<Request>& reqs) {
  int64_t longest_prompt = 1, longest_output = 1, longest_context = 1;
  for (const Request& r : reqs) {
    longest_prompt = std::max(longest_prompt, r.prompt);
    longest_output = std::max(longest_output, r.output);
    longest_context = std::max(longest_context, r.prompt + r.output);
  }
  // Decode steps: max_batch sequences at the longest context; a padded batch's is its
  // longest prompt plus its longest output (the two may come from different requests).
  const bool padded = o.batching == BatchingKind::static_batch || o.batching == BatchingKind::dynamic_batch;
  double decode_peak =
      peak_live_bytes(decode, {o.max_batch, 1, padded ? longest_prompt + longest_output : longest_context});
  double prefill_peak = 0;
  switch (o.batching) {
    case BatchingKind::static_batch:
    case BatchingKind::dynamic_batch:
      // A batch is padded to its longest prompt.
      prefill_peak = peak_live_bytes(prefill, {o.max_batch, longest_prompt, longest_prompt});
      break;
    case BatchingKind::continuous: {
      // Whole prompts (a readmitted sequence recomputes its prompt and its output so
      // far, up to the longest context) packed up to max_prefill_tokens, or one longer
      // prompt alone. With s tokens in sequences of at most L tokens, s / L sequences
      // of L tokens bound every term: tokens (B S = s), per-sequence context
      // (B T = s >= the sum of the lengths) and attention scores (B S T = s L >= the
      // sum of the squared lengths).
      int64_t L = longest_context, s = std::max(o.max_prefill_tokens, L);
      prefill_peak = peak_at(prefill, std::min(double(s) / double(L), double(o.max_batch)), L, L);
      break;
    }
    case BatchingKind::chunked: {
      // token_budget tokens of chunks (beside the decode tokens), each at a context of
      // at most L: one chunk of all of them at context L when they fit, else
      // token_budget / L chunks of L tokens (the same bound as above).
      int64_t L = longest_context, s = o.token_budget;
      prefill_peak = s <= L ? peak_live_bytes(prefill, {1, s, L}) : peak_at(prefill, double(s) / double(L), L, L);
      break;
    }
  }
  return std::max(prefill_peak, decode_peak);
}

namespace {
// Weight bytes and KV bytes per token of one device (the rest of KvBudget zero).
KvBudget kv_sizes(const Graph& decode) {
  KvBudget k;
  for (ValueId v : decode.values_of(ValueKind::weight))
    k.weight_bytes += value_bytes(decode.value(v), {1, 1, 1});
  for (ValueId v : decode.values_of(ValueKind::state))
    k.kv_bytes_per_token += value_bytes(decode.value(v), {1, 1, 1});
  return k;
}
}  // namespace

KvBudget kv_budget(const Graph& prefill, const Graph& decode, const Target& t,
                   const ServeOptions& o, double activation_bytes) {
  KvBudget k = kv_sizes(decode);
  k.activation_bytes = activation_bytes;
  double usable = o.memory_fraction * t.capacity_bytes() - k.weight_bytes - k.activation_bytes;
  if (usable <= 0) {
    // What could help: a shorter or chunked prefill where its activations are a large
    // part, a smaller weight format unless the weights are 4-bit already, and --tp.
    const std::optional<Format> wf = layer_weight_format(decode);
    const bool four_bit = wf && wf->dtype == DType::int4;
    std::vector<std::string> tries;
    if (k.activation_bytes >= 0.25 * k.weight_bytes)
      tries.push_back("a shorter longest prompt, a lower batch limit or a chunked prefill (the activations are "
                      "its largest prefill step's)");
    if (!four_bit) tries.push_back("a smaller weight format");
    tries.push_back("--tp");
    std::string hint = "try " + tries[0];
    for (size_t i = 1; i < tries.size(); ++i) hint += (i + 1 == tries.size() ? "; or " : "; ") + tries[i];
    char buf[600];
    std::snprintf(
        buf, sizeof buf,
        "no room for a KV cache on %s: %.0f%% of %.2f GB holds less than the weights (%.2f GB) and "
        "activations (%.2f GB) of one replica; %s",
        t.name.c_str(), 100 * o.memory_fraction, t.capacity_bytes() / 1e9, k.weight_bytes / 1e9,
        k.activation_bytes / 1e9, hint.c_str());
    throw Error(buf);
  }
  int64_t tokens = int64_t(std::floor(usable / k.kv_bytes_per_token));
  k.tokens = tokens / o.kv_block * o.kv_block;
  return k;
}

namespace {

void summarize(ServeResult& r, const ServeOptions& o) {
  std::map<int, std::vector<size_t>> by_class;
  for (size_t i = 0; i < r.requests.size(); ++i) by_class[r.requests[i].priority].push_back(i);
  auto stats = [&](const std::vector<size_t>& ids, int priority) {
    ClassStats c;
    c.priority = priority;
    c.requests = int64_t(ids.size());
    std::vector<double> ttft, tpot, e2e, queue;
    for (size_t i : ids) {
      const Request& q = r.requests[i];
      const RequestRecord& rec = r.records[i];
      double first = rec.first_token_s - q.arrival_s, total = rec.finish_s - q.arrival_s;
      ttft.push_back(first);
      e2e.push_back(total);
      queue.push_back(rec.queued_s);
      double per_token =
          q.output > 1 ? (rec.finish_s - rec.first_token_s) / double(q.output - 1) : 0;
      if (q.output > 1) tpot.push_back(per_token);
      bool ok = (o.slo_ttft_s <= 0 || first <= o.slo_ttft_s) &&
                (o.slo_tpot_s <= 0 || per_token <= o.slo_tpot_s);
      if (ok) ++c.slo_met;
    }
    c.ttft = percentiles(std::move(ttft));
    c.tpot = percentiles(std::move(tpot));
    c.e2e = percentiles(std::move(e2e));
    c.queue = percentiles(std::move(queue));
    return c;
  };
  std::vector<size_t> everyone(r.requests.size());
  for (size_t i = 0; i < everyone.size(); ++i) everyone[i] = i;
  r.all = stats(everyone, -1);
  for (const auto& [p, ids] : by_class) r.classes.push_back(stats(ids, p));

  double span = std::max(1e-12, r.end_s - r.start_s);
  double in_tokens = 0, out_tokens = 0, good_tokens = 0;
  int64_t good = 0;
  for (size_t i = 0; i < r.requests.size(); ++i) {
    const Request& q = r.requests[i];
    const RequestRecord& rec = r.records[i];
    in_tokens += double(q.prompt);
    out_tokens += double(q.output);
    double first = rec.first_token_s - q.arrival_s;
    double per_token = q.output > 1 ? (rec.finish_s - rec.first_token_s) / double(q.output - 1) : 0;
    if ((o.slo_ttft_s <= 0 || first <= o.slo_ttft_s) &&
        (o.slo_tpot_s <= 0 || per_token <= o.slo_tpot_s)) {
      ++good;
      good_tokens += double(q.output);
    }
  }
  r.requests_per_s = double(r.requests.size()) / span;
  r.output_tokens_per_s = out_tokens / span;
  r.input_tokens_per_s = in_tokens / span;
  r.goodput_requests_per_s = double(good) / span;
  r.goodput_tokens_per_s = good_tokens / span;
  r.slo_fraction = r.requests.empty() ? 1.0 : double(good) / double(r.requests.size());

  // Little's law over [first arrival, end]: the system starts and ends empty, so the
  // integral of the number in the system equals the sum of the times spent in it.
  double horizon = std::max(1e-12, r.end_s - r.start_s);
  double lambda = double(r.requests.size()) / horizon;
  r.little_L = r.in_system.integral() / horizon;
  r.little_lambda_W = lambda * r.all.e2e.mean;
  r.little_Lq = r.queue.integral() / horizon;
  r.little_lambda_Wq = lambda * r.all.queue.mean;
}

}  // namespace

int64_t runnable_batch(const Graph& prefill, const Graph& decode, const Target& t, const ServeOptions& o,
                       const std::vector<Request>& reqs) {
  // Each running sequence holds at least, in whole blocks: its whole KV under
  // request-level batching (reserved up front), its prompt under continuous batching,
  // its first chunk under chunked prefill.
  const bool request_level = o.batching == BatchingKind::static_batch || o.batching == BatchingKind::dynamic_batch;
  int64_t hold = std::numeric_limits<int64_t>::max();
  for (const Request& q : reqs) {
    int64_t first = std::max<int64_t>(1, request_level                          ? q.prompt + q.output
                                         : o.batching == BatchingKind::chunked ? std::min(q.prompt, o.token_budget)
                                                                               : q.prompt);
    hold = std::min(hold, (first + o.kv_block - 1) / o.kv_block * o.kv_block);
  }
  const KvBudget none = kv_sizes(decode);
  const double usable = o.memory_fraction * t.capacity_bytes() - none.weight_bytes;
  auto fits = [&](int64_t b) {
    ServeOptions ob = o;
    ob.max_batch = b;
    return serve_activation_bytes(prefill, decode, ob, reqs) + double(b) * double(hold) * none.kv_bytes_per_token <=
           usable;
  };
  if (fits(o.max_batch)) return o.max_batch;
  int64_t lo = 1, hi = o.max_batch;  // fits(hi) is false; lo = 1 may not fit either (kv_budget then says why)
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

ServeResult simulate_serving(const Graph& prefill, const Graph& decode, const Target& t,
                             std::vector<Request> requests, const ServeOptions& asked,
                             const ServeRunOptions& run) {
  validate_serve_options(asked);
  if (requests.empty()) throw Error("no requests to serve");
  std::stable_sort(requests.begin(), requests.end(),
                   [](const Request& a, const Request& b) { return a.arrival_s < b.arrival_s; });
  // Activations are reserved for the batch a replica can run: a --max-batch the KV cache
  // could never hold (2000 beside the cache left after 2000 sequences' activations)
  // reserved activations that shrank the cache to 116 sequences, where 450 fit.
  ServeOptions o = asked;
  o.max_batch = runnable_batch(prefill, decode, t, asked, requests);
  CostOptions co;
  co.ideal = run.ideal;
  StepCoster cost(prefill, decode, t, co);
  KvBudget kb = kv_budget(prefill, decode, t, o, serve_activation_bytes(prefill, decode, o, requests));
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& q = requests[i];
    int64_t need = (q.prompt + q.output + o.kv_block - 1) / o.kv_block * o.kv_block;
    if (need > kb.tokens)
      throw Error(
          "request " + std::to_string(i) + (q.line > 0 ? " (line " + std::to_string(q.line) + " of the trace)" : "") +
          " (prompt " + std::to_string(q.prompt) + " + output " +
          std::to_string(q.output) + " tokens) needs more KV cache than a replica holds (" +
          std::to_string(kb.tokens) + " tokens in " +
          std::to_string(int(std::lround(100 * o.memory_fraction))) +
          "% of device memory); shorten it, or use a smaller KV dtype, int4 weights or --tp");
  }

  ServeResult r;
  r.requests = std::move(requests);
  r.records.assign(r.requests.size(), RequestRecord{});
  r.kv_capacity_tokens = kb.tokens;
  r.replicas = o.replicas;
  r.max_batch = o.max_batch;
  r.kv_bytes_per_token = kb.kv_bytes_per_token;
  r.weight_bytes = kb.weight_bytes;
  r.activation_bytes = kb.activation_bytes;
  const size_t n = r.requests.size();
  // Buckets of 1/series_buckets of the arrival span from the first arrival (a trace may
  // carry Unix times); a run that drains long after the last arrival merges them.
  const double first = r.requests.front().arrival_s;
  const size_t nb = size_t(std::max(1, run.series_buckets));
  double dt = std::max(1e-3, r.requests.back().arrival_s - first) / double(nb);
  r.queue = r.running = r.kv_tokens = r.in_system = TimeSeries(first, dt, nb);

  ServeState st{r.requests,
                r.records,
                cost,
                o,
                kb.tokens / o.kv_block,
                run.record_spans ? &r.spans : nullptr,
                std::vector<double>(n, 0.0),
                std::vector<int64_t>(n, 0),
                0,
                0};

  std::vector<std::unique_ptr<Replica>> reps;
  for (int64_t i = 0; i < o.replicas; ++i) {
    bool request_level =
        o.batching == BatchingKind::static_batch || o.batching == BatchingKind::dynamic_batch;
    reps.push_back(request_level
                       ? make_batch_replica(st, int(i), o.batching == BatchingKind::dynamic_batch)
                       : make_continuous_replica(st, int(i), o.batching == BatchingKind::chunked));
  }
  const size_t R = reps.size();
  std::vector<char> busy(R, 0);
  std::vector<double> end(R, 0.0), wake(R, kNever), started(R, 0.0);
  size_t next = 0, rr = 0;
  int64_t events = 0;
  double now = 0;
  r.start_s = r.requests.front().arrival_s;

  // Each replica's next event (a step's end, or a wake) in an ordered set, and its
  // outstanding requests (least-loaded routing) and queue, running and KV figures kept
  // as totals updated for the one replica an event changes: a scan of every replica per
  // event took 35 s for 4,000 requests over 4,096 replicas. Ties go to the lowest index,
  // as the scans did.
  std::set<std::pair<double, size_t>> next_event;
  std::set<std::pair<int64_t, size_t>> by_load;
  std::vector<double> event_at(R, kNever);
  std::vector<int64_t> load(R, 0), queued_of(R, 0), running_of(R, 0), kv_of(R, 0);
  int64_t queued = 0, running = 0, kv = 0;
  for (size_t i = 0; i < R; ++i) {
    next_event.insert({kNever, i});
    load[i] = reps[i]->outstanding();
    by_load.insert({load[i], i});
  }
  auto reschedule = [&](size_t i) {
    const double e = busy[i] ? end[i] : wake[i];
    if (e == event_at[i]) return;
    next_event.erase({event_at[i], i});
    event_at[i] = e;
    next_event.insert({e, i});
  };
  auto recount = [&](size_t i) {  // after replica i changed
    if (int64_t l = reps[i]->outstanding(); l != load[i]) {
      by_load.erase({load[i], i});
      load[i] = l;
      by_load.insert({l, i});
    }
    auto update = [](int64_t& total, int64_t& mine, int64_t now_value) { total += now_value - mine, mine = now_value; };
    update(queued, queued_of[i], reps[i]->queued());
    update(running, running_of[i], reps[i]->running());
    update(kv, kv_of[i], reps[i]->kv_tokens());
    reschedule(i);
  };

  while (true) {
    double ta = next < n ? r.requests[next].arrival_s : kNever;
    size_t best = next_event.begin()->second;
    double te = next_event.begin()->first;
    if (ta == kNever && te == kNever) break;
    if (ta <= te) {  // arrivals first at equal times: a step starting now sees them
      now = ta;
      size_t k = o.router == RouterKind::round_robin ? rr++ % R : by_load.begin()->second;
      r.records[next].replica = int(k);
      reps[k]->enqueue(int32_t(next), now);
      if (!busy[k]) wake[k] = std::min(wake[k], now);
      recount(k);
      ++next;
      if (next == n)  // the stream ended: idle replicas look again (static flushes)
        for (size_t i = 0; i < R; ++i)
          if (!busy[i]) wake[i] = std::min(wake[i], now), reschedule(i);
    } else {
      now = te;
      size_t i = best;
      if (busy[i]) {
        reps[i]->finish_step(now);
        busy[i] = 0;
        if (run.record_spans && int64_t(r.step_spans.size()) < run.max_step_spans)
          r.step_spans.push_back({int(i), started[i], now, reps[i]->step_decode_seqs(),
                                  reps[i]->step_prefill_tokens()});
      }
      double w = kNever;
      double d = reps[i]->start_step(now, next < n, &w);
      if (d >= 0) {
        busy[i] = 1;
        started[i] = now;
        end[i] = now + d;
        wake[i] = kNever;
        ++r.steps;
      } else {
        LATHE_ASSERT(w > now, "an idle replica must wake later");
        wake[i] = w;
      }
      recount(i);
    }
    r.queue.set(now, double(queued));
    r.running.set(now, double(running));
    r.kv_tokens.set(now, double(kv));
    r.in_system.set(now, double(int64_t(next) - st.finished));
    if (run.progress && (++events & 0xfff) == 0) run.progress(double(st.finished) / double(n));
  }
  LATHE_ASSERT(st.finished == int64_t(n), "every request must finish");
  r.end_s = now;
  for (TimeSeries* s : {&r.queue, &r.running, &r.kv_tokens, &r.in_system}) s->finish(now);
  r.preemptions = st.preemptions;
  r.cost_evaluations = cost.evaluations();
  r.cost_entries = cost.cache_entries();
  summarize(r, o);
  return r;
}

}  // namespace lathe
