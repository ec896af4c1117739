#include "gguf_cmd.hpp"

#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>

#include "gguf_model.hpp"
#include "usage_error.hpp"
#include "workflow_args.hpp"

namespace po = boost::program_options;

namespace ymlopt {

int cmd_export(const std::vector<std::string>& args) {
  std::string in, out, format, arch, preset, outtype = "f32";
  GgufExport e;
  po::options_description d(
      "ymlopt export MODEL.safetensors OUT.gguf [--format gguf] [--arch llama|gpt2] [--preset NAME | --heads H]");
  d.add_options()("help,h", "show this help")("input", po::value(&in), "a llama or GPT-2 checkpoint (Hugging Face names; "
                                                                      "`ymlopt optimize`'s q8_0/q4_0 weights included)")(
      "output", po::value(&out), "the file to write")("format", po::value(&format), "gguf (default: from OUT's extension)")(
      "arch", po::value(&arch), "llama or gpt2 (default: from the tensor names)")(
      "preset", po::value(&preset), "hyper-parameters of a `ymlopt model` preset (tiny, 124M, 1.1B, ...)")(
      "heads", po::value(&e.cfg.heads), "attention heads (not in the tensors; or --preset)")(
      "context", po::value(&e.cfg.context), "context length (llama; default 2048; GPT-2: its position table)")(
      "eps", po::value(&e.eps), "norm epsilon (default: the workflow's, llama 1e-6, GPT-2 1e-5)")(
      "rope-theta", po::value(&e.rope_theta), "llama RoPE base (default 10000)")(
      "outtype", po::value(&outtype), "f32 (default: dense weights as stored) or f16 (dense f32 matrices as F16)")(
      "name", po::value(&e.name), "general.name (default: the file's stem)");
  if (parse_positional_or_help(args, d, {"input", "output"}, "export")) return 0;
  if (in.empty() || out.empty()) throw UsageError("export: expected MODEL.safetensors and OUT.gguf");
  if (format.empty()) format = std::filesystem::path(out).extension() == ".gguf" ? "gguf" : "";
  if (format != "gguf") throw UsageError("export: --format gguf is the one format (OUT.gguf, or --format gguf)");
  if (outtype != "f32" && outtype != "f16") throw UsageError("export: --outtype is f32 or f16, not '" + outtype + "'");
  if (arch.empty() && !preset.empty()) throw UsageError("export: --preset needs --arch");
  e.f16 = outtype == "f16";
  try {
    if (!preset.empty()) {
      const std::int64_t heads = e.cfg.heads, context = e.cfg.context;
      e.cfg = arch_preset(arch, preset);
      e.cfg.layers = e.cfg.width = e.cfg.ffn = e.cfg.vocab = 0;  // the tensors say these
      if (arch == "llama") e.cfg.kv_heads = 0;
      if (heads) e.cfg.heads = heads;
      if (context) e.cfg.context = context;
    }
    e.cfg.arch = arch;
    for (const std::string& note : export_gguf(in, out, e)) std::cout << "  " << note << "\n";
  } catch (const std::exception& err) {
    std::cerr << "ymlopt: error: " << err.what() << "\n";
    return 1;
  }
  std::cout << "wrote " << out << "\n";
  return 0;
}

int convert_gguf(const std::string& in, const std::string& out) {
  GgufImport g;
  try {
    g = import_gguf(in, out);
  } catch (const std::exception& e) {
    std::cerr << "ymlopt: error: " << e.what() << "\n";
    return 1;
  }
  std::cout << "wrote " << out << ": " << g.cfg.arch << ", " << g.cfg.layers << " layers\n";
  for (const std::string& n : g.notes) std::cout << "  " << n << "\n";
  std::cout << "run it with: ymlopt run workflows/models/" << g.cfg.arch << ".xml --set weights=" << out << " "
            << g.run_flags() << "\n";
  return 0;
}

}  // namespace ymlopt
