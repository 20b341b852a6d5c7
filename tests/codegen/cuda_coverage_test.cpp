// Every CUDA kernel that a built-in model x supported option combination can produce
// compiles with NVRTC for sm_80 and sm_90 with zero register spills.
//
// Models: the built-ins and a fixture with RoPE scaling. The combinations: activations
// bf16 and f16; fusion passes on and off; every weight
// format (with the default KV cache); every KV dtype in every KV layout (with the
// model's weights); batch 1 and 8 at a short and a long context (decode attention's
// split count depends on the cache capacity). Kernels are deduplicated by their symbol
// (a hash of the specialized code), so identical layers and options that do not change
// a kernel are compiled once. fp8 kernels are compiled for sm_90 only: plans reject
// fp8 on targets older than sm_89.
//
// Plus every candidate `lathe tune --backend cuda` may time (codegen/tuning.h: GEMV
// warps and loads in flight, decode attention splits) for tiny, tiny-moe, the
// wide-rows fixture (the GPU tests' tuned plans), llama-3-8b, mixtral-8x7b and
// llama-3-70b in 16-bit, 8-bit and 4-bit weights (and fp8 for llama-3-8b), bf16
// activations, and f16 activations for tiny, tiny-moe, the fixture and llama-3-8b: a
// tuned kernel must compile without spills like a default one.
//
// Skips (with the reason) when NVRTC or the CUDA headers are not available. NVRTC
// results are cached by content hash in the build tree, so a rerun only compiles what
// changed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <algorithm>
#include <map>
#include <filesystem>
#include <fstream>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "codegen/cuda/emit_cuda.h"
#include "codegen/cuda/nvrtc.h"
#include "codegen/tuning.h"
#include "ir/assert.h"
#include "support/plans.h"

namespace lathe {
namespace {

struct Job {
  std::string source, label, where;
  std::vector<std::string> symbols;  // entry points
  bool fp8 = false;
};

NvrtcOptions test_nvrtc_options() {
  NvrtcOptions o;
  o.cache_dir = LATHE_TEST_CACHE_DIR "/cuda";
  return o;
}

// Adds a kernel unless one with its symbol is there already.
void add_job(std::map<std::string, Job>& jobs, const CudaKernel& k, const std::string& where) {
  auto [it, fresh] = jobs.try_emplace(k.entries.at(0).symbol);
  if (!fresh) return;
  it->second.source = k.source;
  it->second.label = k.label;
  it->second.fp8 = k.fp8;
  for (const CudaEntry& e : k.entries) it->second.symbols.push_back(e.symbol);
  it->second.where = where;
}

// Adds the kernels of one lowered plan, keyed by symbol.
void collect(const std::string& model, const std::string& what, const Workload& w, const PlanOptions& o,
             std::map<std::string, Job>& jobs, int& plans, int& rejected, std::vector<std::string>& failures) {
  // Combinations the planner rejects (int4:g128 on a 192-long reduction) are not
  // supported plans; count them. A plan that lowers must emit.
  Lowered l;
  try {
    testing::Built b = testing::build_plan_graphs(model, "h100-sxm", w, o);
    l = testing::lower_plan(b, o);
  } catch (const Error&) {
    ++rejected;
    return;
  }
  ++plans;
  for (const Graph* g : {&l.prefill, &l.decode}) {
    std::vector<CudaKernel> ks;
    try {
      ks = emit_cuda_kernels(*g);
    } catch (const Error& e) {
      failures.push_back(model + " " + what + ": " + e.what());
      continue;
    }
    for (const CudaKernel& k : ks)
      add_job(jobs, k, model + " " + what + " " + std::string(phase_name(g->phase)) + "/" + k.node_name);
  }
}

// Adds the kernels of every CUDA tuning candidate of one plan's tunable nodes (one
// node per key: the others differ only in their layer).
void collect_tuned(const std::string& model, const std::string& what, const Workload& w, const PlanOptions& o,
                   std::map<std::string, Job>& jobs, int& candidates, std::vector<std::string>& failures) {
  Lowered l = testing::lower_plan(testing::build_plan_graphs(model, "h100-sxm", w, o), o);
  for (const Graph* g : {&l.prefill, &l.decode}) {
    std::map<std::pair<std::string, std::string>, NodeId> first;  // (kind, shape) -> node
    for (NodeId id : g->topo_order())
      if (auto k = tuning_key(*g, id, "cuda")) first.try_emplace({k->kind, k->shape}, id);
    for (const auto& [key, id] : first) {
      const auto& [kind, shape] = key;
      for (const auto& params : tuning_candidates(kind, "cuda", shape)) {
        if (params.empty()) continue;  // the default is in the main matrix
        Graph tuned = *g;
        apply_params(tuned, kind, shape, params, "cuda");
        ++candidates;
        std::string where = model + " " + what + " " + std::string(phase_name(g->phase)) + "/" + g->node(id).name;
        for (const auto& [p, v] : params) where += " " + p + "=" + std::to_string(v);
        try {
          add_job(jobs, emit_cuda_kernel(tuned, id), where);
        } catch (const Error& e) {
          failures.push_back(where + ": " + e.what());
        }
      }
    }
  }
}

// A cache entry whose bytes changed (a flipped byte in the cubin would load and run) is
// compiled again and rewritten; an intact one is read back as it was written.
TEST(NvrtcCache, AChangedEntryIsCompiledAgain) {
  std::string dir = (std::filesystem::temp_directory_path() / "lathe-nvrtc-cache-XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  struct Cleanup {
    std::string d;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  } cleanup{dir};
  NvrtcOptions o;
  o.cache_dir = dir;
  Nvrtc nvrtc(o);
  if (!nvrtc.available()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.why_unavailable();
  const std::string src = "extern \"C\" __global__ void cache_probe(int* x) { *x = 0x1234567; }\n";
  const CudaBinary first = nvrtc.compile(src, "cache_probe", 80);
  ASSERT_FALSE(first.cached);
  ASSERT_FALSE(first.cubin.empty());
  const CudaBinary again = nvrtc.compile(src, "cache_probe", 80);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.cubin, first.cubin);
  EXPECT_EQ(again.ptx, first.ptx);
  std::filesystem::path cubin;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".cubin") cubin = e.path();
  ASSERT_FALSE(cubin.empty());
  {
    std::fstream f(cubin, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::streamoff(first.cubin.size() / 2));
    char c = 0;
    f.read(&c, 1);
    f.seekp(std::streamoff(first.cubin.size() / 2));
    c = char(c ^ 0x5a);
    f.write(&c, 1);
  }
  const CudaBinary changed = nvrtc.compile(src, "cache_probe", 80);
  EXPECT_FALSE(changed.cached);
  EXPECT_EQ(changed.cubin, first.cubin);
  const CudaBinary rewritten = nvrtc.compile(src, "cache_probe", 80);
  EXPECT_TRUE(rewritten.cached);
  EXPECT_EQ(rewritten.cubin, first.cubin);
}

TEST(CudaCoverage, EveryKernelCompilesForSm80AndSm90WithoutSpills) {
  {
    Nvrtc probe(test_nvrtc_options());
    if (!probe.available()) GTEST_SKIP() << "NVRTC not available: " << probe.why_unavailable();
    auto archs = probe.supported_archs();
    for (int a : {80, 90})
      if (std::find(archs.begin(), archs.end(), a) == archs.end())
        GTEST_SKIP() << "NVRTC " << probe.version() << " cannot target sm_" << a;
  }
  // tests/fixtures/rope-llama3.toml is tiny with llama3 RoPE scaling: its RoPE kernels
  // carry a divisor table (the rest dedupes with tiny's).
  const std::string rope_fixture = std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/rope-llama3.toml";
  const char* models[] = {"tiny", "tiny-moe", "small", "tinyllama-1.1b", "llama-2-7b",
                          "llama-3-8b", "mistral-7b", "mixtral-8x7b", "llama-3-70b", rope_fixture.c_str()};
  const char* weights[] = {"", "f16", "bf16", "fp8", "int8", "int8:g32", "int4:g32", "int4:g64", "int4:g128"};
  const char* kvs[] = {"", "f16", "bf16", "fp8", "int8", "int4"};
  const char* layouts[] = {"LHTD", "LTHD", "TLHD", "paged:16"};
  const Workload workloads[] = {{1, 128, 32}, {8, 4096, 512}};
  const char* fusion_passes[] = {"fuse-qkv", "fuse-gate-up", "fuse-norm-matmul", "fuse-epilogue",
                                 "fuse-rope-kvwrite", "flash-attention", "fuse-moe"};

  std::map<std::string, Job> jobs;
  std::vector<std::string> failures;
  int plans = 0, rejected = 0;
  for (const char* model : models)
    for (DType act : {DType::bf16, DType::f16})
      for (bool fused : {true, false}) {
        auto base = [&] {
          PlanOptions o;
          o.act_dtype = act;
          if (!fused)
            for (const char* p : fusion_passes) o.pass_enabled[p] = false;
          return o;
        };
        std::string what = std::string(dtype_name(act)) + (fused ? " fused" : " unfused");
        // The big models at one workload: their kernels differ from the small ones only
        // in constants, and they dominate the count.
        size_t nw = std::string(model).find("tiny") == 0 ? 2 : 1;
        for (size_t wi = 0; wi < nw; ++wi) {
          for (const char* wf : weights) {
            PlanOptions o = base();
            if (*wf) o.weights = parse_weight_format(wf);
            collect(model, what + " weights " + (*wf ? wf : "default"), workloads[wi], o, jobs, plans, rejected, failures);
          }
          for (const char* kv : kvs)
            for (const char* lay : layouts) {
              PlanOptions o = base();
              if (*kv) o.kv_dtype = parse_kv_dtype(kv);
              o.kv_layout = parse_kv_layout(lay);
              collect(model, what + " kv " + (*kv ? kv : "default") + " " + lay, workloads[wi], o, jobs, plans, rejected, failures);
            }
        }
      }
  // Tuning candidates (kernels already in the matrix dedupe by symbol).
  int candidates = 0;
  const size_t before_tuned = jobs.size();
  struct TunedCase {
    const char* model;
    DType act;
    std::vector<const char*> weights;
  };
  const std::string wide_fixture = std::string(LATHE_SOURCE_DIR) + "/tests/fixtures/wide-rows.toml";
  for (const TunedCase& tc : {TunedCase{"tiny", DType::bf16, {"", "int8", "int4:g32"}},
                              TunedCase{"tiny", DType::f16, {"", "int8", "int4:g32"}},
                              TunedCase{"tiny-moe", DType::bf16, {"", "int4:g32"}},
                              TunedCase{"tiny-moe", DType::f16, {"int8"}},
                              TunedCase{wide_fixture.c_str(), DType::bf16, {"bf16", "int4:g32"}},
                              TunedCase{wide_fixture.c_str(), DType::f16, {"f16", "int4:g32"}},
                              TunedCase{"llama-3-8b", DType::bf16, {"", "int8", "int4:g128", "fp8"}},
                              TunedCase{"llama-3-8b", DType::f16, {"f16", "int4:g128"}},
                              TunedCase{"mixtral-8x7b", DType::bf16, {"", "int4:g128"}},
                              TunedCase{"llama-3-70b", DType::bf16, {"", "int8", "int4:g128"}}})
    for (const char* wf : tc.weights) {
      PlanOptions o;
      o.act_dtype = tc.act;
      if (*wf) o.weights = parse_weight_format(wf);
      collect_tuned(tc.model, std::string(dtype_name(tc.act)) + " tuned weights " + (*wf ? wf : "default"),
                    workloads[0], o, jobs, candidates, failures);
    }
  const size_t tuned_kernels = jobs.size() - before_tuned;
  EXPECT_GT(tuned_kernels, 50u) << "the tuning candidates should add kernels of their own";
  if (std::getenv("LATHE_COVERAGE_COUNT")) {
    std::printf("tuning: %d candidates, %zu new kernels\n", candidates, tuned_kernels);
    std::map<std::string, int> per_model;
    for (const auto& [sym, j] : jobs) per_model[j.where.substr(0, j.where.find(' '))]++;
    for (const auto& [m, n] : per_model) std::printf("%s: %d kernels\n", m.c_str(), n);
    std::printf("%d plans, %zu kernels\n", plans, jobs.size());
    return;
  }
  // Batches of kernels share one translation unit (one parse of the prelude and the
  // CUDA headers); ptxas still compiles and reports every function separately, so
  // registers and spills are per kernel as in the runtime's one-kernel programs. A
  // batch that fails to compile is retried kernel by kernel to name the culprit.
  struct Batch {
    std::vector<const Job*> jobs;
    int arch;
    bool fp8;
  };
  std::vector<Batch> batches;
  size_t n_kernels = jobs.size(), n_compilations = 0;
  for (int arch : {80, 90})
    for (bool fp8 : {false, true}) {
      if (fp8 && arch < 89) continue;
      Batch b{{}, arch, fp8};
      for (const auto& [sym, j] : jobs) {
        if (j.fp8 != fp8) continue;
        b.jobs.push_back(&j);
        ++n_compilations;
        if (b.jobs.size() == 24) batches.push_back(b), b.jobs.clear();
      }
      if (!b.jobs.empty()) batches.push_back(b);
    }
  const std::string marker = "\n// ---------------------------------------------------------------- kernel\n";
  auto kernel_part = [&](const Job* j) { return j->source.substr(j->source.find(marker)); };
  const std::string prelude(cuda_prelude_text());
  // NVRTC serializes compilations within one process, so the batches are shared
  // out to forked worker processes; each writes its tallies and failures to a file.
  int compiled = 0, cached = 0, max_regs = 0;
  size_t functions_seen = 0, functions_expected = 0;
  auto check = [&](const std::vector<const Job*>& js, int arch, const CudaBinary& b, std::vector<std::string>& fails) {
    std::map<std::string, const Job*> by_base;
    for (const Job* j : js) by_base[j->symbols.at(0).substr(0, 18)] = j;
    (b.cached ? cached : compiled)++;
    max_regs = std::max(max_regs, b.registers);
    for (const Job* j : js) functions_expected += j->symbols.size();
    if (b.cubin.empty()) fails.push_back("sm_" + std::to_string(arch) + " batch: no cubin");
    for (const CudaFunctionInfo& f : b.functions) {
      auto it = by_base.find(f.name.substr(0, 18));
      if (it == by_base.end()) continue;
      ++functions_seen;
      if (f.spill_stores > 0 || f.spill_loads > 0)
        fails.push_back(it->second->where + " (sm_" + std::to_string(arch) + "): " + f.name + " spills " +
                        std::to_string(f.spill_stores) + " B stores / " + std::to_string(f.spill_loads) + " B loads");
    }
  };
  auto work = [&](size_t worker, size_t workers, const std::string& out_path) {
    Nvrtc nvrtc(test_nvrtc_options());
    std::vector<std::string> fails;
    for (size_t i = worker; i < batches.size(); i += workers) {
      const Batch& bt = batches[i];
      std::string src = (bt.fp8 ? "#define LATHE_FP8 1\n" : "") + prelude;
      for (const Job* j : bt.jobs) src += kernel_part(j);
      try {
        check(bt.jobs, bt.arch, nvrtc.compile(src, "coverage_batch", bt.arch), fails);
        continue;
      } catch (const Error&) {
      }
      for (const Job* j : bt.jobs) {
        try {
          check({j}, bt.arch, nvrtc.compile(j->source, j->label, bt.arch), fails);
        } catch (const Error& e) {
          fails.push_back(j->where + " (sm_" + std::to_string(bt.arch) + "): " + std::string(e.what()).substr(0, 2000));
        }
      }
    }
    std::FILE* f = std::fopen(out_path.c_str(), "w");
    if (!f) return;
    std::fprintf(f, "%d %d %d %zu %zu\n", compiled, cached, max_regs, functions_seen, functions_expected);
    for (std::string x : fails) {
      std::replace(x.begin(), x.end(), '\n', '\x1f');
      std::fprintf(f, "%s\n", x.c_str());
    }
    std::fclose(f);
  };
  const size_t workers = std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
  std::string dir = std::filesystem::temp_directory_path() / ("lathe-coverage-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<pid_t> pids;
  for (size_t w = 0; w < workers; ++w) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) {
      work(w, workers, dir + "/" + std::to_string(w));
      std::_Exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a compile worker died (status " << status << ")";
  }
  for (size_t w = 0; w < workers; ++w) {
    std::ifstream in(dir + "/" + std::to_string(w));
    int c = 0, k = 0, r = 0;
    size_t seen = 0, expected = 0;
    ASSERT_TRUE(in >> c >> k >> r >> seen >> expected) << "worker " << w << " wrote no results";
    compiled += c, cached += k, max_regs = std::max(max_regs, r), functions_seen += seen, functions_expected += expected;
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::replace(line.begin(), line.end(), '\x1f', '\n');
      failures.push_back(line);
    }
  }
  std::filesystem::remove_all(dir);
  std::printf("%d plans (%d combinations rejected by the planner), %zu distinct kernels, %zu kernel compilations "
              "in %zu NVRTC programs (%d compiled, %d from cache), %zu of %zu entry points reported by ptxas, "
              "max %d registers\n",
              plans, rejected, n_kernels, n_compilations, batches.size(), compiled, cached, functions_seen,
              functions_expected, max_regs);
  EXPECT_EQ(functions_seen, functions_expected) << "ptxas did not report every entry point";
  EXPECT_GT(n_kernels, 100u) << "the matrix should reach many distinct kernels";
  for (const auto& f : failures) ADD_FAILURE() << f;
}

}  // namespace
}  // namespace lathe
