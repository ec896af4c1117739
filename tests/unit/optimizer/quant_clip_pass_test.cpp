// The clip_search options of the passes quant.group and quant.gptq (optimizer/src/passes.cpp)
// on the tiny seeded GPT-2: `quant.group:clip_search=true` stores, for every int4 group of
// 128, the scale an independent long-double mean-squared-error search over the range shrinks
// 1, 0.99, ... 0.75 picks (the Q4_0 rule re-derived from quant.hpp's text), with the same
// bytes as plain `quant.group`; bad option values are PassErrors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "tiny_gpt2.hpp"
#include "register_builtin.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/engine/registry.hpp"
#include "ymlopt/optimizer/passes.hpp"

namespace fs = std::filesystem;
using namespace ymlopt;

namespace {

using LD = long double;
const std::string kModel = std::string(YMLOPT_SOURCE_DIR) + "/workflows/models/gpt2.xml";

const TinyGpt2& tiny() {
  static const TinyGpt2 t("clip-pass", 5, 41, 3);
  return t;
}

/// An editor on a fresh compile of the tiny model.
struct Edited {
  ComponentRegistry reg;
  std::unique_ptr<opt::ModelEditor> ed;
  Edited() {
    register_builtin_components(reg);
    Diagnostics diags;
    CompileResult cr = compile_workflow({kModel, tiny().set_pairs()}, reg, diags);
    if (!cr.ok) throw std::runtime_error(diags.str());
    ed = std::make_unique<opt::ModelEditor>(std::move(cr.dag), reg);
  }
  const std::vector<std::byte>& bytes(const std::string& name) {
    for (std::size_t i = 0; i < ed->dag().data.size(); ++i)
      if (ed->dag().data[i].name == name) return ed->tensor_bytes(std::int32_t(i));
    throw std::runtime_error("no tensor '" + name + "'");
  }
};

float fl(LD v) { return static_cast<float>(v); }

/// Q4_0 rule on x (quant.hpp): d = m / -8 (m the signed value of largest magnitude),
/// code = min(15, (int)(x / d + 8.5)), value (code - 8) d; returns the squared error sum.
LD q4_error(const std::vector<float>& x, float d) {
  const float inv = d != 0 ? fl(1.0L / d) : 0.0f;
  LD e = 0;
  for (float v : x) {
    const float t = fl(LD(fl(LD(v) * inv)) + 8.5L);
    const int c = t <= 0 ? 0 : std::min(15, static_cast<int>(std::truncl(t)));
    const LD diff = LD(v) - LD(fl(LD(c - 8) * d));
    e += diff * diff;
  }
  return e;
}

float q4_scale(const std::vector<float>& x, float a) {
  LD amax = 0, m = 0;
  for (float v : x) {
    const LD y = fl(LD(a) * v);
    if (std::fabs(y) > amax) amax = std::fabs(y), m = y;
  }
  return fl(m / -8);
}

TEST(QuantClipPassTest, GroupClipSearchStoresTheLeastSquaredErrorShrinkOfEveryGroup) {
  Edited plain, clipped;
  opt::PassContext pc{*plain.ed}, cc{*clipped.ed};
  opt::run_pass(pc, opt::parse_pass_list("quant.group:bits=4:group=128")[0]);
  opt::run_pass(cc, opt::parse_pass_list("quant.group:bits=4:group=128:clip_search=true")[0]);
  const auto& lp = pc.log.at(0);
  const auto& lc = cc.log.at(0);
  ASSERT_GT(lc.at("layers").get<std::int64_t>(), 0);
  EXPECT_EQ(lc.at("layers"), lp.at("layers"));
  EXPECT_EQ(lc.at("weight_bytes_after"), lp.at("weight_bytes_after")) << "clip_search stores nothing extra";
  std::int64_t groups = 0, same = 0, shrunk = 0;
  LD err_plain = 0, err_clip = 0;
  for (const auto& [name, fmt] : lc.at("formats").items()) {
    SCOPED_TRACE(name);
    EXPECT_NE(fmt.get<std::string>().find("clip_search"), std::string::npos) << fmt;
    const opt::DenseWeight* w = clipped.ed->original(name);
    ASSERT_NE(w, nullptr);
    const auto& sb = clipped.bytes(name + ".w_scale");
    const auto& qb = clipped.bytes(name + ".w");
    const std::int64_t G = w->k / 128;
    ASSERT_EQ(sb.size(), std::size_t(w->n * G) * sizeof(float));
    ASSERT_EQ(qb.size(), std::size_t(w->n * w->k / 2));
    for (std::int64_t r = 0; r < w->n; ++r)
      for (std::int64_t g = 0; g < G; ++g) {
        std::vector<float> x(w->w.begin() + r * w->k + g * 128, w->w.begin() + r * w->k + (g + 1) * 128);
        // the reference: the first shrink with the least squared error
        float best_d = q4_scale(x, 1.0f);
        LD best = q4_error(x, best_d);
        const LD e1 = best;
        for (int s = 1; 1.0 - 0.01 * s >= 0.75 - 1e-12; ++s) {
          const float d = q4_scale(x, static_cast<float>(1.0 - 0.01 * s));
          const LD e = q4_error(x, d);
          if (e < best) best = e, best_d = d;
        }
        float stored;
        std::memcpy(&stored, sb.data() + std::size_t(r * G + g) * sizeof(float), sizeof(float));
        ++groups;
        same += stored == best_d;
        shrunk += best_d != q4_scale(x, 1.0f);
        // the stored codes: dequantized, their error is the reference's least error
        LD e = 0;
        for (std::int64_t c = 0; c < 128; ++c) {
          const std::int64_t j = g * 128 + c;
          const auto byte = static_cast<std::uint8_t>(qb[std::size_t(r * (w->k / 2) + j / 2)]);
          const int code = (j & 1) ? byte >> 4 : byte & 15;
          const LD diff = LD(x[std::size_t(c)]) - LD(fl(LD(code - 8) * stored));
          e += diff * diff;
        }
        EXPECT_NEAR(double(e), double(best), 1e-9 * double(best) + 1e-30) << "row " << r << " group " << g;
        EXPECT_LE(e, e1 * (1 + 1e-12L));
        err_plain += e1, err_clip += e;
      }
  }
  std::printf("    %lld groups, %lld scales as the reference's, %lld shrunk; weight SSE clip/plain %.3f\n",
              static_cast<long long>(groups), static_cast<long long>(same), static_cast<long long>(shrunk),
              static_cast<double>(err_clip / err_plain));
  EXPECT_GE(double(same), 0.99 * double(groups));
  EXPECT_GT(shrunk, groups / 4);
  EXPECT_LT(err_clip, 0.95L * err_plain);
}

TEST(QuantClipPassTest, BadClipOptionsArePassErrors) {
  Edited e;
  opt::PassContext ctx{*e.ed};  // no calibration: the option checks come first
  auto message = [&](const std::string& passes) -> std::string {
    try {
      opt::run_pass(ctx, opt::parse_pass_list(passes)[0]);
    } catch (const opt::PassError& err) {
      return err.what();
    }
    return "";
  };
  auto has = [](const std::string& msg, const std::string& part) {
    EXPECT_NE(msg.find(part), std::string::npos) << "message: '" << msg << "', expected to contain '" << part << "'";
  };
  has(message("quant.group:clip_search=yes"), "option 'clip_search' of quant.group must be true or false");
  has(message("quant.group:clip_search=true:clip_min=0"), "option 'clip_min' of quant.group must be in (0, 1]");
  has(message("quant.gptq:clip_search=maybe"), "option 'clip_search' of quant.gptq must be true or false");
  has(message("quant.gptq:clip_search=true:clip_min=1.5"), "option 'clip_min' of quant.gptq must be in (0, 1]");
  has(message("quant.gptq:clip_search=true"), "needs calibration");
  EXPECT_THROW(opt::parse_pass_list("quant.gptq:clip_serch=true"), opt::PassError);
  EXPECT_TRUE(ctx.log.empty());
}

}  // namespace
