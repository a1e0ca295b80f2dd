// FP4 routed experts (fixture fp4_e2m1: DeepSeek's I8-packed e2m1 pairs with F8_E8M0 scales per
// 32 inputs, "expert_dtype": "fp4"): they load in their stored format (the forward tests in
// deepseek_v4_forward_test.cc / deepseek_v4_engine_test.cc match transformers on it), and a
// hostile copy (NaN or out-of-range scale, wrong scale shape, odd packing, a wrong scale type,
// I8 experts without expert_dtype fp4) is one error naming the shard file and the tensor.
#include "v4_checkpoint_edit.h"

namespace deepinfer {
namespace {

using v4test::Checkpoint;
using v4test::patch;

Checkpoint read_fixture() { return v4test::read_checkpoint("fp4_e2m1"); }
std::string load_error(const std::string& tag, const Checkpoint& c) {
  return v4test::checkpoint_error("fp4_" + tag, c);
}

// The experts' projections are views of the checkpoint's own (mapped) bytes: packed weights and
// ue8m0 scales, never widened copies.
TEST(DeepseekV4Fp4, ExpertsStayPacked) {
  const std::string dir = v4test::fixture_dir("fp4_e2m1");
  auto st = format::SafetensorsModel::open(dir);
  ASSERT_TRUE(st.is_ok()) << st.status().message();
  model::WeightSource src;
  src.safetensors = *st;
  src.description = dir;
  auto m = model::load_model(src);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const auto* v4 = dynamic_cast<const model::DeepseekV4*>(m->get());
  ASSERT_NE(v4, nullptr);
  for (int l = 0; l < 3; ++l) {
    const model::V4Moe& moe = v4->weights().layers[l].moe;
    EXPECT_TRUE(moe.experts.empty());
    ASSERT_EQ(moe.fp4_experts.size(), 4u);
    for (int e = 0; e < 4; ++e) {
      const std::string p = "layers." + std::to_string(l) + ".ffn.experts." + std::to_string(e);
      const model::V4Fp4Mlp& x = moe.fp4_experts[e];
      EXPECT_EQ(x.gate.weight.data, (*st)->find(p + ".w1.weight")->data) << p;
      EXPECT_EQ(x.up.scale.data, (*st)->find(p + ".w3.scale")->data) << p;
      EXPECT_EQ(x.down.weight.data, (*st)->find(p + ".w2.weight")->data) << p;
      EXPECT_EQ(x.down.n_in, 32);
      EXPECT_EQ(x.down.n_out, 64);
      EXPECT_EQ(x.gate.weight.dtype, DType::kI8);
    }
  }
}

TEST(DeepseekV4Fp4, NanScaleNamesTheTensor) {
  Checkpoint c = read_fixture();
  patch(c, "layers.2.ffn.experts.3.w2.scale", std::string("\x7f\xff", 2));
  const std::string msg = load_error("nan", c);
  EXPECT_NE(msg.find("'layers.2.ffn.experts.3.w2.scale'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NaN scale"), std::string::npos) << msg;
  EXPECT_NE(msg.find("row 1, block 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/model.safetensors: tensor"), std::string::npos) << "names the file: " << msg;
}

TEST(DeepseekV4Fp4, OutOfRangeScaleNamesTheTensor) {
  Checkpoint c = read_fixture();
  patch(c, "layers.0.ffn.experts.1.w1.scale", std::string("\x7f\xfd", 2));  // 2^126
  const std::string msg = load_error("range", c);
  EXPECT_NE(msg.find("'layers.0.ffn.experts.1.w1.scale'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2^126"), std::string::npos) << msg;
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
}

TEST(DeepseekV4Fp4, WrongScaleShapeNamesTheTensor) {
  Checkpoint c = read_fixture();
  c.header["layers.1.ffn.experts.0.w1.scale"]["shape"] = {64, 1};  // same bytes, one scale per 64
  const std::string msg = load_error("scale_shape", c);
  EXPECT_NE(msg.find("layers.1.ffn.experts.0.w1.scale"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[32, 2]"), std::string::npos) << msg;
}

TEST(DeepseekV4Fp4, WrongScaleTypeNamesTheTensor) {
  Checkpoint c = read_fixture();
  c.header["layers.1.ffn.experts.0.w3.scale"]["dtype"] = "I8";
  const std::string msg = load_error("scale_type", c);
  EXPECT_NE(msg.find("'layers.1.ffn.experts.0.w3.scale' has type i8"), std::string::npos) << msg;
}

TEST(DeepseekV4Fp4, OddPackingNamesTheTensor) {
  // One code a byte ([n_out, n_in]) is not DeepSeek's packing: here [64, 16] bytes read as
  // [128, 8], and the whole [n_out, n_in] layout as I8 [64, 32].
  Checkpoint c = read_fixture();
  c.header["layers.0.ffn.experts.2.w2.weight"]["shape"] = {128, 8};
  std::string msg = load_error("packing", c);
  EXPECT_NE(msg.find("layers.0.ffn.experts.2.w2.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[64, 16]"), std::string::npos) << msg;
  // An odd input size cannot be packed two a byte.
  Checkpoint odd = read_fixture();
  odd.config["moe_intermediate_size"] = 31;
  msg = load_error("odd", odd);
  EXPECT_NE(msg.find("layers.0.ffn.experts.0.w1.weight"), std::string::npos) << msg;
}

TEST(DeepseekV4Fp4, PackedExpertsNeedTheConfigsWord) {
  Checkpoint c = read_fixture();
  c.config.erase("expert_dtype");
  const std::string msg = load_error("undeclared", c);
  EXPECT_NE(msg.find("'layers.0.ffn.experts.0.w1.weight' is I8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not declare expert_dtype fp4"), std::string::npos) << msg;
}

TEST(DeepseekV4Fp4, MissingScaleNamesIt) {
  Checkpoint c = read_fixture();
  c.header.erase("layers.2.ffn.experts.1.w3.scale");
  const std::string msg = load_error("missing_scale", c);
  EXPECT_NE(msg.find("missing tensor 'layers.2.ffn.experts.1.w3.scale'"), std::string::npos) << msg;
}

}  // namespace
}  // namespace deepinfer
