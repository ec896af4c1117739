#include "commands.hpp"

#include <unistd.h>

#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "model_checkpoint.hpp"
#include "gemm/gemm.hpp"
#include "io/shard_index.hpp"
#include "io/tensor_file.hpp"
#include "nn/linear_formats.hpp"
#include "quant/bf16_linear.hpp"
#include "quant/qlinear.hpp"
#include "io/tfjs.hpp"
#include "calibrate_cmd.hpp"
#include "compare_cmd.hpp"
#include "embed_cmd.hpp"
#include "tokenize_cmd.hpp"
#include "generate_cmd.hpp"
#include "estimate_cmd.hpp"
#include "gguf_cmd.hpp"
#include "model_cmd.hpp"
#include "optimize_cmd.hpp"
#include "report.hpp"
#include "register_builtin.hpp"
#include "run_cmd.hpp"
#include "starpu_backend.hpp"
#include "starpu_bind.hpp"
#include "starpu_info.hpp"
#include "opencl_info.hpp"
#include "submit_cmd.hpp"
#include "usage_error.hpp"
#include "version.hpp"
#include "workflow_args.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/engine/dot.hpp"
#include "ymlopt/scheduler/topology.hpp"
#include "ymlopt/optimizer/compress_search.hpp"
#if YMLOPT_HAVE_CUDA
#include "nn/nn_cuda.hpp"
#include "sparse/sparse_cuda.hpp"
#endif


namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ymlopt {
namespace {

const char* kUsage =
    "usage: ymlopt <command> [options]\n"
    "\n"
    "commands:\n"
    "  run WF.xml        compile a workflow and run it (report in a run directory)\n"
    "  check WF.xml      validate a workflow without running it\n"
    "  graph WF.xml      print the task DAG as Graphviz DOT\n"
    "  components        list the registered components\n"
    "  info              describe the machine (hwloc) and the StarPU build\n"
    "  calibrate         measure kernel rates, bandwidth and task overhead for the performance model\n"
    "  model init|info   write a seeded gpt2/bert/llama checkpoint; describe a checkpoint or HF folder\n"
    "  convert M O       a TF.js model or llama.cpp's GGUF as safetensors; a bf16/f16 HF folder as f32\n"
    "  export M O.gguf   a llama or GPT-2 checkpoint (f32, f16, q8_0, q4_0) as llama.cpp's GGUF\n"
    "  embed TEXT...     USE-lite sentence embeddings (and --similarity)\n"
    "  tokenize TEXT...  ids of text with a Hugging Face tokenizer.json (and --decode)\n"
    "  generate          text from a gpt2/llama model folder: prefill, then KV-cache decode steps\n"
    "  optimize WF.xml   compress a model's weights and rewrite it (--passes or --sequence; --eval)\n"
    "  compare DIR...    optimize runs side by side: table, SVG plot of quality vs bytes vs time\n"
    "  submit WF.xml     write a Slurm batch script for a run and submit it (--dry-run: print it)\n"
    "  status RUN_DIR    the state of a submitted run (Slurm job, exit code, makespan)\n"
    "  estimate WF.xml   predict a StarPU-MPI run on --nodes N: time, memory per rank, communication\n"
    "  version           print the version\n"
    "\n"
    "run 'ymlopt <command> --help' for the options of a command\n";

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_sets(const std::vector<std::string>& sets) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--set expects NAME=VALUE, got '" + s + "'");
    out.emplace_back(s.substr(0, eq), s.substr(eq + 1));
  }
  return out;
}

// Options shared by run/check/graph.
void add_workflow_options(po::options_description& d, WorkflowArgs& a) {
  d.add_options()("set,s", po::value(&a.sets)->composing(), "override a parameter: NAME=VALUE (repeatable)")(
      "model", po::value(&a.model),
      "a checkpoint (Hugging Face folder: config.json + safetensors, sharded or not; or a safetensors file) "
      "that sets the workflow's weights, prefix and shape parameters; --set still overrides")(
      "prompt", po::value(&a.prompt),
      "text for the model: --model DIR's tokenizer.json turns it into the ids (with its special tokens), and "
      "sets the workflow's ids, seq and batch=1")(
      "plugin", po::value(&a.plugins)->composing(), "load components from a plugin library (repeatable)")(
      "max-tasks", po::value(&a.max_tasks)->default_value(a.max_tasks),
      "refuse a workflow that expands to more tasks (or a loop with more iterations)");
}

// Parses a subcommand's options; prints its help and returns true on --help.
bool parse_positional_or_help(const std::vector<std::string>& args, const po::options_description& d,
                              std::initializer_list<const char*> positional, const std::string& cmd) {
  po::positional_options_description pos;
  for (const char* name : positional) pos.add(name, 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(d).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(cmd + ": " + e.what());
  }
  if (!vm.count("help")) return false;
  std::cout << d;
  return true;
}

bool parse_or_help(const std::vector<std::string>& args, const po::options_description& d, WorkflowArgs* wf,
                   bool file_optional) {
  po::options_description all = d;
  po::positional_options_description pos;
  std::string file;
  if (wf) {
    all.add_options()("workflow", po::value(&wf->file), "workflow file");
    pos.add("workflow", 1);
  }
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  if (vm.count("help")) {
    std::cout << d;
    return true;
  }
  if (wf && wf->file.empty() && !file_optional) throw UsageError("missing workflow file");
  return false;
}

bool load_registry(ComponentRegistry& reg, const std::vector<std::string>& plugins) {
  register_builtin_components(reg);
  opt::register_search_components(reg);  // compress.search_step, compress.finish (workflows/unite/compress.xml)
  for (const auto& p : plugins) {
    try {
      reg.load_plugin(p);
    } catch (const std::exception& e) {
      std::cerr << "ymlopt: error: " << e.what() << "\n";
      return false;
    }
  }
  return true;
}

// Compiles; prints diagnostics (into `text` instead of stderr when given);
// returns exit code (0 ok).
int compile(const WorkflowArgs& a, const ComponentRegistry& reg, CompileResult& out, bool check_files,
            std::string* text) {
  std::ostringstream msg;
  auto done = [&](int rc) {
    if (text) *text += msg.str();
    else std::cerr << msg.str();
    return rc;
  };
  if (!fs::exists(a.file)) {
    msg << "ymlopt: error: " << a.file << ": no such file\n";
    return done(2);
  }
  Diagnostics diags;
  CompileOptions o;
  o.file = a.file;
  o.sets = parse_sets(a.sets);
  o.check_files = check_files;
  o.max_tasks = a.max_tasks;
  if (!a.model.empty()) {
    try {
      const ModelCheckpoint c = read_checkpoint(a.model);
      // the model workflows are named after the architecture they compute (gpt2.xml, llama_generate.xml)
      const std::string stem = fs::path(a.file).stem().string(), arch = stem.substr(0, stem.find('_'));
      const bool model_wf = arch == "gpt2" || arch == "bert" || arch == "llama";
      if (model_wf && arch != c.shape.arch) {
        msg << "ymlopt: error: --model " << a.model << " is a " << c.shape.arch << " checkpoint but " << a.file
            << " computes " << arch << ": use "
            << (fs::path(a.file).parent_path() / (c.shape.arch + stem.substr(arch.size()) + ".xml")).string() << "\n";
        return done(1);
      }
      if (model_wf && (c.dense_dtypes.count("BF16") || c.dense_dtypes.count("F16"))) {
        msg << "ymlopt: error: --model " << a.model << " holds " << (c.dense_dtypes.count("BF16") ? "bf16" : "f16")
            << " weights and " << a.file << " computes in f32: widen them once with `ymlopt convert " << a.model
            << " " << a.model << "-f32`, then --model " << a.model << "-f32\n";
        return done(1);
      }
      o.model_sets = c.params;
      o.model_missing = c.undetermined;
      if (c.window)
        o.model_required.emplace_back("window", "it is the model's sliding window, and without it the workflow "
                                                "would attend to the whole context");
      o.model_origin = "--model " + a.model;
    } catch (const ModelCheckpointError& e) {
      msg << "ymlopt: error: --model: " << e.what() << "\n";
      return done(1);
    }
  }
  if (!a.prompt.empty()) {
    if (a.model.empty()) {
      msg << "ymlopt: error: --prompt needs --model DIR (its tokenizer.json turns the text into ids)\n";
      return done(2);
    }
    for (const auto& [name, value] : o.sets)
      if (name == "ids" || name == "seq" || name == "batch") {
        msg << "ymlopt: error: --prompt sets ids, seq and batch: drop --set " << name << "=" << value << "\n";
        return done(2);
      }
    std::int64_t context = 0;
    for (const auto& [name, value] : o.model_sets)
      if (name == "context") context = std::stoll(value);
    try {
      const PromptIds p = prompt_ids(a.model, a.prompt, context);
      o.model_sets.insert(o.model_sets.end(), {{"ids", p.path}, {"seq", std::to_string(p.count)}, {"batch", "1"}});
      o.model_optional.push_back("batch");  // a generate workflow runs one sequence and has no batch
    } catch (const std::exception& e) {
      msg << "ymlopt: error: --prompt: " << e.what() << "\n";
      return done(1);
    }
  }
  out = compile_workflow(o, reg, diags);
  msg << diags.str();
  if (out.usage_error) return done(2);
  if (!out.ok) {
    msg << diags.error_count() << " error" << (diags.error_count() == 1 ? "" : "s") << " in " << a.file << "\n";
    return done(1);
  }
  return done(0);
}

// Loads built-ins and plugins, then compiles; returns the exit code (0: `out` holds the DAG).
int prepare(const WorkflowArgs& wf, ComponentRegistry& reg, CompileResult& out, bool check_files,
            std::string* text) {
  if (!load_registry(reg, wf.plugins)) return 2;
  return compile(wf, reg, out, check_files, text);
}

namespace {

int cmd_check(const std::vector<std::string>& args) {
  WorkflowArgs wf;
  po::options_description d("ymlopt check WF.xml [options]");
  d.add_options()("help,h", "show this help");
  add_workflow_options(d, wf);
  if (parse_or_help(args, d, &wf)) return 0;
  ComponentRegistry reg;
  CompileResult r;
  if (int rc = prepare(wf, reg, r)) return rc;
  std::cout << wf.file << ": ok: workflow '" << r.dag.name << "', " << r.dag.tasks.size() << " tasks, "
            << r.dag.num_edges() << " dependencies, " << r.dag.data.size() << " data\n";
  return 0;
}

int cmd_graph(const std::vector<std::string>& args) {
  WorkflowArgs wf;
  std::string out;
  po::options_description d("ymlopt graph WF.xml [options]");
  d.add_options()("help,h", "show this help")("output,o", po::value(&out), "write the DOT to a file");
  add_workflow_options(d, wf);
  if (parse_or_help(args, d, &wf)) return 0;
  ComponentRegistry reg;
  CompileResult r;
  if (int rc = prepare(wf, reg, r)) return rc;
  const std::string dot = dag_to_dot(r.dag);
  if (out.empty()) std::cout << dot;
  else write_file_atomic(out, dot);
  return 0;
}

int cmd_components(const std::vector<std::string>& args) {
  std::vector<std::string> plugins;
  bool json = false;
  po::options_description d("ymlopt components [options]");
  d.add_options()("help,h", "show this help")("plugin", po::value(&plugins)->composing(), "load a plugin")(
      "json", po::bool_switch(&json), "machine-readable output");
  if (parse_or_help(args, d, nullptr)) return 0;
  ComponentRegistry reg;
  if (!load_registry(reg, plugins)) return 2;
  nlohmann::json all = nlohmann::json::array();
  for (const ComponentSpec* c : reg.all()) {
    std::string devices = "cpu";
    if (c->cuda) devices += ",cuda";  // (set only where the kernels were built: YMLOPT_HAVE_CUDA)
    if (c->opencl) devices += ",opencl";  // (YMLOPT_HAVE_OPENCL)
    if (json) {
      nlohmann::json ports = nlohmann::json::array(), params = nlohmann::json::array();
      for (const auto& p : c->ports) {
        std::vector<std::string> dts;
        for (auto t : p.dtypes) dts.push_back(dtype_name(t));
        ports.push_back({{"name", p.name}, {"access", access_name(p.access)}, {"dtypes", dts}, {"optional", p.optional}});
      }
      for (const auto& p : c->params)
        params.push_back({{"name", p.name}, {"type", param_type_name(p.type)}, {"default", p.default_value}, {"required", p.required}});
      all.push_back({{"name", c->name}, {"doc", c->doc}, {"ports", ports}, {"params", params}, {"devices", devices}});
      continue;
    }
    std::cout << c->name << "  [" << devices << "]";
    if (!c->doc.empty()) std::cout << "  " << c->doc;
    std::cout << "\n";
    for (const auto& p : c->ports) {
      std::string dts;
      for (auto t : p.dtypes) dts += std::string(dts.empty() ? "" : "|") + dtype_name(t);
      std::cout << "    " << access_name(p.access) << " " << p.name << " : " << (dts.empty() ? "any" : dts)
                << (p.optional ? " (optional)" : "") << "\n";
    }
    for (const auto& p : c->params)
      std::cout << "    arg " << p.name << " : " << param_type_name(p.type)
                << (p.required ? " (required)" : " = " + (p.default_value.empty() ? std::string("\"\"") : p.default_value))
                << "\n";
  }
  if (json) std::cout << all.dump(2) << "\n";
  return 0;
}

int cmd_info(const std::vector<std::string>& args) {
  bool json = false;
  po::options_description d("ymlopt info [options]");
  d.add_options()("help,h", "show this help")("json", po::bool_switch(&json), "machine-readable output");
  if (parse_or_help(args, d, nullptr)) return 0;
  const Topology topo = probe_topology();
  const StarpuBuildInfo sb = starpu_build_info();
  const std::vector<std::string> workers = starpu_worker_names();
  const BindPlan bind = default_starpu_binding(topo);  // what `ymlopt run` (--bind auto) would do here
#if YMLOPT_HAVE_CUDA
  const std::string cuda_kernels = std::string("built for sm_") + nn::cuda::built_architectures();
  const std::string cuda_devices = nn::cuda::describe_devices();
  const std::string cuda_nm24 = sparse::cuda::nm24_unavailable_reason();
#else
  const std::string cuda_kernels = "not built (no nvcc when ymlopt was configured)";
  const std::string cuda_devices = "not probed (built without CUDA)";
  const std::string cuda_nm24;  // no GPU kernels at all
#endif
  const nlohmann::json opencl = opencl_info_json(workers, sb.opencl);
  if (json) {
    nlohmann::json j = {{"machine", topology_json(topo)},
                        {"starpu", {{"version", sb.version}, {"cuda", sb.cuda}, {"opencl", sb.opencl}, {"mpi", sb.mpi},
                                    {"fxt", sb.fxt}, {"max_cpus", sb.max_cpus}, {"workers", workers}}},
                        {"cuda", {{"kernels", cuda_kernels}, {"devices", cuda_devices}, {"nm24", cuda_nm24}}},
                        {"opencl", opencl},
                        {"gemm", {{"blas.gemm f32", gemm::sgemm_library()},
                                  {"model kernels f32", "OpenBLAS sgemm; nn.linear " + gemm::sgemm_panels_description()},
                                  {"f64", gemm::dgemm_library()}}},
                        {"sparse", {{"csr below 8 tokens", nn::csr_gemv_description()}}},
                        {"quant", {{"int8/int4 linear", quant::best_isa_name()}, {"bf16 linear", quant::bf16_best_isa_name()}}},
                        {"bind", bind_plan_json(bind)}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << format_topology(topo);
  std::cout << "GEMM in tasks (1 thread each): blas.gemm f32 " << gemm::sgemm_library()
            << ", nn.linear/attention f32 OpenBLAS sgemm (nn.linear " << gemm::sgemm_panels_description()
            << " from a weight's second use), f64 " << gemm::dgemm_library() << "\n";
  std::cout << "Sparse nn.linear: CSR below 8 tokens on " << nn::csr_gemv_description() << "\n";
  std::cout << "Quantized nn.linear: int8/int4 kernels for " << quant::best_isa_name() << ", bf16 for "
            << quant::bf16_best_isa_name() << "\n";
  std::cout << "StarPU: " << sb.version << ", CUDA " << (sb.cuda ? "yes" : "no") << ", OpenCL "
            << (sb.opencl ? "yes" : "no") << ", MPI " << (sb.mpi ? "yes" : "no")
            << ", FxT " << (sb.fxt ? "yes" : "no") << ", max CPU workers " << sb.max_cpus << "\n";
  std::cout << "CUDA kernels: " << cuda_kernels << "; devices: " << cuda_devices << "\n";
  if (!cuda_nm24.empty()) std::cout << cuda_nm24 << "\n";
  std::cout << format_opencl_info(opencl);
  std::cout << "StarPU workers (" << workers.size() << "):";
  for (const auto& w : workers) std::cout << " [" << w << "]";
  std::cout << "\n";
  std::cout << "Default binding --bind " << format_bind_plan(bind) << "\n";
  for (const auto& w : bind.warnings) std::cout << "warning: " << w << "\n";
  if (!sb.cuda)
    std::cout << "note: this StarPU has no CUDA, so no task runs on a CUDA worker: build with one "
                 "(-DYMLOPT_STARPU_PREFIX=\"$(scripts/starpu_cuda.sh)\", or a cluster's StarPU module)\n";
  return 0;
}

int cmd_convert(const std::vector<std::string>& args) {
  std::string in, out;
  po::options_description d("ymlopt convert MODEL.json|MODEL.gguf OUT.safetensors | ymlopt convert MODEL_DIR OUT_DIR");
  d.add_options()("help,h", "show this help")(
      "input", po::value(&in),
      "TF.js model.json (shards beside it), llama.cpp's GGUF (llama, gpt2), or a Hugging Face model folder "
      "(f16/bf16 weights are widened to f32 in OUT_DIR/model.safetensors, config and tokenizer copied)")(
      "output", po::value(&out), "safetensors file (folder for a model folder) to write");
  if (parse_positional_or_help(args, d, {"input", "output"}, "convert")) return 0;
  if (in.empty() || out.empty())
    throw UsageError("convert: expected MODEL.json, MODEL.gguf or MODEL_DIR, and the output");
  if (std::filesystem::path(in).extension() == ".gguf") return convert_gguf(in, out);
  if (std::filesystem::is_directory(in) || io::is_shard_index(in)) {
    const ModelCheckpoint c = read_checkpoint(in);
    const std::int64_t bytes = convert_checkpoint_to_f32(c, out);
    std::cout << "wrote " << out << "/model.safetensors: " << c.tensors.size() << " tensors, " << c.parameters
              << " parameters, " << mib(double(bytes)) << "\nrun it with: ymlopt run workflows/models/" << c.shape.arch
              << ".xml --model " << out << "\n";
    return 0;
  }
  try {
    io::convert_tfjs(in, out);
  } catch (const std::exception& e) {
    std::cerr << "ymlopt: error: " << e.what() << "\n";
    return 1;
  }
  const auto tensors = io::list_tensors(out);
  std::int64_t n = 0;
  for (const auto& t : tensors) {
    std::int64_t e = 1;
    for (auto x : t.shape) e *= x;
    n += e;
  }
  std::cout << "wrote " << out << ": " << tensors.size() << " tensors, " << n << " values\n";
  return 0;
}

}  // namespace

int cli_main(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string cmd = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (cmd == "run") return cmd_run(rest);
    if (cmd == "check") return cmd_check(rest);
    if (cmd == "graph") return cmd_graph(rest);
    if (cmd == "components") return cmd_components(rest);
    if (cmd == "info") return cmd_info(rest);
    if (cmd == "calibrate") return cmd_calibrate(rest);
    if (cmd == "model") return cmd_model(rest);
    if (cmd == "convert") return cmd_convert(rest);
    if (cmd == "export") return cmd_export(rest);
    if (cmd == "embed") return cmd_embed(rest);
    if (cmd == "tokenize") return cmd_tokenize(rest);
    if (cmd == "generate") return cmd_generate(rest);
    if (cmd == "optimize") return cmd_optimize(rest);
    if (cmd == "compare") return cmd_compare(rest);
    if (cmd == "submit") return cmd_submit(rest);
    if (cmd == "status") return cmd_status(rest);
    if (cmd == "estimate") return cmd_estimate(rest);
    if (cmd == "version" || cmd == "--version") {
      std::cout << "ymlopt " << kVersion << " (component SDK ABI " << kSdkAbiVersion << ")\n";
      return 0;
    }
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
      std::cout << kUsage;
      return 0;
    }
    throw UsageError("unknown command '" + cmd + "'" +
                     did_you_mean(cmd, {"run", "check", "graph", "components", "info", "calibrate", "model", "convert", "export", "embed", "tokenize", "generate", "optimize", "compare", "submit", "status", "estimate", "version"}));
  } catch (const UsageError& e) {
    std::cerr << "ymlopt: error: " << e.what() << "\n" << kUsage;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ymlopt: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace ymlopt
