#include "ir/dtype.h"

#include <gtest/gtest.h>

#include "ir/plan_options.h"
#include "ir/shape.h"

namespace lathe {
namespace {

TEST(DType, BitsAndNames) {
  EXPECT_EQ(dtype_bits(DType::int4), 4);
  EXPECT_EQ(dtype_bits(DType::bf16), 16);
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::fp8_e4m3, DType::int8, DType::int4, DType::i32})
    EXPECT_EQ(parse_dtype(dtype_name(t)), t) << dtype_name(t);
  EXPECT_FALSE(parse_dtype("f64"));
}

TEST(Format, WeightSpellings) {
  auto f = parse_weight_format("int4:g128");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->dtype, DType::int4);
  EXPECT_EQ(f->group, 128);
  EXPECT_EQ(parse_weight_format("q4_0")->group, 32);
  EXPECT_EQ(parse_weight_format("q8_0")->group, 32);
  EXPECT_EQ(parse_weight_format("int8")->group, 0);
  std::string why;
  EXPECT_FALSE(parse_weight_format("int4:g100", &why));
  EXPECT_NE(why.find("32, 64 or 128"), std::string::npos) << why;
  EXPECT_FALSE(parse_weight_format("bf16:g32", &why));
  EXPECT_FALSE(parse_weight_format("int3", &why));
  EXPECT_NE(why.find("expected one of"), std::string::npos);
  EXPECT_FALSE(parse_kv_dtype("int2", &why));
}

TEST(Format, BytesCountScales) {
  // int4 g128 with f16 scales: 4 + 16/128 = 4.125 bits per element.
  Format f = *parse_weight_format("int4:g128");
  EXPECT_DOUBLE_EQ(f.bits_per_element(4096), 4.125);
  EXPECT_DOUBLE_EQ(f.bytes(4096, 4096), 4096.0 * 4096 * 0.5 + 4096.0 * 32 * 2);
  // Q8_0-like: 8 + 16/32 = 8.5 bits.
  EXPECT_DOUBLE_EQ(parse_weight_format("q8_0")->bits_per_element(4096), 8.5);
  // Per-channel int8: one f16 scale per row.
  EXPECT_DOUBLE_EQ(parse_weight_format("int8")->bytes(10, 100), 1000.0 + 20.0);
  EXPECT_DOUBLE_EQ(parse_weight_format("bf16")->bytes(10, 100), 2000.0);
}

TEST(Shape, DimsPrintParseEval) {
  Dim d = Dim::B() * Dim::S() * Dim::c(4);
  EXPECT_EQ(d.str(), "4*B*S");
  EXPECT_EQ(parse_dim("4*B*S"), d);
  EXPECT_EQ(parse_dim("4096")->coef, 4096);
  EXPECT_FALSE(parse_dim("Q"));
  EXPECT_FALSE(parse_dim(""));
  EXPECT_EQ(d.eval({3, 5, 7}), 60);
  EXPECT_EQ(shape_str({Dim::B(), Dim::T(), Dim::c(8)}), "[B, T, 8]");
}

TEST(KvLayout, Spellings) {
  EXPECT_EQ(parse_kv_layout("paged:32")->block, 32);
  EXPECT_EQ(kv_layout_name(*parse_kv_layout("TLHD")), "TLHD");
  std::string why;
  EXPECT_FALSE(parse_kv_layout("paged:0", &why));
  EXPECT_FALSE(parse_kv_layout("HDLT", &why));
}

TEST(PassList, SplitTrimsAndDropsEmptyEntries) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split_pass_list(" fuse-qkv ,kv-layout,, memory-plan"), (V{"fuse-qkv", "kv-layout", "memory-plan"}));
  EXPECT_EQ(split_pass_list(""), V{});
  EXPECT_EQ(split_pass_list(" , "), V{});
  EXPECT_EQ(split_pass_list("no-such-pass"), V{"no-such-pass"});  // names are checked by the callers
}

}  // namespace
}  // namespace lathe
