#include "runtime/cuda/cuda_session.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include "codegen/cpu/emit_cpu.h"  // kernel_bindings
#include "codegen/cuda/emit_cuda.h"
#include "ir/assert.h"
#include "ir/buffers.h"
#include "runtime/cuda/cuda_api.h"
#include "runtime/step.h"
#include "simulator/cost.h"

namespace lathe {

namespace {

// Host mirror of LatheCudaStep (cuda_prelude.cuh): four ints, eight pointers.
struct CudaStepHost {
  int n_seq, n_rows, blocks_per_slot, max_len;
  uint64_t seq, row_seq, row_pos, block_table, kv, kv_scales, scratch, counters;
};
static_assert(sizeof(CudaStepHost) == 80, "LatheCudaStep layout");

struct Entry {
  CuFunction fn = nullptr;
  CudaEntry spec;
};

struct Launch {
  NodeId node = kNone;
  CostForm form;  // the node's cost form, built once: each step only evaluates it
  std::string name;
  std::vector<Entry> entries;
  CuDevicePtr bufs = 0;  // device array of pointers
  long layer = 0;
  // The emitted kernel without its source: entry specs, scratch and counters, the cuBLAS
  // route (kernel.blas) and what cuda_step_entry reads.
  CudaKernel kernel;
  bool zero_scratch = false;
  int timing = -1;
  bool blas = false;  // the cuBLAS route is bound (the node has one and the library loaded)
  CuDevicePtr x = 0, res = 0, w[4] = {0, 0, 0, 0}, out[4] = {0, 0, 0, 0};
};

struct Program {
  const Graph* graph = nullptr;
  Bindings plan;
  std::vector<Launch> launches;
  int64_t logits_offset = -1, argmax_offset = -1;
  CuGraphExec graph_exec = nullptr;
  int graph_seqs = -1;
};

int64_t value_offset(const Graph& g, ValueId v) {
  int64_t off = g.value(v).offset;
  if (off < 0) throw Error("CUDA backend: " + g.name + " has no memory plan (run the memory-plan pass)");
  return off;
}

}  // namespace

double cuda_session_bytes(const Plan& plan) {
  // The CPU session's weights, KV cache and arena, plus the largest kernel scratch (one
  // device buffer serves every kernel): dequantized weight copies of the cuBLAS route
  // (235 MB for llama-3-8b's gate/up pair), decode-attention partials, MoE products.
  int64_t scratch = 0;
  for (const Graph* g : {&plan.prefill, &plan.decode})
    for (NodeId id : g->topo_order()) scratch = std::max(scratch, emit_cuda_kernel(*g, id).scratch_bytes);
  return cpu_session_bytes(plan) + double(scratch);
}

CudaBinding cuda_binding(const Graph& g, const KernelBinding& kb) {
  const Value& v = g.value(kb.value);
  if (v.kind == ValueKind::weight) return CudaBinding::weight;
  if (v.kind == ValueKind::input) return CudaBinding::tokens;
  if (is_state_view(g, kb.value)) return CudaBinding::kv_cache;
  return CudaBinding::arena;
}

std::vector<unsigned char> cuda_gain_payload(const WeightTensor& t, DType act) {
  const int64_t K = t.cols();
  std::vector<float> f(static_cast<size_t>(K));
  unpack_rows(t.payload.data(), static_cast<const uint16_t*>(t.scales.data()), 1, K, t.format, f.data());
  Format out;
  out.dtype = act;
  std::vector<unsigned char> bytes(packed_bytes(out, 1, K));
  pack_rows(f.data(), 1, K, out, bytes.data(), nullptr);
  return bytes;
}

struct CudaSession::Impl {
  Plan plan;
  const WeightStore& weights;
  CudaSessionOptions opts;
  CudaApi api;
  int arch = 80;
  Nvrtc nvrtc;
  CuStream stream = nullptr;
  std::map<std::string, std::pair<CuDevicePtr, CuDevicePtr>> dweights;  // payload, scales
  CuDevicePtr kv = 0, kv_scales = 0, arena = 0, stepbuf = 0, scratch = 0, counters = 0;
  int64_t scratch_bytes = 0, counter_words = 0, arena_bytes = 0;
  size_t off_seqs = 0, off_row_seq = 0, off_row_pos = 0, off_blocks = 0, off_tokens = 0, step_bytes = 0;
  Program prefill, decode;
  SequenceState seqs{plan.decode};
  std::vector<KernelTiming> timings;
  std::vector<CudaFunctionInfo> info;
  double compile_s = 0;
  int compiled = 0, cached = 0;
  std::vector<CuEvent> ev_begin, ev_end;

  Impl(const Plan& p, const WeightStore& w, CudaSessionOptions o)
      : plan(p), weights(w), opts(o), api(o.device), nvrtc(o.nvrtc) {
    const CudaDeviceInfo& d = api.device();
    arch = cuda_arch_for(d.compute_capability);
    if (d.compute_capability < 80)
      throw Error("CUDA backend: " + d.name + " is sm_" + std::to_string(d.compute_capability) +
                  "; lathe's kernels need sm_80 or newer (bf16 tensor cores)");
    double need = cuda_session_bytes(plan);
    if (need > d.free_gb * 1e9 * 0.95)
      throw OutOfDeviceMemory("the plan needs " + std::to_string(need / 1e9) + " GB of device memory; " + d.name + " has " +
                  std::to_string(d.free_gb) + " GB free");
    if (!nvrtc.available()) throw Error("CUDA backend: " + nvrtc.why_unavailable());
    try {
      stream = api.stream();
      upload_weights();
      build(prefill, plan.prefill);
      build(decode, plan.decode);
      allocate();
      bind(prefill);
      bind(decode);
      warm_blas();
    } catch (...) {
      release();  // a failed session gives its device memory back (the destructor will not run)
      throw;
    }
  }

  // cuBLAS loads its kernels and picks algorithms on the first call of each shape;
  // do that here (on the real buffers, whose contents nothing has read yet) so that
  // the first prefill is timed like any later one.
  void warm_blas() {
    const int64_t rows = plan.prefill.attrs.i("B") * plan.prefill.attrs.i("S");
    bool any = false;
    for (const Launch& l : prefill.launches) {
      if (!l.blas) continue;
      blas_gemms(l, rows, plan.act_dtype == "bf16");
      any = true;
    }
    if (any) api.sync(stream);
  }

  // The library GEMMs of a cuBLAS-route launch: A is the normalized copy in scratch
  // when the node has a norm prologue; C is the output (over a copy of the residual,
  // beta = 1) or, for SiLU x up, the gate and up products in scratch.
  void blas_gemms(const Launch& l, int64_t rows, bool bf16) {
    const CudaBlasPlan& b = l.kernel.blas;
    const CuDevicePtr a = b.norm_entry >= 0 ? scratch + CuDevicePtr(b.xn_offset) : l.x;
    for (int i = 0; i < b.nw; ++i) {
      const CuDevicePtr c = b.epilogue == 2 ? scratch + CuDevicePtr(i == 0 ? b.t1_offset : b.t2_offset) : l.out[i];
      const CuDevicePtr w = b.dequant_entry >= 0 ? scratch + CuDevicePtr(b.wd_offset[i]) : l.w[i];
      api.gemm_nt(stream, bf16, rows, b.n[i], b.K, a, w, c, b.epilogue == 1 ? 1.0f : 0.0f);
    }
  }
  ~Impl() { release(); }
  void release() {
    for (Program* p : {&prefill, &decode}) {
      api.graph_destroy(p->graph_exec);
      p->graph_exec = nullptr;
      for (Launch& l : p->launches) api.free(l.bufs), l.bufs = 0;
    }
    for (auto& [n, wp] : dweights) api.free(wp.first), api.free(wp.second);
    dweights.clear();
    for (CuDevicePtr* b : {&kv, &kv_scales, &arena, &stepbuf, &scratch, &counters}) api.free(*b), *b = 0;
  }

  void upload_weights() {
    const DType act = plan.act_dtype == "f16" ? DType::f16 : DType::bf16;
    for (const auto& [name, t] : weights.tensors()) {
      if (t.shape.size() == 1) {
        // Norm gains: kernels read them like activations (T), whatever their stored format.
        std::vector<unsigned char> g = cuda_gain_payload(t, act);
        auto& wp = dweights[name];  // recorded before the upload: release() frees it on failure
        wp.first = api.alloc(g.size(), name.c_str());
        api.upload(wp.first, g.data(), g.size());
        continue;
      }
      auto& wp = dweights[name];
      wp.first = api.alloc(t.payload.size(), name.c_str());
      api.upload(wp.first, t.payload.data(), t.payload.size());
      if (t.scales.size()) {
        wp.second = api.alloc(t.scales.size(), name.c_str());
        api.upload(wp.second, t.scales.data(), t.scales.size());
      }
    }
  }

  void build(Program& prog, const Graph& g) {
    prog.graph = &g;
    prog.plan = graph_bindings(g);
    std::map<std::string, CuModule> modules;
    for (NodeId id : g.topo_order()) {
      CudaKernel k = emit_cuda_kernel(g, id);
      std::string key = k.entries[0].symbol;
      auto it = modules.find(key);
      if (it == modules.end()) {
        CudaBinary bin = nvrtc.compile(k.source, key, arch);
        compile_s += bin.compile_s;
        (bin.cached ? cached : compiled) += 1;
        for (const CudaFunctionInfo& f : bin.functions) info.push_back(f);
        it = modules.emplace(key, api.load_module(bin.cubin, key)).first;
      }
      Launch l;
      l.node = id;
      l.form = cost_form(g, g.node(id));
      l.name = k.node_name;
      l.layer = long(k.layer);
      l.zero_scratch = g.node(id).kind == OpKind::expert_matmul;
      for (const CudaEntry& e : k.entries) l.entries.push_back({api.function(it->second, e.symbol), e});
      l.kernel = k;
      l.kernel.source.clear();
      l.kernel.body.clear();
      scratch_bytes = std::max(scratch_bytes, k.scratch_bytes);
      counter_words = std::max(counter_words, k.counters);
      const Node& n = g.node(id);
      if (n.kind == OpKind::lm_head) prog.logits_offset = value_offset(g, n.outputs[0]);
      if (n.kind == OpKind::sample) prog.argmax_offset = value_offset(g, n.outputs[0]);
      KernelTiming t;
      t.node = id;
      t.name = k.node_name;
      t.label = k.label;
      t.phase = g.phase;
      l.timing = int(timings.size());
      timings.push_back(t);
      prog.launches.push_back(std::move(l));
    }
    arena_bytes = std::max(arena_bytes, g.attrs.i("arena_bytes", 0));
  }

  void allocate() {
    const Graph& g = plan.decode;
    int64_t L = g.attrs.i("layers"), kvh = g.attrs.i("kv_heads"), d = g.attrs.i("head_dim");
    int64_t vectors = seqs.paged() ? seqs.slots() * seqs.blocks_per_slot() * L * 2 * kvh * seqs.block()
                                   : L * 2 * seqs.slots() * seqs.capacity() * kvh;
    const Format& f = g.value(g.values_of(ValueKind::state).front()).format;
    kv = api.alloc(size_t(double(vectors) * double(d) * dtype_bits(f.dtype) / 8.0), "KV cache");
    if (f.has_scales()) kv_scales = api.alloc(size_t(vectors) * (f.dtype == DType::fp8_e4m3 ? 4 : 2), "KV scales");
    arena = api.alloc(size_t(arena_bytes), "activations");
    if (scratch_bytes) scratch = api.alloc(size_t(scratch_bytes), "kernel scratch");
    counters = api.alloc(size_t(std::max<int64_t>(counter_words, 1)) * 4, "counters");
    int64_t max_rows = std::max(plan.prefill.attrs.i("B") * plan.prefill.attrs.i("S"), seqs.slots());
    auto align = [](size_t v) { return (v + 255) / 256 * 256; };
    off_seqs = align(sizeof(CudaStepHost));
    off_row_seq = align(off_seqs + size_t(seqs.slots()) * sizeof(LatheSeq));
    off_row_pos = align(off_row_seq + size_t(max_rows) * 4);
    off_blocks = align(off_row_pos + size_t(max_rows) * 4);
    off_tokens = align(off_blocks + seqs.block_table().size() * 4 + 4);
    step_bytes = align(off_tokens + size_t(max_rows) * 4);
    stepbuf = api.alloc(step_bytes, "step");
  }

  void bind(Program& prog) {
    const Graph& g = *prog.graph;
    for (Launch& l : prog.launches) {
      std::vector<uint64_t> ptrs;
      for (const KernelBinding& kb : kernel_bindings(g, l.node)) {
        switch (cuda_binding(g, kb)) {
          case CudaBinding::weight: {
            const auto& wp = dweights.at(g.value(kb.value).name);
            ptrs.push_back(kb.scales ? wp.second : wp.first);
            break;
          }
          case CudaBinding::tokens: ptrs.push_back(stepbuf + off_tokens); break;
          case CudaBinding::kv_cache: ptrs.push_back(kv); break;
          case CudaBinding::arena: ptrs.push_back(arena + uint64_t(value_offset(g, kb.value))); break;
        }
      }
      l.bufs = api.alloc(std::max<size_t>(ptrs.size(), 1) * 8, "kernel arguments");
      api.upload(l.bufs, ptrs.data(), ptrs.size() * 8);
      if (l.kernel.blas.on() && api.blas_available()) {
        l.blas = true;
        l.x = ptrs.at(size_t(l.kernel.blas.x));
        if (l.kernel.blas.residual >= 0) l.res = ptrs.at(size_t(l.kernel.blas.residual));
        for (int i = 0; i < 4; ++i) {
          if (l.kernel.blas.w[i] >= 0) l.w[i] = ptrs.at(size_t(l.kernel.blas.w[i]));
          if (l.kernel.blas.out[i] >= 0) l.out[i] = ptrs.at(size_t(l.kernel.blas.out[i]));
        }
      }
    }
  }

  // Launches entry `en` of launch `l` with the grid its kind gives for this step.
  void launch_entry(const Entry& en, const Launch& l, int rows, int n_seq, const StepPlan& sp) {
    const CudaEntry& s = en.spec;
    auto cdiv = [](int64_t a, int64_t b) { return unsigned((a + b - 1) / b); };
    unsigned gx = 1, gy = 1, gz = 1;
    switch (s.grid) {
      case CudaGrid::warps: gx = cdiv(s.p0, s.block / 32); break;
      case CudaGrid::gemm_tiles: gx = unsigned(s.p0), gy = cdiv(s.p1 == 1 ? n_seq : rows, 64); break;
      case CudaGrid::expert_tiles: gx = unsigned(s.p0), gy = cdiv(int64_t(rows) * s.p2, 64), gz = unsigned(s.p1); break;
      case CudaGrid::rows: gx = unsigned(rows); break;
      case CudaGrid::seq_x: gx = unsigned(n_seq * s.p0); break;
      case CudaGrid::flash: gx = unsigned(n_seq * s.p0) * cdiv(sp.max_len, s.p1 > 0 ? s.p1 : 32); break;
      case CudaGrid::rows_x: gx = unsigned(rows) * unsigned(s.p0); break;
      case CudaGrid::decode_splits: gx = unsigned(n_seq * s.p0 * s.p1); break;
      case CudaGrid::elements: gx = unsigned(std::min<int64_t>(65535, cdiv(int64_t(rows) * s.p0, s.block))); break;
      case CudaGrid::seqs: gx = unsigned(n_seq); break;
    }
    CuDevicePtr st = stepbuf, bufs = l.bufs;
    long layer = l.layer;
    void* params[] = {&st, &bufs, &layer};
    api.launch(en.fn, std::max(gx, 1u), gy, gz, unsigned(s.block), stream, params, l.name);
  }

  // Prefill through cuBLAS: the norm entry into scratch, one GEMM per weight, then the
  // residual (beta = 1 over a copy of it) or the SiLU x up entry.
  void launch_blas(const Launch& l, int rows, int n_seq, const StepPlan& sp, bool bf16) {
    const CudaBlasPlan& b = l.kernel.blas;
    if (b.dequant_entry >= 0) launch_entry(l.entries[size_t(b.dequant_entry)], l, rows, n_seq, sp);
    if (b.norm_entry >= 0) launch_entry(l.entries[size_t(b.norm_entry)], l, rows, n_seq, sp);
    if (b.epilogue == 1) api.copy_d2d(l.out[0], l.res, size_t(rows) * size_t(b.n[0]) * 2, stream);
    blas_gemms(l, rows, bf16);
    if (b.epilogue == 2) launch_entry(l.entries[size_t(b.silu_entry)], l, rows, n_seq, sp);
  }

  void launch(const Launch& l, const StepPlan& sp, bool& bf16) {
    const int rows = int(sp.tokens.size()), n_seq = int(sp.seqs.size());
    const CudaKernel& k = l.kernel;
    if (k.counters) api.memset32(counters, 0, size_t(k.counters), stream);
    if (l.zero_scratch && k.scratch_bytes) api.memset32(scratch, 0, size_t(k.scratch_bytes / 4), stream);
    const int e = cuda_step_entry(k, rows, n_seq, l.blas);
    if (e == kCudaBlasRoute) {
      launch_blas(l, rows, n_seq, sp, bf16);
      return;
    }
    launch_entry(l.entries[size_t(e)], l, rows, n_seq, sp);
  }

  StepResult run(Program& prog, const std::vector<std::vector<int32_t>>& new_tokens, bool fresh) {
    const Graph& g = *prog.graph;
    const int64_t vocab = g.attrs.i("vocab");
    StepPlan sp = seqs.begin(new_tokens, fresh, prog.plan.S, vocab);
    const int n_seq = int(sp.seqs.size()), rows = int(sp.tokens.size());
    // One upload carries the step: header, sequences, rows, block table, tokens.
    std::vector<unsigned char> host(step_bytes, 0);
    CudaStepHost h{n_seq, rows, int(seqs.blocks_per_slot()), int(sp.max_len), stepbuf + off_seqs,
                   stepbuf + off_row_seq, stepbuf + off_row_pos, stepbuf + off_blocks, kv, kv_scales, scratch, counters};
    std::memcpy(host.data(), &h, sizeof h);
    std::memcpy(host.data() + off_seqs, sp.seqs.data(), sp.seqs.size() * sizeof(LatheSeq));
    std::memcpy(host.data() + off_row_seq, sp.row_seq.data(), sp.row_seq.size() * 4);
    std::memcpy(host.data() + off_row_pos, sp.row_pos.data(), sp.row_pos.size() * 4);
    std::memcpy(host.data() + off_blocks, seqs.block_table().data(), seqs.block_table().size() * 4);
    std::memcpy(host.data() + off_tokens, sp.tokens.data(), sp.tokens.size() * 4);
    api.upload(stepbuf, host.data(), host.size(), stream);
    bool bf16 = g.attrs.s("act_dtype") == "bf16";
    StepResult r;
    auto t0 = std::chrono::steady_clock::now();
    const bool use_graph = opts.graphs && !opts.time_kernels && g.phase == Phase::decode;
    if (use_graph) {
      if (prog.graph_exec && prog.graph_seqs != n_seq) {
        api.graph_destroy(prog.graph_exec);
        prog.graph_exec = nullptr;
      }
      if (!prog.graph_exec) {
        api.begin_capture(stream);
        for (const Launch& l : prog.launches) launch(l, sp, bf16);
        prog.graph_exec = api.end_capture(stream);
        prog.graph_seqs = n_seq;
      }
      api.graph_launch(prog.graph_exec, stream);
    } else if (opts.time_kernels) {
      while (ev_begin.size() < prog.launches.size()) ev_begin.push_back(api.event()), ev_end.push_back(api.event());
      for (size_t i = 0; i < prog.launches.size(); ++i) {
        api.record(ev_begin[i], stream);
        launch(prog.launches[i], sp, bf16);
        api.record(ev_end[i], stream);
      }
    } else {
      for (const Launch& l : prog.launches) launch(l, sp, bf16);
    }
    api.sync(stream);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Predictions are made after the step, outside the time it measures.
    Bindings bind = sp.bindings();
    for (const Launch& l : prog.launches) {
      NodeCost c = cost_node(l.form, plan.target, bind);
      KernelTiming& kt = timings[size_t(l.timing)];
      kt.predicted_s += c.time_s;
      kt.flops += c.flops;
      kt.bytes += c.bytes;
      kt.calls += 1;
      r.predicted_s += c.time_s;
    }
    if (opts.time_kernels)
      for (size_t i = 0; i < prog.launches.size(); ++i)
        timings[size_t(prog.launches[i].timing)].measured_s += api.elapsed_ms(ev_begin[i], ev_end[i]) / 1e3;
    seqs.commit(sp);
    std::vector<float> logits(size_t(n_seq * vocab));
    api.download(logits.data(), arena + uint64_t(prog.logits_offset), logits.size() * 4);
    for (int s = 0; s < n_seq; ++s) r.logits.emplace_back(logits.begin() + s * vocab, logits.begin() + (s + 1) * vocab);
    if (prog.argmax_offset >= 0) {
      r.argmax.resize(size_t(n_seq));
      api.download(r.argmax.data(), arena + uint64_t(prog.argmax_offset), size_t(n_seq) * 4);
    }
    return r;
  }
};

CudaSession::CudaSession(const Plan& plan, const WeightStore& weights, CudaSessionOptions o)
    : impl_(std::make_unique<Impl>(plan, weights, o)) {}
CudaSession::~CudaSession() = default;
StepResult CudaSession::prefill(const std::vector<std::vector<int32_t>>& prompts) {
  return impl_->run(impl_->prefill, prompts, true);
}
StepResult CudaSession::decode(const std::vector<int32_t>& tokens) {
  std::vector<std::vector<int32_t>> t;
  for (int32_t x : tokens) t.push_back({x});
  return impl_->run(impl_->decode, t, false);
}
const std::vector<KernelTiming>& CudaSession::timings() const { return impl_->timings; }
void CudaSession::reset_timings() {
  for (KernelTiming& t : impl_->timings) {
    t.measured_s = t.predicted_s = t.flops = t.bytes = 0;
    t.calls = 0;
  }
}
std::string CudaSession::device_name() const { return impl_->api.device().name; }
int CudaSession::device_arch() const { return impl_->arch; }
double CudaSession::compile_s() const { return impl_->compile_s; }
int CudaSession::kernels_compiled() const { return impl_->compiled; }
int CudaSession::kernels_cached() const { return impl_->cached; }
const std::vector<CudaFunctionInfo>& CudaSession::kernel_info() const { return impl_->info; }

}  // namespace lathe
