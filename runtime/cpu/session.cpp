#include "runtime/cpu/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <unordered_set>

#include "ir/host.h"
#include "codegen/cpu/abi.h"
#include "codegen/cpu/emit_cpu.h"
#include "ir/assert.h"
#include "ir/buffers.h"
#include "runtime/cpu/blas.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/step.h"
#include "simulator/cost.h"

namespace lathe {

double available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024.0;
  return 0;
}

double cpu_session_bytes(const Plan& plan) {
  const Graph& g = plan.decode;
  double weights = 0;
  for (ValueId v : g.values_of(ValueKind::weight)) weights += value_bytes(g.value(v), graph_bindings(g));
  Bindings full{g.attrs.i("B"), 1, g.attrs.i("final_context")};
  double kv = 0;
  for (ValueId v : g.values_of(ValueKind::state)) kv += value_bytes(g.value(v), full);
  double arena = double(std::max(plan.prefill.attrs.i("arena_bytes", 0), plan.decode.attrs.i("arena_bytes", 0)));
  return weights + kv + arena;
}

void check_fits_in_memory(const Plan& plan) {
  double need = cpu_session_bytes(plan), avail = available_memory_bytes();
  if (avail > 0 && need > 0.9 * avail)
    throw Error("this plan needs " + std::to_string(int64_t(need / 1e6)) + " MB of host memory (weights, KV cache for " +
                std::to_string(plan.decode.attrs.i("B")) + " x " + std::to_string(plan.decode.attrs.i("final_context")) +
                " positions, activations) but only " + std::to_string(int64_t(avail / 1e6)) +
                " MB are available; use smaller --batch / --gen or quantized --weights / --kv");
}

namespace {

using Clock = std::chrono::steady_clock;

struct Launch {
  LatheKernel fn = nullptr;
  std::vector<void*> bufs;
  long iarg = 0;
  NodeId node = kNone;
  int timing = -1;
  CostForm form;  // the node's cost form, built once: each step only evaluates it
};

// One phase's executable form: kernels in launch order with their buffers bound.
struct Program {
  const Graph* graph = nullptr;
  std::vector<Launch> launches;
  Bindings plan;  // the bindings the plan was made for (buffer capacities)
  ValueId logits = kNone, tokens_out = kNone, tokens_in = kNone;
};

}  // namespace

struct CpuSession::Impl {
  Plan plan;
  const WeightStore& weights;
  CpuJit& jit;
  SessionOptions opts;
  std::unique_ptr<ThreadPool> pool;
  AlignedBuffer arena, kv, kv_scales, tokens;
  std::vector<AlignedBuffer> loose;  // activations of unplanned graphs (no memory plan)
  // f32 copies of norm gains stored as bf16/f16 (models of those dtypes keep their norms
  // in the model dtype; the CPU kernels read gains as f32).
  std::map<std::string, std::vector<float>> f32_gains;
  std::vector<float*> scratch_ptrs;
  AlignedBuffer scratch, shared;
  int64_t scratch_floats = 0, shared_floats = 0;
  LatheCtx ctx{};
  Program prefill, decode;
  std::vector<KernelTiming> timings;
  std::vector<double> elapsed;  // seconds of each launch in the step being run
  SequenceState seqs{plan.decode};
  JitStats jit_before;
  double compile_s = 0;
  int compiled = 0, cached = 0;

  Impl(const Plan& p, const WeightStore& w, CpuJit& j, SessionOptions o) : plan(p), weights(w), jit(j), opts(o) {
    check_fits_in_memory(plan);
    int threads = o.threads > 0 ? o.threads : available_cpus();
    pool = std::make_unique<ThreadPool>(threads);
    jit_before = jit.stats();
    setup_kv();
    // Every kernel's source first, so that a cold plan's kernels compile side by side
    // on the pool's threads; then each is loaded in order.
    std::vector<CpuKernel> pk = emit(plan.prefill), dk = emit(plan.decode);
    std::vector<JitSource> sources;
    std::unordered_set<std::string> seen;  // the kernels of a layer's nodes share one function
    for (const auto* ks : {&pk, &dk})
      for (const CpuKernel& k : *ks)
        if (seen.insert(k.function).second) sources.push_back({cpu_kernel_source(k), k.node_name});
    // At most 8 clang instances at once (each takes 100-200 MB at -O3).
    jit.prefetch(sources, std::min(threads, 8));
    build(prefill, plan.prefill, pk);
    build(decode, plan.decode, dk);
    allocate_memory();
    bind(prefill);
    bind(decode);
    const JitStats& s = jit.stats();
    compile_s = (s.compile_s - jit_before.compile_s) + (s.load_s - jit_before.load_s);
    compiled = s.compiled - jit_before.compiled;
    cached = s.disk_hits - jit_before.disk_hits;
  }

  void setup_kv() {
    const Graph& g = plan.decode;
    int64_t L = g.attrs.i("layers"), kvh = g.attrs.i("kv_heads"), d = g.attrs.i("head_dim");
    int64_t vectors = seqs.paged() ? seqs.slots() * seqs.blocks_per_slot() * L * 2 * kvh * seqs.block()
                                   : L * 2 * seqs.slots() * seqs.capacity() * kvh;
    const Value& state = g.value(g.values_of(ValueKind::state).front());
    double bytes = double(vectors) * double(d) * dtype_bits(state.format.dtype) / 8.0;
    double scale_bytes = state.format.has_scales() ? double(vectors) * 2.0 : 0.0;
    double avail = available_memory_bytes();
    if (avail > 0 && bytes + scale_bytes > 0.9 * avail)
      throw Error("the KV cache needs " + std::to_string(int64_t((bytes + scale_bytes) / 1e6)) + " MB (" +
                  std::to_string(seqs.slots()) + " sequences x " + std::to_string(seqs.capacity()) + " positions) but only " +
                  std::to_string(int64_t(avail / 1e6)) + " MB of memory are available");
    kv = AlignedBuffer(size_t(bytes));
    if (scale_bytes > 0) kv_scales = AlignedBuffer(size_t(scale_bytes));
  }

  static std::vector<CpuKernel> emit(const Graph& g) {
    std::vector<CpuKernel> ks;
    for (NodeId id : g.topo_order()) ks.push_back(emit_cpu_kernel(g, id));
    return ks;
  }

  // The launches of graph g, whose kernels (emit(g), in topological order) are ks.
  void build(Program& prog, const Graph& g, const std::vector<CpuKernel>& ks) {
    prog.graph = &g;
    prog.plan = graph_bindings(g);
    for (const CpuKernel& k : ks) {
      const NodeId id = k.node;
      Launch l;
      l.fn = reinterpret_cast<LatheKernel>(jit.get(cpu_kernel_source(k), k.symbol, g.name + "/" + k.node_name));
      l.node = id;
      l.form = cost_form(g, g.node(id));
      l.iarg = long(k.layer);
      scratch_floats = std::max(scratch_floats, k.scratch_floats);
      shared_floats = std::max(shared_floats, k.shared_floats);
      KernelTiming t;
      t.node = id;
      t.name = k.node_name;
      t.label = k.label;
      t.phase = g.phase;
      l.timing = int(timings.size());
      timings.push_back(t);
      prog.launches.push_back(std::move(l));
      const Node& n = g.node(id);
      if (n.kind == OpKind::lm_head) prog.logits = n.outputs[0];
      if (n.kind == OpKind::sample) prog.tokens_out = n.outputs[0];
    }
    prog.tokens_in = g.find_value("tokens");
    if (prog.logits == kNone || prog.tokens_in == kNone) throw Error("plan: " + g.name + " has no lm_head or tokens");
  }

  void allocate_memory() {
    int64_t arena_bytes = std::max(plan.prefill.attrs.i("arena_bytes", 0), plan.decode.attrs.i("arena_bytes", 0));
    arena = AlignedBuffer(size_t(std::max<int64_t>(arena_bytes, 64)));
    int64_t max_rows = 1;
    for (const Graph* g : {&plan.prefill, &plan.decode}) max_rows = std::max(max_rows, g->attrs.i("B") * g->attrs.i("S"));
    tokens = AlignedBuffer(size_t(max_rows) * 4);
    int threads = pool->threads();
    scratch = AlignedBuffer(size_t(std::max<int64_t>(scratch_floats, 16) * threads) * 4);
    shared = AlignedBuffer(size_t(std::max<int64_t>(shared_floats, 16)) * 4);
    for (int t = 0; t < threads; ++t) scratch_ptrs.push_back(static_cast<float*>(scratch.data()) + t * scratch_floats);
    ctx.pool = pool.get();
    ctx.parallel_for = &ThreadPool::run;
    ctx.threads = threads;
    ctx.scratch = scratch_ptrs.data();
    ctx.scratch_floats = scratch_floats;
    ctx.shared = static_cast<float*>(shared.data());
    ctx.shared_floats = shared_floats;
    blas_load();
    ctx.sgemm_nt = &sgemm_nt;
    ctx.kv = static_cast<unsigned char*>(kv.data());
    ctx.kv_scales = static_cast<unsigned short*>(kv_scales.data());
    // Fault every page in now, so the first step is not charged for it.
    for (AlignedBuffer* b : {&arena, &kv, &kv_scales, &tokens, &scratch, &shared})
      if (b->size()) std::memset(b->data(), 0, b->size());
  }

  void* value_ptr(const Graph& g, ValueId v) {
    const Value& val = g.value(v);
    if (v == g.find_value("tokens")) return tokens.data();
    if (val.kind == ValueKind::weight) {
      const WeightTensor& t = weights.get(val.name);
      if (val.shape.size() != 1 || t.format.dtype == DType::f32) return const_cast<void*>(t.payload.data());
      auto [it, fresh] = f32_gains.try_emplace(val.name);
      if (fresh) {
        it->second.resize(size_t(t.cols()));
        unpack_rows(t.payload.data(), nullptr, 1, t.cols(), t.format, it->second.data());
      }
      return it->second.data();
    }
    if (val.offset >= 0) return static_cast<char*>(arena.data()) + val.offset;
    // No memory plan ran: give the value a buffer of its own.
    loose.emplace_back(size_t(std::max(64.0, value_bytes(val, graph_bindings(g)))));
    return loose.back().data();
  }

  void bind(Program& prog) {
    const Graph& g = *prog.graph;
    std::map<ValueId, void*> unplanned;
    for (Launch& l : prog.launches) {
      for (const KernelBinding& kb : kernel_bindings(g, l.node)) {
        const Value& val = g.value(kb.value);
        if (kb.scales) {
          l.bufs.push_back(const_cast<void*>(weights.get(val.name).scales.data()));
          continue;
        }
        if (val.kind == ValueKind::activation && val.offset < 0) {
          auto it = unplanned.find(kb.value);
          if (it == unplanned.end()) it = unplanned.emplace(kb.value, value_ptr(g, kb.value)).first;
          l.bufs.push_back(it->second);
          continue;
        }
        l.bufs.push_back(value_ptr(g, kb.value));
      }
    }
    for (auto [v, p] : unplanned) {
      if (v == prog.logits) logits_ptr[&prog] = static_cast<float*>(p);
      if (v == prog.tokens_out) argmax_ptr[&prog] = static_cast<int32_t*>(p);
    }
  }
  std::map<const Program*, float*> logits_ptr;
  std::map<const Program*, int32_t*> argmax_ptr;

  float* logits_of(const Program& p) {
    if (auto it = logits_ptr.find(&p); it != logits_ptr.end()) return it->second;
    return reinterpret_cast<float*>(static_cast<char*>(arena.data()) + p.graph->value(p.logits).offset);
  }
  int32_t* argmax_of(const Program& p) {
    if (p.tokens_out == kNone) return nullptr;
    if (auto it = argmax_ptr.find(&p); it != argmax_ptr.end()) return it->second;
    return reinterpret_cast<int32_t*>(static_cast<char*>(arena.data()) + p.graph->value(p.tokens_out).offset);
  }

  void poison() {
    float nan = std::numeric_limits<float>::quiet_NaN();
    std::fill_n(static_cast<float*>(arena.data()), arena.size() / 4, nan);
    for (AlignedBuffer& b : loose) std::fill_n(static_cast<float*>(b.data()), b.size() / 4, nan);
  }

  StepResult run(Program& prog, const std::vector<std::vector<int32_t>>& new_tokens, bool fresh) {
    const Graph& g = *prog.graph;
    const int64_t vocab = g.attrs.i("vocab");
    StepPlan sp = seqs.begin(new_tokens, fresh, prog.plan.S, vocab);
    const int n_seq = int(sp.seqs.size());
    std::copy(sp.tokens.begin(), sp.tokens.end(), static_cast<int32_t*>(tokens.data()));
    LatheStep step{n_seq, int(sp.tokens.size()), sp.seqs.data(), sp.row_seq.data(), sp.row_pos.data(),
                   seqs.block_table().data(), int(seqs.blocks_per_slot())};
    if (opts.poison) poison();
    Bindings bind = sp.bindings();
    StepResult r;
    auto t0 = Clock::now();
    if (!opts.time_kernels) {
      for (const Launch& l : prog.launches) l.fn(&ctx, &step, l.bufs.data(), &l.iarg);
    } else {
      elapsed.resize(prog.launches.size());
      for (size_t i = 0; i < prog.launches.size(); ++i) {
        const Launch& l = prog.launches[i];
        auto a = Clock::now();
        l.fn(&ctx, &step, l.bufs.data(), &l.iarg);
        elapsed[i] = std::chrono::duration<double>(Clock::now() - a).count();
      }
    }
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    // Predictions are made after the step, outside the time it measures.
    if (opts.time_kernels)
      for (size_t i = 0; i < prog.launches.size(); ++i) {
        const Launch& l = prog.launches[i];
        KernelTiming& kt = timings[size_t(l.timing)];
        kt.measured_s += elapsed[i];
        kt.calls += 1;
        NodeCost c = cost_node(l.form, plan.target, bind);
        kt.predicted_s += c.time_s;
        kt.flops += c.flops;
        kt.bytes += c.bytes;
        r.predicted_s += c.time_s;
      }
    seqs.commit(sp);
    const float* lg = logits_of(prog);
    for (int s = 0; s < n_seq; ++s) r.logits.emplace_back(lg + int64_t(s) * vocab, lg + int64_t(s + 1) * vocab);
    if (int32_t* am = argmax_of(prog)) r.argmax.assign(am, am + n_seq);
    return r;
  }
};

CpuSession::CpuSession(const Plan& plan, const WeightStore& weights, CpuJit& jit, SessionOptions o)
    : impl_(std::make_unique<Impl>(plan, weights, jit, o)) {}
CpuSession::~CpuSession() = default;

StepResult CpuSession::prefill(const std::vector<std::vector<int32_t>>& prompts) {
  return impl_->run(impl_->prefill, prompts, true);
}

StepResult CpuSession::decode(const std::vector<int32_t>& tokens) {
  std::vector<std::vector<int32_t>> t;
  for (int32_t x : tokens) t.push_back({x});
  return impl_->run(impl_->decode, t, false);
}

const std::vector<KernelTiming>& CpuSession::timings() const { return impl_->timings; }
void CpuSession::reset_timings() {
  for (KernelTiming& t : impl_->timings) t.calls = 0, t.measured_s = 0, t.predicted_s = 0, t.flops = 0, t.bytes = 0;
}
int64_t CpuSession::vocab() const { return impl_->plan.decode.attrs.i("vocab"); }
int CpuSession::threads() const { return impl_->pool->threads(); }
double CpuSession::compile_s() const { return impl_->compile_s; }
int CpuSession::kernels_compiled() const { return impl_->compiled; }
int CpuSession::kernels_cached() const { return impl_->cached; }
double CpuSession::kv_bytes() const { return double(impl_->kv.size() + impl_->kv_scales.size()); }
double CpuSession::arena_bytes() const { return double(impl_->arena.size()); }

}  // namespace lathe
