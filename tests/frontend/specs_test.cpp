#include "frontend/specs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "ir/assert.h"

namespace lathe {
namespace {

// The error a model spec gives, or "" when it parses.
std::string model_error(const std::string& body) {
  try {
    parse_model_toml(body, "m.toml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* kGood =
    "[model]\nname = \"m\"\nhidden = 256\nlayers = 2\nheads = 4\nkv_heads = 2\nffn = 512\nvocab = 100\n";

TEST(Specs, GoodModelParses) {
  EXPECT_EQ(model_error(kGood), "");
  ModelSpec m = parse_model_toml(kGood, "m.toml");
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.kv_heads, 2);
}

TEST(Specs, EveryErrorNamesFileLineColumnAndKey) {
  struct Case {
    std::string body, want;
  };
  std::vector<Case> cases = {
      // unknown key with a did-you-mean
      {std::string(kGood) + "rope_thetaa = 1.0\n", "model.rope_thetaa: unknown key (did you mean 'rope_theta'?)"},
      // wrong type
      {std::string(kGood) + "norm_eps = \"small\"\n", "model.norm_eps: expected a number, got a string"},
      // out of range
      {"[model]\nname = \"m\"\nhidden = 256\nlayers = -3\nheads = 4\nffn = 5\nvocab = 5\n", "model.layers: expected an integer in [1,"},
      // heads not dividing hidden
      {"[model]\nname = \"m\"\nhidden = 250\nlayers = 2\nheads = 4\nffn = 5\nvocab = 5\n", "heads (4) must divide hidden (250)"},
      // kv_heads not dividing heads
      {"[model]\nname = \"m\"\nhidden = 256\nlayers = 2\nheads = 4\nkv_heads = 3\nffn = 5\nvocab = 5\n", "kv_heads (3) must divide heads (4)"},
      // top_k > experts
      {"[model]\nname = \"m\"\nhidden = 256\nlayers = 2\nheads = 4\nvocab = 5\n[model.moe]\nexperts = 2\ntop_k = 3\nexpert_ffn = 8\n", "top_k (3) exceeds experts (2)"},
      // RoPE scaling: unknown type, missing factor, llama3 without its original context
      // or with high_freq_factor <= low_freq_factor
      {std::string(kGood) + "[model.rope_scaling]\ntype = \"yarn\"\nfactor = 4.0\n",
       "model.rope_scaling.type: expected \"linear\" or \"llama3\", got \"yarn\""},
      {std::string(kGood) + "[model.rope_scaling]\ntype = \"linear\"\n", "missing required key 'factor'"},
      {std::string(kGood) + "[model.rope_scaling]\ntype = \"llama3\"\nfactor = 8.0\n",
       "missing required key 'original_max_context'"},
      {std::string(kGood) +
           "[model.rope_scaling]\ntype = \"llama3\"\nfactor = 8.0\nlow_freq_factor = 4.0\nhigh_freq_factor = "
           "1.0\noriginal_max_context = 8192\n",
       "must exceed low_freq_factor"},
      {std::string(kGood) + "[model.rope_scaling]\ntype = \"linear\"\nfactor = -2.0\n", "model.rope_scaling.factor"},
      // TOML syntax error
      {"[model\nname = 1\n", "TOML syntax error"},
      // wrong top-level table
      {"[modle]\nname = \"m\"\n", "expected a [model] table"},
  };
  std::regex located(R"(^m\.toml:\d+:\d+: )");
  for (const Case& c : cases) {
    std::string e = model_error(c.body);
    EXPECT_NE(e.find(c.want), std::string::npos) << "want '" << c.want << "' in: " << e;
    EXPECT_TRUE(std::regex_search(e, located)) << e;
  }
}

// A dotted key of 40,000 components (80 KB) overflowed the stack inside toml++'s
// parser (SIGSEGV); chains deeper than 64 are refused first, with their place. Dots in
// strings, comments, floats and dates are not key components.
TEST(Specs, DeepDottedKeysAreRefusedNotACrash) {
  std::string deep = "a";
  for (int i = 0; i < 40000; ++i) deep += ".a";
  for (const std::string& body : {deep + " = 1\n", "[" + deep + "]\n", std::string(kGood) + "x = { " + deep + " = 1 }\n"}) {
    std::string e = model_error(body);
    EXPECT_NE(e.find("TOML key nested deeper than 64 levels"), std::string::npos) << e.substr(0, 200);
    EXPECT_EQ(e.rfind("m.toml:", 0), 0u) << e.substr(0, 200);
  }
  // The place is the chain's, past strings whose lines end in backslashes.
  std::string placed = "d = \"\"\"x \\\n y \\\n\"\"\"\ne = 'C:\\dir\\' # \"\n" + deep + " = 1\n";
  EXPECT_EQ(model_error(placed).rfind("m.toml:5:128: TOML key nested", 0), 0u) << model_error(placed).substr(0, 200);
  std::string quoted = "\"k\"";
  for (int i = 0; i < 70; ++i) quoted += " . \"k\"";
  EXPECT_NE(model_error(quoted + " = 1\n").find("nested deeper"), std::string::npos);
  std::string floats = "[";
  for (int i = 0; i < 200; ++i) floats += std::to_string(i) + ".5, ";
  floats += "1.5]";
  std::string fine = std::string(kGood) + "[extra]\nf = " + floats + "\ns = \"" + std::string(100, '.') +
                     "\"\nm = \"\"\"\n" + std::string(100, '.') + "\n\"\"\"\nt = 1979-05-27T07:32:00.999 # " +
                     std::string(100, '.') + "\n";
  EXPECT_EQ(model_error(fine).find("nested deeper"), std::string::npos) << model_error(fine);
}

// Llama 3.1's rule: pairs whose wavelength exceeds original / low_freq_factor turn
// factor times slower, pairs below original / high_freq_factor are unchanged, the band
// between blends (transformers' _compute_llama3_parameters); linear divides every one.
TEST(Specs, RopeScalingDivisors) {
  ModelSpec m = parse_model_toml(std::string(kGood) +
                                     "[model.rope_scaling]\ntype = \"llama3\"\nfactor = 8.0\nlow_freq_factor = "
                                     "1.0\nhigh_freq_factor = 4.0\noriginal_max_context = 8192\n",
                                 "m.toml");
  ASSERT_TRUE(m.rope_scaling.has_value());
  m.rope_theta = 500000.0;
  m.head_dim = 128;  // Llama 3.1 8B
  std::vector<double> d = rope_divisors(*m.rope_scaling, m.rope_theta, m.head_dim);
  ASSERT_EQ(d.size(), 64u);
  for (size_t i = 0; i < d.size(); ++i) {
    double wavelen = 2 * M_PI * std::pow(500000.0, 2.0 * double(i) / 128.0);
    if (wavelen < 8192 / 4.0) EXPECT_EQ(d[i], 1.0) << i;
    else if (wavelen > 8192 / 1.0) EXPECT_EQ(d[i], 8.0) << i;
    else {
      double smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0);
      EXPECT_NEAR(d[i], 1.0 / ((1 - smooth) / 8.0 + smooth), 1e-12) << i;
    }
  }
  EXPECT_EQ(d[0], 1.0);
  EXPECT_EQ(d[63], 8.0);
  RopeScaling lin;
  lin.type = "linear";
  lin.factor = 2.5;
  for (double v : rope_divisors(lin, 10000.0, 64)) EXPECT_EQ(v, 2.5);
}

TEST(Specs, MissingRequiredKey) {
  std::string e = model_error("[model]\nname = \"m\"\nlayers = 2\nheads = 4\nffn = 5\nvocab = 5\n");
  EXPECT_NE(e.find("missing required key 'hidden'"), std::string::npos) << e;
  // A misspelling of the missing key is pointed at.
  e = model_error("[model]\nname = \"m\"\nhiden = 2\nlayers = 2\nheads = 4\nffn = 5\nvocab = 5\n");
  EXPECT_NE(e.find("m.toml:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'hidden'"), std::string::npos) << e;
}

TEST(Specs, ErrorLineIsTheOffendingLine) {
  std::string e = model_error("[model]\nname = \"m\"\nhidden = 4096\nlayers = -3\nheads = 7\n");
  EXPECT_EQ(e.rfind("m.toml:4:", 0), 0u) << e;
}

TEST(Specs, HardwareErrors) {
  auto err = [](const std::string& body) {
    try {
      parse_target_toml(body, "h.toml");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string base = "[hardware]\nname = \"g\"\nkind = \"gpu\"\ncompute_capability = \"8.0\"\nsm_count = 10\n"
                     "memory_gb = 16\nhbm_bandwidth_gbs = 500\n[hardware.peak_tflops]\nfp32 = 10\nbf16 = 100\n";
  EXPECT_EQ(err(base), "");
  EXPECT_NE(err(base + "bf61 = 3\n").find("hardware.peak_tflops.bf61: unknown key (did you mean 'bf16'?)"),
            std::string::npos);
  EXPECT_NE(err("[hardware]\nname = \"g\"\nkind = \"tpu\"\n").find("expected \"gpu\" or \"cpu\""), std::string::npos);
  std::string no_bw = base;
  no_bw.replace(no_bw.find("hbm_bandwidth_gbs = 500"), 23, "hbm_bandwidth_gbs = -1");
  EXPECT_NE(err(no_bw).find("hbm_bandwidth_gbs: expected a number in [0.001,"), std::string::npos) << err(no_bw);
  // A bandwidth or peak so small that times overflow is out of range; 0 is "missing".
  std::string tiny_bw = base;
  tiny_bw.replace(tiny_bw.find("hbm_bandwidth_gbs = 500"), 23, "hbm_bandwidth_gbs = 1e-300");
  EXPECT_NE(err(tiny_bw).find("hbm_bandwidth_gbs: expected a number in [0.001,"), std::string::npos)
      << err(tiny_bw);
  EXPECT_NE(err(base + "fp16 = 1e-300\n").find("peak_tflops.fp16: expected 0 or a number"), std::string::npos);
  std::string frac = base;
  frac.replace(frac.find("sm_count = 10"), 13, "sm_count = 0.5");
  EXPECT_NE(err(frac).find("sm_count must be a whole number"), std::string::npos) << err(frac);
  EXPECT_NE(err(base + "[hardware.efficiency]\ngemm = 3\n").find("efficiency.gemm"), std::string::npos);
  // A zero GEMM tile divided the tile count by zero (a TTFT of hours); the TOML and
  // --set ranges are the same.
  std::string tile0 = base;
  tile0.insert(tile0.find("[hardware.peak_tflops]"), "gemm_tile_m = 0\n");
  EXPECT_NE(err(tile0).find("gemm_tile_m: expected a number in [1,"), std::string::npos) << err(tile0);
  std::string exp0 = base;
  exp0.insert(exp0.find("[hardware.peak_tflops]"), "roofline_exponent = 0.5\n");
  EXPECT_NE(err(exp0).find("roofline_exponent"), std::string::npos) << err(exp0);
  // The integer GEMV efficiencies: 0 ("the GEMMs' factor") or a fraction like the others.
  EXPECT_EQ(err(base + "[hardware.efficiency]\nint8_dot_gemv = 0\nint_dot_gemv = 0.2\n"), "");
  EXPECT_NE(err(base + "[hardware.efficiency]\nint8_dot_gemv = 1e-6\n").find("expected 0 or a number in [0.001, 1.5]"),
            std::string::npos)
      << err(base + "[hardware.efficiency]\nint8_dot_gemv = 1e-6\n");
}

TEST(Specs, PlanFiles) {
  PlanSpec p = parse_plan_toml(
      "[plan]\nmodel = \"llama-3-8b\"\nweights = \"int4:g64\"\nkv = \"int8\"\nkv_layout = \"paged:32\"\n"
      "[plan.workload]\nbatch = 4\nprompt = 100\ngen = 7\n[plan.passes]\nfuse-qkv = false\n",
      "p.toml");
  EXPECT_EQ(p.options.weights->group, 64);
  EXPECT_EQ(*p.options.kv_dtype, DType::int8);
  EXPECT_EQ(p.options.kv_layout->block, 32);
  EXPECT_EQ(p.workload.batch, 4);
  EXPECT_FALSE(p.options.pass_on("fuse-qkv"));
  EXPECT_TRUE(p.options.pass_on("fuse-gate-up"));
  try {
    parse_plan_toml("[plan]\n[plan.passes]\nfuse-qvk = false\n", "p.toml");
    FAIL() << "unknown pass accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'fuse-qkv'"), std::string::npos) << e.what();
  }
  try {
    parse_plan_toml("[plan]\nweights = \"int4:g100\"\n", "p.toml");
    FAIL() << "bad format accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("p.toml:2:"), std::string::npos) << e.what();
  }
}

TEST(Specs, BuiltinLibraryIsCompleteAndValid) {
  for (const char* m : {"llama-2-7b", "llama-3-8b", "llama-3-70b", "mistral-7b", "mixtral-8x7b", "tiny", "small"})
    EXPECT_NO_THROW(load_model(m)) << m;
  for (const char* h : {"a100-40g", "a100-80g", "h100-sxm", "h200", "l4", "rtx-4090", "jetson-agx-orin-64g", "cpu-host"})
    EXPECT_NO_THROW(load_target(h)) << h;
  EXPECT_TRUE(load_model("mixtral-8x7b").is_moe());
}

TEST(Specs, UnknownNameListsBuiltins) {
  try {
    load_model("llama-3-9b");
    FAIL();
  } catch (const Error& e) {
    std::string s = e.what();
    EXPECT_NE(s.find("did you mean 'llama-3-8b'"), std::string::npos) << s;
    EXPECT_NE(s.find("mixtral-8x7b"), std::string::npos) << s;
  }
  EXPECT_THROW(load_target("no/such/file.toml"), Error);
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {
// Found by scripts/fuzz.sh: an odd head_dim derived from hidden / heads used to
// dereference the absent head_dim key.
TEST(Specs, OddDerivedHeadDimIsAnErrorNotACrash) {
  std::string e = model_error("[model]\nname = \"m\"\nhidden = 124\nlayers = 3\nheads = 4\nffn = 8\nvocab = 8\n");
  EXPECT_NE(e.find("must be even"), std::string::npos) << e;
}

// Dimensions that are each in range but whose products overflow 64-bit counts, and
// depths that would take minutes to plan, are errors rather than wrapped figures.
TEST(Specs, ModelSizeLimits) {
  std::string huge = model_error(
      "[model]\nname = \"m\"\nhidden = 1099511627776\nlayers = 100\nheads = 1\nffn = 1099511627776\n"
      "vocab = 1099511627776\n");
  EXPECT_NE(huge.find("parameters; lathe plans models of up to 1e15"), std::string::npos) << huge;
  std::string deep = model_error("[model]\nname = \"m\"\nhidden = 64\nlayers = 10001\nheads = 4\nffn = 8\nvocab = 8\n");
  EXPECT_NE(deep.find("layers"), std::string::npos) << deep;
  EXPECT_EQ(model_error("[model]\nname = \"m\"\nhidden = 64\nlayers = 10000\nheads = 4\nffn = 8\nvocab = 8\n"), "");
}
}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

// target_to_toml writes every field; reading it back gives the same target.
TEST(TargetToml, RoundTripsEveryField) {
  for (const std::string& name : builtin_names("hardware")) {
    Target t = load_target(name);
    t.eff.dequant = 2.5;  // calibration may fit dequantization above 1
    Target back = parse_target_toml(target_to_toml(t, "a comment\nover two lines"), "back.toml");
    EXPECT_EQ(back.name, t.name);
    EXPECT_EQ(back.kind, t.kind);
    EXPECT_EQ(back.compute_capability, t.compute_capability);
    for (const TargetField& f : target_fields())
      EXPECT_DOUBLE_EQ(get_field(back, f), get_field(t, f)) << name << " " << f.key;
  }
  // Strings with quotes, backslashes, newlines and tabs (a description a user wrote
  // with "\n", which the TOML reader accepts) come back as they were. Other control
  // characters are refused where written: they reached the terminal in every table
  // that shows the description.
  Target t = load_target("cpu-host");
  t.description = "line1\nline2\ttab \"quoted\" back\\slash \x7f";
  Target back = parse_target_toml(target_to_toml(t), "back.toml");
  EXPECT_EQ(back.description, t.description);
  t.description = "title \x1b]0;pwned\x07";
  try {
    parse_target_toml(target_to_toml(t), "back.toml");
    ADD_FAILURE() << "a description with an escape sequence was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(": a string holds the control character \\x1b"), std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find('\x1b'), std::string::npos);  // the message is printable
  }
}

// measured_with (the kernel build a probe or calibration measured) round-trips, and
// only a build id is accepted.
TEST(TargetToml, MeasuredWith) {
  Target t = load_target("cpu-host");
  EXPECT_EQ(t.measured_with, "");  // a datasheet spec
  EXPECT_EQ(target_to_toml(t).find("measured_with"), std::string::npos);
  t.measured_with = "cpu:0123456789ab";
  EXPECT_EQ(parse_target_toml(target_to_toml(t), "back.toml").measured_with, "cpu:0123456789ab");
  EXPECT_TRUE(is_kernel_build_id("cuda:ff"));
  // Written empty: not measured.
  EXPECT_EQ(parse_target_toml("[hardware]\nname = \"x\"\nmeasured_with = \"\"\nkind = \"cpu\"\nsm_count = 2\n"
                              "clock_mhz = 1000\nmemory_gb = 8\nhbm_bandwidth_gbs = 10\n[hardware.peak_tflops]\n"
                              "fp32 = 0.1\n",
                              "empty.toml")
                .measured_with,
            "");
  // A CPU spec's id names CPU kernels ("cuda:" on a CPU spec warned under every build).
  for (const char* bad : {"cpu:", "gpu:12", "cpu:12G", "cpu:ABC", "cpu", "cpu:12 ", "cuda:ff"}) {
    EXPECT_EQ(is_kernel_build_id(bad), std::string(bad) == "cuda:ff") << bad;
    t.measured_with = bad;
    try {
      parse_target_toml(target_to_toml(t), "back.toml");
      ADD_FAILURE() << "measured_with = '" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("hardware.measured_with: expected the kernel build id `lathe probe` writes "
                                           "for a cpu spec, \"cpu:\""),
                std::string::npos)
          << e.what();
    }
  }
}

// Names appear in IR text and plan files: a space or a newline in one broke the saved
// plan's IR ("graph a b.decode"), so both spec readers refuse them where written.
TEST(SpecNames, OnlyLettersDigitsDashUnderscoreDot) {
  EXPECT_EQ(name_problem("llama-3.1_8b"), "");
  EXPECT_NE(name_problem("a b").find("contains ' '"), std::string::npos);
  EXPECT_NE(name_problem("a\nb").find("contains byte 10"), std::string::npos);
  EXPECT_NE(name_problem("").find("must not be empty"), std::string::npos);
  EXPECT_NE(name_problem(std::string(129, 'a')).find("at most 128"), std::string::npos);
  EXPECT_EQ(safe_name("Meta Llama 3/8B"), "Meta-Llama-3-8B");
  std::string model = std::string(builtin_specs("models")[0].text);
  size_t at = model.find("name = \"");
  ASSERT_NE(at, std::string::npos);
  std::string bad = model.substr(0, at) + "name = \"my model\"" + model.substr(model.find('\n', at));
  try {
    parse_model_toml(bad, "m.toml");
    ADD_FAILURE() << "a name with a space was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.name: contains ' '"), std::string::npos) << e.what();
  }
  Target t = load_target("cpu-host");
  t.name = "my\x1f\"host";
  try {
    parse_target_toml(target_to_toml(t), "back.toml");
    ADD_FAILURE() << "a name with control characters was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("back.toml:2:8: a string holds the control character \\x1f"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lathe
