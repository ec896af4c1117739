#include "model_cmd.hpp"

#include <boost/program_options.hpp>
#include <cmath>
#include <cstring>
#include <iostream>
#include <ymlopt/half.hpp>

#include "model_checkpoint.hpp"
#include "io/tensor_file.hpp"
#include "usage_error.hpp"
#include "ymlopt/scheduler/data_store.hpp"
#include "model_zoo.hpp"

namespace po = boost::program_options;

namespace ymlopt {
namespace {

const char* kModelUsage =
    "usage: ymlopt model init --arch gpt2|bert|llama --preset NAME [--seed S] [--dtype f32|f16|bf16]\n"
    "                         [--layers N] [--width D] [--heads H] [--kv-heads K] [--ffn F] [--vocab V]\n"
    "                         [--context C] OUT.safetensors\n"
    "       ymlopt model info --arch A --preset NAME [overrides]\n"
    "       ymlopt model info PATH    a checkpoint: a Hugging Face folder (config.json, model.safetensors\n"
    "                                 or shards with model.safetensors.index.json) or a safetensors file\n";

// A normal(0, std) sample, deterministic in (seed, stream, index): Box-Muller
// on two counter-based uniforms, so a tensor's values do not depend on order.
double normal_value(std::uint64_t seed, std::uint64_t stream, std::uint64_t i, double stddev) {
  const double u1 = 0.5 * (random_value(seed ^ (stream * 0x9e3779b97f4a7c15ull), 2 * i) + 1.0);
  const double u2 = 0.5 * (random_value(seed ^ (stream * 0x9e3779b97f4a7c15ull), 2 * i + 1) + 1.0);
  return stddev * std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace

int cmd_model(const std::vector<std::string>& args) {
  if (args.empty() || (args[0] != "init" && args[0] != "info")) {
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
      std::cout << kModelUsage;
      return 0;
    }
    throw UsageError(args.empty() ? "model: missing subcommand (init or info)"
                                  : "model: unknown subcommand '" + args[0] + "' (expected init or info)");
  }
  if (args[0] == "info" && args.size() == 2 && !args[1].starts_with("-")) {
    std::cout << describe(read_checkpoint(args[1]));
    return 0;
  }
  const bool init = args[0] == "init";
  std::string arch, preset, dtype_s = "f32", out;
  std::uint64_t seed = 1;
  std::int64_t layers = 0, width = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, context = 0;
  po::options_description d("options");
  d.add_options()("help,h", "show this help")("arch", po::value(&arch)->required(), "gpt2, bert or llama")(
      "preset", po::value(&preset)->required(), "named shapes (e.g. 124M, base, 1.1B, tiny)")(
      "seed", po::value(&seed), "random seed (default 1)")("dtype", po::value(&dtype_s), "f32 (default), f16 or bf16")(
      "layers", po::value(&layers), "override")("width", po::value(&width), "override")(
      "heads", po::value(&heads), "override")("kv-heads", po::value(&kv_heads), "override")(
      "ffn", po::value(&ffn), "override")("vocab", po::value(&vocab), "override")(
      "context", po::value(&context), "override")("out", po::value(&out), "output file");
  po::positional_options_description pos;
  pos.add("out", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(std::vector<std::string>(args.begin() + 1, args.end())).options(d).positional(pos).run(), vm);
    if (vm.count("help")) {
      std::cout << kModelUsage << d;
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("model ") + args[0] + ": " + e.what());
  }
  ArchConfig c;
  try {
    c = arch_preset(arch, preset);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  for (auto [v, field] : {std::pair{layers, &c.layers}, {width, &c.width}, {heads, &c.heads}, {kv_heads, &c.kv_heads},
                          {ffn, &c.ffn}, {vocab, &c.vocab}, {context, &c.context}}) {
    if (v < 0) throw UsageError("model: sizes must be positive");
    if (v > 0) *field = v;
  }
  if (heads > 0 && kv_heads == 0 && c.arch != "llama") c.kv_heads = c.heads;
  if (c.width % c.heads != 0)
    throw UsageError("model: width " + std::to_string(c.width) + " is not a multiple of heads " + std::to_string(c.heads));
  if (c.heads % c.kv_heads != 0)
    throw UsageError("model: heads " + std::to_string(c.heads) + " is not a multiple of kv-heads " +
                     std::to_string(c.kv_heads));
  const auto dtype = parse_dtype(dtype_s);
  if (!dtype || (*dtype != DType::f32 && *dtype != DType::f16 && *dtype != DType::bf16))
    throw UsageError("model: --dtype must be f32, f16 or bf16");
  const auto specs = weight_specs(c);
  const std::int64_t nparams = parameter_count(c);
  std::cout << c.arch << " " << c.preset << ": " << c.layers << " layers, width " << c.width << ", " << c.heads
            << " heads";
  if (c.arch == "llama") std::cout << " (" << c.kv_heads << " kv)";
  std::cout << ", ffn " << c.ffn << ", vocab " << c.vocab << "; " << specs.size() << " tensors, " << nparams
            << " parameters, " << double(nparams) * double(dtype_size(*dtype)) / (1 << 20) << " MiB in "
            << dtype_name(*dtype) << "\n";
  if (!init) return 0;
  if (out.empty()) throw UsageError("model init: missing output file");
  std::vector<io::TensorInfo> infos;
  for (const auto& w : specs) infos.push_back({w.name, "", *dtype, w.shape});
  const std::map<std::string, std::string> meta = {{"format", "pt"},
                                                   {"ymlopt.arch", c.arch},
                                                   {"ymlopt.preset", c.preset},
                                                   {"ymlopt.seed", std::to_string(seed)}};
  io::save_safetensors_streamed(
      out, infos,
      [&](std::size_t t, std::span<std::byte> bytes) {
        const WeightSpec& w = specs[t];
        const std::size_t n = bytes.size() / dtype_size(*dtype);
        for (std::size_t i = 0; i < n; ++i) {
          const double v = w.init == WeightInit::ones ? 1.0
                           : w.init == WeightInit::zeros ? 0.0
                                                         : normal_value(seed, t + 1, i, 0.02);
          if (*dtype == DType::f32) {
            const float f = float(v);
            std::memcpy(bytes.data() + 4 * i, &f, 4);
          } else {
            const std::uint16_t h = *dtype == DType::f16 ? half::f16_bits_from_double(v) : half::bf16_bits_from_double(v);
            std::memcpy(bytes.data() + 2 * i, &h, 2);
          }
        }
      },
      meta);
  std::cout << "wrote " << out << "\n";
  return 0;
}

}  // namespace ymlopt
