#include "optimize_cmd.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "run_workflow.hpp"
#include "calibrate_cmd.hpp"
#include "report.hpp"
#include "usage_error.hpp"
#include "workflow_args.hpp"
#include "ymlopt/engine/analysis.hpp"
#include "ymlopt/scheduler/data_store.hpp"
#include "ymlopt/optimizer/passes.hpp"
#include "ymlopt/xml/parser.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ymlopt {
namespace {

/// A <sequence> file: an ordered list of passes, independent of the model.
///   <sequence name="int8"><pass name="quant.int8"/></sequence>
struct Sequence {
  std::string name;
  std::string doc;
  std::vector<opt::PassSpec> passes;
};

/// Parses a sequence file; errors go to diags in compiler format.
bool parse_sequence(const std::string& path, Sequence& seq, Diagnostics& diags) {
  auto doc = xml::parse_file(path, diags);
  if (!doc) return false;
  const xml::Element& root = doc->root;
  if (root.name != "sequence") {
    diags.error(root.loc, "expected a <sequence> root element, found <" + root.name + ">");
    return false;
  }
  for (const auto& a : root.attrs) {
    if (a.name == "name") seq.name = a.value;
    else if (a.name == "doc") seq.doc = a.value;
    else diags.error(a.loc, "unknown attribute '" + a.name + "' on <sequence>" + did_you_mean(a.name, {"name", "doc"}));
  }
  if (seq.name.empty()) seq.name = fs::path(path).stem().string();
  for (const auto& e : root.children) {
    if (e.name == "description") continue;
    if (e.name != "pass") {
      diags.error(e.loc, "unknown element <" + e.name + "> in <sequence>" + did_you_mean(e.name, {"pass", "description"}));
      continue;
    }
    opt::PassSpec s;
    const xml::Attr* name_attr = nullptr;
    for (const auto& a : e.attrs) {
      if (a.name == "name") s.name = a.value, name_attr = &a;
      else s.options[a.name] = a.value;
    }
    if (!name_attr) {
      diags.error(e.loc, "<pass> requires attribute 'name'");
      continue;
    }
    try {
      opt::validate_pass(s);
    } catch (const opt::PassError& err) {
      // point at the offending attribute when it is an option
      SrcLoc at = name_attr->loc;
      for (const auto& a : e.attrs)
        if (std::string(err.what()).find("'" + a.name + "'") != std::string::npos && a.name != "name") at = a.loc;
      diags.error(at, err.what());
      continue;
    }
    seq.passes.push_back(std::move(s));
  }
  if (!diags.has_errors() && seq.passes.empty()) diags.error(root.loc, "the sequence has no <pass>");
  return !diags.has_errors();
}

struct RunOutcome {
  std::vector<double> times_us;
  double median_us = 0;
  double flops = 0;
  std::int64_t weight_bytes = 0, allocated = 0, mapped = 0, activation_peak = 0;
  std::map<std::string, std::vector<double>> outputs;  // by io.save path
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> output_shape;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Runs a DAG `reps` times (fresh data each time), keeps the outputs of the last run;
/// each run's task times go into `history` (when given).
RunOutcome run_model(const Dag& dag, const std::string& backend, int reps, const std::string& run_dir,
                     History* history) {
  RunOutcome o;
  const DagFootprint f = analyze(dag);
  o.weight_bytes = f.parameter_total;
  o.activation_peak = f.activation_peak;
  for (const TaskNode& t : dag.tasks) o.flops += t.cost.flops;
  for (int r = 0; r < reps; ++r) {
    DataStore store(dag);
    o.allocated = std::int64_t(store.total_bytes());
    o.mapped = std::int64_t(store.mapped_bytes());
    RunOptions ro;
    ro.backend = backend;
    ro.exec.run_dir = run_dir;
    const ExecResult res = run_workflow(dag, store, ro).result;
    if (!res.ok) throw std::runtime_error("running '" + dag.file + "' failed: " + res.error);
    o.times_us.push_back(res.makespan_us);
    if (history) record_history(*history, dag, task_seconds(res));
    if (r + 1 == reps)
      for (const TaskNode& t : dag.tasks)
        if (t.comp->name == "io.save") {
          const TensorView v = store.view(t.bindings[0].ref);
          const std::string key = fs::path(t.args.get_string("path")).filename().string() +
                                  (t.args.get_string("key").empty() ? "" : ":" + t.args.get_string("key"));
          o.outputs[key] = opt::output_values(v);
          o.output_shape[key] = {v.rows, v.cols};
        }
  }
  o.median_us = median(o.times_us);
  return o;
}

/// Output quality of `b` (compressed) against `a` (original), rows as items.
nlohmann::json compare_outputs(const std::vector<double>& a, const std::vector<double>& b, std::int64_t rows,
                               std::int64_t cols) {
  double num = 0, den = 0, max_abs = 0, cos_sum = 0;
  std::int64_t top1 = 0;
  std::vector<double> na(static_cast<std::size_t>(rows)), nb(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    double dot = 0, aa = 0, bb = 0;
    std::int64_t ia = 0, ib = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const double x = a[std::size_t(r * cols + c)], y = b[std::size_t(r * cols + c)];
      num += (x - y) * (x - y);
      den += x * x;
      max_abs = std::max(max_abs, std::abs(x - y));
      dot += x * y, aa += x * x, bb += y * y;
      if (x > a[std::size_t(r * cols + ia)]) ia = c;
      if (y > b[std::size_t(r * cols + ib)]) ib = c;
    }
    cos_sum += (aa > 0 && bb > 0) ? dot / std::sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
    top1 += ia == ib;
    na[std::size_t(r)] = std::sqrt(aa), nb[std::size_t(r)] = std::sqrt(bb);
  }
  nlohmann::json q = {{"rows", rows},
                      {"cols", cols},
                      {"relative_error", den > 0 ? std::sqrt(num / den) : std::sqrt(num)},
                      {"max_abs_error", max_abs},
                      {"mean_cosine", rows ? cos_sum / double(rows) : 1.0},
                      {"top1_agreement", rows ? double(top1) / double(rows) : 1.0}};
  if (rows >= 3 && rows <= 4096) {
    // nearest other row by cosine (embeddings: nearest-neighbour sentence)
    auto nearest = [&](const std::vector<double>& m, const std::vector<double>& nrm, std::int64_t i) {
      std::int64_t best = -1;
      double bv = -2;
      for (std::int64_t j = 0; j < rows; ++j) {
        if (j == i) continue;
        double d = 0;
        for (std::int64_t c = 0; c < cols; ++c) d += m[std::size_t(i * cols + c)] * m[std::size_t(j * cols + c)];
        const double cs = nrm[std::size_t(i)] > 0 && nrm[std::size_t(j)] > 0 ? d / (nrm[std::size_t(i)] * nrm[std::size_t(j)]) : 0;
        if (cs > bv) bv = cs, best = j;
      }
      return best;
    };
    std::int64_t agree = 0;
    for (std::int64_t i = 0; i < rows; ++i) agree += nearest(a, na, i) == nearest(b, nb, i);
    q["nn_agreement"] = double(agree) / double(rows);
  }
  return q;
}

std::string human_bytes(double b) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(2);
  if (b >= 1 << 30) o << b / double(1 << 30) << " GiB";
  else if (b >= 1 << 20) o << b / double(1 << 20) << " MiB";
  else if (b >= 1 << 10) o << b / double(1 << 10) << " KiB";
  else o << b << " B";
  return o.str();
}

std::string markdown_report(const nlohmann::json& r) {
  std::ostringstream o;
  o << "# ymlopt optimize: " << r["sequence"].get<std::string>() << " on " << r["model"]["workflow"].get<std::string>()
    << "\n\npasses: `" << r["passes"].get<std::string>() << "`\n\n";
  if (!r.contains("original")) {
    o << "weights: " << human_bytes(r["weight_bytes"]["original"].get<double>()) << " -> "
      << human_bytes(r["weight_bytes"]["optimized"].get<double>()) << "\n";
    return o.str();
  }
  const auto& a = r["original"];
  const auto& b = r["optimized"];
  auto row = [&](const char* what, double x, double y, bool bytes) {
    o << "| " << what << " | " << (bytes ? human_bytes(x) : std::to_string(x)) << " | "
      << (bytes ? human_bytes(y) : std::to_string(y)) << " | " << std::fixed << std::setprecision(3)
      << (x > 0 ? y / x : 0.0) << "x |\n";
    o.unsetf(std::ios::fixed);
  };
  o << "| | original | optimized | ratio |\n|---|---|---|---|\n";
  row("weight bytes", a["weight_bytes"].get<double>(), b["weight_bytes"].get<double>(), true);
  row("allocated + mapped", a["allocated"].get<double>() + a["mapped"].get<double>(),
      b["allocated"].get<double>() + b["mapped"].get<double>(), true);
  row("activation peak", a["activation_peak"].get<double>(), b["activation_peak"].get<double>(), true);
  row("GFLOP", a["flops"].get<double>() / 1e9, b["flops"].get<double>() / 1e9, false);
  row("time (median ms)", a["time_median_us"].get<double>() / 1e3, b["time_median_us"].get<double>() / 1e3, false);
  if (a.contains("predicted") && b.contains("predicted"))
    row("predicted time (ms)", a["predicted"]["makespan_us"].get<double>() / 1e3,
        b["predicted"]["makespan_us"].get<double>() / 1e3, false);
  o << "\n| output | relative error | mean cosine | top-1 agreement | nn agreement |\n|---|---|---|---|---|\n";
  for (const auto& [k, q] : r["quality"].items())
    o << "| " << k << " | " << q["relative_error"].get<double>() << " | " << q["mean_cosine"].get<double>() << " | "
      << q["top1_agreement"].get<double>() << " | "
      << (q.contains("nn_agreement") ? std::to_string(q["nn_agreement"].get<double>()) : std::string("-")) << " |\n";
  return o.str();
}

// The options of `ymlopt optimize`.
struct OptimizeArgs {
  WorkflowArgs wf;
  std::string passes_text, sequence_file, out_dir, backend = "sequential";
  std::vector<std::string> calib_sets;
  std::string calib_file;
  std::string run_name;
  bool eval = false, list = false, no_history = false;
  int reps = 3;
};

// Parses and checks the options; an exit code when the command ends here
// (--help, --list-passes).
std::optional<int> parse_optimize_args(const std::vector<std::string>& args, OptimizeArgs& a) {
  po::options_description d("ymlopt optimize MODEL.xml (--passes LIST | --sequence SEQ.xml) [options]");
  d.add_options()("help,h", "show this help")("passes,p", po::value(&a.passes_text),
                                               "comma-separated passes, options after colons: "
                                               "quant.group:bits=4:group=128,prune.nm")(
      "sequence", po::value(&a.sequence_file), "a <sequence> file listing the passes (workflows/sequences/)")(
      "out,o", po::value(&a.out_dir), "output directory (default runs/<model>-<sequence>-<time>)")(
      "name", po::value(&a.run_name), "name of this sequence in reports (default: the sequence's, or 'passes')")(
      "eval", po::bool_switch(&a.eval), "run the original and the optimized model and compare them")(
      "backend,b", po::value(&a.backend), "backend for --eval: sequential (default) or starpu")(
      "reps", po::value(&a.reps), "timed runs of each model for --eval (median reported; default 3)")(
      "no-history", po::bool_switch(&a.no_history),
      "--eval: predict from the calibrated rates only, and record nothing in the machine's task history")(
      "calib-set", po::value(&a.calib_sets)->composing(),
      "NAME=VALUE for the calibration runs only (e.g. other input ids; default: the model's own inputs)")(
      "calib-sets", po::value(&a.calib_file),
      "a file with one calibration run per line (NAME=VALUE ...); their layer inputs are stacked")(
      "list-passes", po::bool_switch(&a.list), "list the passes and their options");
  add_workflow_options(d, a.wf);
  // --list-passes needs no model
  if (std::find(args.begin(), args.end(), "--list-passes") != args.end()) {
    for (const auto& p : opt::all_passes()) {
      std::cout << p.name << "\n    " << p.doc << "\n";
      for (const auto& [o, doc] : p.options) std::cout << "    " << o << ": " << doc << "\n";
    }
    return 0;
  }
  if (parse_or_help(args, d, &a.wf)) return 0;
  if (a.passes_text.empty() == a.sequence_file.empty()) throw UsageError("give exactly one of --passes and --sequence");
  if (a.backend != "starpu" && a.backend != "sequential")
    throw UsageError("unknown backend '" + a.backend + "' (expected starpu or sequential)");
  if (a.reps < 1) throw UsageError("--reps must be >= 1");
  return std::nullopt;
}

// The passes, from --sequence or --passes; false (errors printed) when the sequence file has errors.
bool load_sequence(const OptimizeArgs& a, Sequence& seq) {
  if (!a.sequence_file.empty()) {
    if (!fs::exists(a.sequence_file)) throw UsageError(a.sequence_file + ": no such file");
    Diagnostics diags;
    if (!parse_sequence(a.sequence_file, seq, diags)) {
      std::cerr << diags.str() << diags.error_count() << " error" << (diags.error_count() == 1 ? "" : "s") << " in "
                << a.sequence_file << "\n";
      return false;
    }
  } else {
    try {
      seq.passes = opt::parse_pass_list(a.passes_text);
    } catch (const opt::PassError& e) {
      throw UsageError(e.what());
    }
    seq.name = "passes";
  }
  if (!a.run_name.empty()) seq.name = a.run_name;
  return true;
}

// The calibration runs' --set lists: one empty run (the model's own inputs), or
// one per line of --calib-sets FILE.
std::vector<std::vector<std::string>> calibration_run_sets(const std::string& calib_file) {
  std::vector<std::vector<std::string>> runs;
  if (calib_file.empty()) {
    runs.push_back({});
    return runs;
  }
  std::ifstream in(calib_file);
  if (!in) throw UsageError("--calib-sets: cannot read '" + calib_file + "'");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> sets;
    for (std::string w; words >> w;) sets.push_back(w);
    if (!sets.empty()) runs.push_back(std::move(sets));
  }
  if (runs.empty()) throw UsageError("--calib-sets: '" + calib_file + "' lists no run");
  return runs;
}

// Calibration: the linear layers' inputs on the model's own inputs (--calib-set
// overrides for every calibration run; --calib-sets FILE: one run per line, the
// inputs stacked). The compiled runs go to `run_dags` when `keep_runs`. The exit
// code (0: done).
int capture_calibration(const OptimizeArgs& a, const ComponentRegistry& reg, bool keep_runs, opt::Calibration& calib,
                        std::vector<Dag>& run_dags, nlohmann::json& report) {
  const std::vector<std::vector<std::string>> runs = calibration_run_sets(a.calib_file);
  for (std::size_t r = 0; r < runs.size(); ++r) {
    WorkflowArgs cwf = a.wf;
    for (const auto& c : a.calib_sets) cwf.sets.push_back(c);
    for (const auto& c : runs[r]) cwf.sets.push_back(c);
    CompileResult ccr;
    if (int rc = compile(cwf, reg, ccr)) return rc;
    try {
      opt::Calibration one = opt::capture_linear_inputs(ccr.dag, a.out_dir + "/calibration");
      for (auto& [key, in] : one.inputs) {
        auto [it, fresh] = calib.inputs.try_emplace(key, std::move(in));
        if (fresh) continue;
        if (it->second.k != in.k) throw std::runtime_error("task '" + key + "' changes width between calibration runs");
        it->second.x.insert(it->second.x.end(), in.x.begin(), in.x.end());
        it->second.m += in.m;
      }
    } catch (const std::exception& e) {
      std::cerr << "ymlopt: error: calibration run " << r + 1 << " failed: " << e.what() << "\n";
      return 1;
    }
    if (keep_runs) run_dags.push_back(std::move(ccr.dag));
  }
  std::int64_t rows = 0;
  for (const auto& [key, in] : calib.inputs) rows = std::max(rows, in.m);
  report["calibration"] = {{"set", a.calib_sets}, {"runs", runs.size()}, {"layers", calib.inputs.size()},
                           {"max_rows", rows}};
  return 0;
}

// Runs the passes in order; the exit code (0: all ran; 2: an option value only
// a run can judge; 1: a pass failed).
int run_passes(opt::PassContext& ctx, const Sequence& seq) {
  for (const auto& p : seq.passes) {
    try {
      opt::run_pass(ctx, p);
    } catch (const opt::PassError& e) {
      std::cerr << "ymlopt: error: pass " << p.text() << ": " << e.what() << "\n";
      return 2;
    } catch (const std::exception& e) {
      std::cerr << "ymlopt: error: pass " << p.text() << ": " << e.what() << "\n";
      return 1;
    }
  }
  return 0;
}

// --eval: runs the original and the optimized model `reps` times each and adds
// their figures, the predictions and the output quality to `report`; the exit code.
int evaluate_models(const OptimizeArgs& a, const ComponentRegistry& reg, const Dag& optimized, nlohmann::json& report) {
  CompileResult ocr0;
  if (int rc = compile(a.wf, reg, ocr0)) return rc;
  // each model is predicted before it runs, from the history of the runs before
  // it (the original's included, for the optimized model) and the rates
  History history = a.no_history ? History{} : load_history();
  RunOutcome ra, rb;
  Prediction pa, pb;
  try {
    pa = predict_run(ocr0.dag, a.backend, 0, &history);
    ra = run_model(ocr0.dag, a.backend, a.reps, a.out_dir + "/eval-original", a.no_history ? nullptr : &history);
    pb = predict_run(optimized, a.backend, 0, &history);
    rb = run_model(optimized, a.backend, a.reps, a.out_dir + "/eval-optimized", a.no_history ? nullptr : &history);
    if (!a.no_history) save_history(history);
  } catch (const std::exception& e) {
    std::cerr << "ymlopt: error: " << e.what() << "\n";
    return 1;
  }
  auto side = [](const RunOutcome& o) {
    return nlohmann::json{{"weight_bytes", o.weight_bytes}, {"allocated", o.allocated},   {"mapped", o.mapped},
                          {"activation_peak", o.activation_peak}, {"flops", o.flops},   {"times_us", o.times_us},
                          {"time_median_us", o.median_us}};
  };
  report["original"] = side(ra);
  report["optimized"] = side(rb);
  // the performance model's figures beside the measured ones (ratios: predicted / measured)
  report["original"]["predicted"] = prediction_report(pa, ra.median_us, double(ra.allocated + ra.mapped), 0);
  report["optimized"]["predicted"] = prediction_report(pb, rb.median_us, double(rb.allocated + rb.mapped), 0);
  report["backend"] = a.backend;
  nlohmann::json quality = nlohmann::json::object();
  for (const auto& [k, va] : ra.outputs) {
    auto it = rb.outputs.find(k);
    if (it == rb.outputs.end() || it->second.size() != va.size()) continue;
    const auto [rows, cols] = ra.output_shape[k];
    quality[k] = compare_outputs(va, it->second, rows, cols);
  }
  report["quality"] = quality;
  return 0;
}

}  // namespace

int cmd_optimize(const std::vector<std::string>& args) {
  OptimizeArgs a;
  if (const std::optional<int> rc = parse_optimize_args(args, a)) return *rc;
  Sequence seq;
  if (!load_sequence(a, seq)) return 1;
  std::string pass_text;
  for (const auto& p : seq.passes) pass_text += (pass_text.empty() ? "" : ",") + p.text();

  ComponentRegistry reg;
  CompileResult cr;
  if (int rc = prepare(a.wf, reg, cr)) return rc;
  if (a.out_dir.empty()) {
    const std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    a.out_dir = "runs/" + cr.dag.name + "-" + seq.name + "-" + stamp;
  }
  std::error_code ec;
  fs::create_directories(a.out_dir, ec);
  if (ec) {
    std::cerr << "ymlopt: error: cannot create '" << a.out_dir << "': " << ec.message() << "\n";
    return 1;
  }
  const std::string out_xml = a.out_dir + "/" + cr.dag.name + ".opt.xml";
  const std::string out_weights = a.out_dir + "/" + cr.dag.name + ".opt.safetensors";

  nlohmann::json report = {{"sequence", seq.name}, {"passes", pass_text},
                           {"model", {{"workflow", a.wf.file}, {"set", a.wf.sets}}}};
  const std::int64_t original_weight_bytes = analyze(cr.dag).parameter_total;
  opt::Calibration calib;
  const bool keep_runs = opt::needs_calibration_runs(seq.passes);
  std::vector<Dag> run_dags;  // kept for passes that capture again on compressed layers
  if (opt::needs_calibration(seq.passes))
    if (int rc = capture_calibration(a, reg, keep_runs, calib, run_dags, report)) return rc;
  opt::ModelEditor ed(std::move(cr.dag), reg);
  opt::PassContext ctx{ed, calib.inputs.empty() ? nullptr : &calib};
  std::unique_ptr<opt::CalibrationRuns> runs;
  if (keep_runs) {
    runs = std::make_unique<opt::CalibrationRuns>(std::move(run_dags), reg, a.out_dir + "/calibration");
    ctx.runs = runs.get();
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (int rc = run_passes(ctx, seq)) return rc;
  std::map<std::string, std::string> meta = {{"ymlopt.sequence", seq.name}, {"ymlopt.passes", pass_text}};
  for (const auto& rec : ctx.log)
    if (rec.contains("formats"))
      for (const auto& [k, v] : rec["formats"].items()) meta["ymlopt.format." + k] = v.get<std::string>();
  ed.write(out_xml, out_weights, meta);
  const double opt_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report["pass_log"] = ctx.log;
  report["optimize_seconds"] = opt_seconds;
  report["outputs"] = {{"workflow", out_xml}, {"weights", out_weights}};

  // the written workflow must compile (it is what users run)
  WorkflowArgs owf;
  owf.file = out_xml;
  owf.plugins = a.wf.plugins;
  CompileResult ocr;
  if (int rc = compile(owf, reg, ocr)) {
    std::cerr << "ymlopt: error: the rewritten workflow does not compile (a bug in a pass)\n";
    return rc == 2 ? 1 : rc;
  }
  report["weight_bytes"] = {{"original", original_weight_bytes}, {"optimized", analyze(ocr.dag).parameter_total}};
  if (a.eval)
    if (int rc = evaluate_models(a, reg, ocr.dag, report)) return rc;
  write_file_atomic(a.out_dir + "/report.json", report.dump(1) + "\n");
  const std::string md = markdown_report(report);
  write_file_atomic(a.out_dir + "/report.md", md);
  std::cout << md << "\nwritten: " << out_xml << (fs::exists(out_weights) ? ", " + out_weights : std::string()) << ", "
            << a.out_dir << "/report.json\n";
  return 0;
}

}  // namespace ymlopt
