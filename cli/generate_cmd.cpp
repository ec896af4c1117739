#include "generate_cmd.hpp"

#include <boost/program_options.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "embed_cmd.hpp"
#include "model_checkpoint.hpp"
#include "run_cmd.hpp"
#include "text/hf_tokenizer.hpp"
#include "usage_error.hpp"
#include "ymlopt/xml/diagnostic.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ymlopt {

namespace {

struct GenerateArgs {
  std::vector<std::string> prompts, ids;  // several: a batch, one sequence each
  std::string model, workflow, eos, kv_dtype = "f32";
  std::int64_t max_new = 32, context = 0, top_k = 0, seed = 0;
  double temperature = 0, top_p = 1, min_p = 0;
  bool ignore_eos = false, quiet = false;
  RunArgs run;
};

/// A token id written in decimal (0 .. 2^31 - 1), else nullopt.
std::optional<std::int32_t> id_of(const std::string& s) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end || errno || v < 0 || v > INT32_MAX) return std::nullopt;
  return std::int32_t(v);
}

/// "1,5,9" -> ids; a UsageError naming the option otherwise.
std::vector<std::int32_t> parse_id_list(const std::string& text, const char* option) {
  std::vector<std::int32_t> ids;
  std::stringstream ss(text);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    const auto id = id_of(tok);
    if (!id)
      throw UsageError(std::string("generate: ") + option + " expects token ids >= 0 separated by commas, not '" + text + "'");
    ids.push_back(*id);
  }
  return ids;
}

bool parse_generate_args(const std::vector<std::string>& args, GenerateArgs& a) {
  po::options_description d(
      "ymlopt generate --model DIR (--prompt TEXT | --ids 1,2,3)... [-n N] [sampling] [run options]\n"
      "  a prefill of the prompt fills the KV cache, then one decode step per token (a runtime loop of the\n"
      "  model's generate workflow); the text streams to stdout, the speeds to stderr. Several --prompt (or\n"
      "  --ids) make a batch: one sequence each, their cache in blocks taken as they grow and given back as\n"
      "  they end; each sequence's text is printed when all have ended");
  d.add_options()("help,h", "show this help")("model", po::value(&a.model),
                                              "a Hugging Face folder (config.json, safetensors, tokenizer.json) or a "
                                              "gpt2/llama safetensors file")(
      "prompt,p", po::value(&a.prompts)->composing(), "the text to continue (DIR/tokenizer.json turns it into ids); "
      "repeat for a batch")(
      "ids", po::value(&a.ids)->composing(), "the prompt as token ids, comma-separated (instead of --prompt); repeat for a batch")(
      "max-new,n", po::value(&a.max_new), "tokens to generate at most (default 32)")(
      "temperature", po::value(&a.temperature), "0 (default): greedy; > 0: sample at this temperature")(
      "top-k", po::value(&a.top_k), "sample among the k most likely tokens (0: all)")(
      "top-p", po::value(&a.top_p), "sample among the smallest set reaching this probability (1: all)")(
      "min-p", po::value(&a.min_p), "drop tokens below this fraction of the most likely one's probability")(
      "seed", po::value(&a.seed), "seed of the draws (a run is reproducible)")(
      "eos", po::value(&a.eos),
      "end tokens, comma-separated ids or token strings such as '</s>' (default: generation_config.json, "
      "config.json or the tokenizer's)")(
      "ignore-eos", po::bool_switch(&a.ignore_eos), "generate max-new tokens whatever they are")(
      "context", po::value(&a.context), "the longest context of a sequence (default: its longest prompt + max-new)")(
      "kv-dtype", po::value(&a.kv_dtype),
      "the KV cache's storage: f32 (default), f16, or i8 (a scale per token and head): half or a quarter the memory")(
      "workflow", po::value(&a.workflow), "the generate workflow (default: workflows/models/ARCH_generate.xml)")(
      "set,s", po::value(&a.run.wf.sets)->composing(), "override a workflow parameter: NAME=VALUE (repeatable)")(
      "out,o", po::value(&a.run.out), "run directory (default runs/<workflow>-<time>): generated.npy, report.json")(
      "backend,b", po::value(&a.run.backend), "starpu (default) or sequential")(
      "ncpu", po::value(&a.run.ncpu), "number of CPU workers (default: all)")(
      "quiet,q", po::bool_switch(&a.quiet), "the generated text only: no prompt echo, no speeds");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(d).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("generate: ") + e.what());
  }
  if (vm.count("help")) {
    std::cout << d;
    return false;
  }
  if (a.model.empty()) throw UsageError("generate: --model DIR is required");
  if (a.prompts.empty() == a.ids.empty())
    throw UsageError("generate: give the prompts as --prompt TEXT or --ids IDS (one of the two kinds)");
  if (a.max_new < 1) throw UsageError("generate: -n must be >= 1, not " + std::to_string(a.max_new));
  if (a.max_new > INT32_MAX / 2 || a.context > INT32_MAX / 2)  // positions are i32
    throw UsageError("generate: -n and --context must be below 2^30 tokens");
  if (!(a.temperature >= 0) || !std::isfinite(a.temperature))
    throw UsageError("generate: --temperature must be >= 0 (0: greedy)");
  if (a.top_k < 0) throw UsageError("generate: --top-k must be >= 0 (0: every token)");
  if (!(a.top_p > 0 && a.top_p <= 1)) throw UsageError("generate: --top-p must be in (0, 1]");
  if (!(a.min_p >= 0 && a.min_p < 1)) throw UsageError("generate: --min-p must be in [0, 1)");
  if (a.context < 0) throw UsageError("generate: --context must be >= 0");
  if (a.kv_dtype != "f32" && a.kv_dtype != "f16" && a.kv_dtype != "i8")
    throw UsageError("generate: --kv-dtype is f32, f16 or i8, not '" + a.kv_dtype + "'" +
                     did_you_mean(a.kv_dtype, {"f32", "f16", "i8"}));
  if (a.ignore_eos && !a.eos.empty()) throw UsageError("generate: --eos and --ignore-eos contradict each other");
  if (a.run.backend != "starpu" && a.run.backend != "sequential")
    throw UsageError("generate: --backend is starpu or sequential, not '" + a.run.backend + "'");
  if (a.run.ncpu < 0) throw UsageError("generate: --ncpu must be >= 0");
  for (const auto& [name, value] : parse_sets(a.run.wf.sets))
    for (const char* mine : {"ids", "seq", "max_new", "cache_rows", "temperature", "top_k", "top_p", "min_p", "seed", "eos",
                             "kv_dtype", "batch", "prompt_seq", "prompt_last"})
      if (name == mine) throw UsageError("generate: --set " + name + "=" + value + ": give it as an option of generate");
  return true;
}

/// The end tokens a model folder names: generation_config.json's
/// eos_token_id, else config.json's (an id or a list), else the tokenizer's.
std::vector<std::int64_t> model_eos(const ModelCheckpoint& c, const text::HfTokenizer* tok) {
  const fs::path dir = fs::is_directory(c.path) ? fs::path(c.path) : fs::path(c.path).parent_path();
  for (const char* name : {"generation_config.json", "config.json"}) {
    std::ifstream in(dir / name, std::ios::binary);
    if (!in) continue;
    std::ostringstream ss;
    ss << in.rdbuf();
    if (auto ids = eos_token_ids((dir / name).string(), ss.str())) return *ids;
  }
  if (tok && tok->eos_id()) return {*tok->eos_id()};
  return {};
}

/// --eos: ids, or token strings the model's tokenizer knows ("</s>,<|eot_id|>").
std::vector<std::int64_t> eos_tokens(const std::string& text, const text::HfTokenizer* tok, const std::string& model) {
  std::vector<std::int64_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (const auto v = id_of(item)) {
      ids.push_back(*v);
      continue;
    }
    if (!tok) throw ModelCheckpointError("--eos names '" + item + "', but " + model + " has no tokenizer.json to look it up");
    const auto id = tok->token_to_id(item);
    if (!id) throw ModelCheckpointError("--eos: '" + item + "' is not a token of " + model + "'s tokenizer.json");
    ids.push_back(*id);
  }
  if (ids.empty()) throw UsageError("generate: --eos names no token");
  return ids;
}

/// Prints the generated text as it grows: the decoding of every token so
/// far, less what was printed (a token may complete a character or a word
/// piece only with the next one, so a trailing U+FFFD waits).
class TextStream {
 public:
  TextStream(const text::HfTokenizer* tok, bool echo_ids) : tok_(tok), echo_ids_(echo_ids) {}
  void update(const std::vector<std::int32_t>& ids) {
    if (ids.size() == shown_ids_) return;
    if (!tok_ || echo_ids_) {
      for (std::size_t i = shown_ids_; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
    } else {
      std::string t = tok_->decode(ids, true);
      static const std::string kReplacement = "\xEF\xBF\xBD";
      if (t.size() >= kReplacement.size() && t.compare(t.size() - 3, 3, kReplacement) == 0) return;
      if (t.size() > printed_) std::cout << t.substr(printed_);
      printed_ = std::max(printed_, t.size());
    }
    shown_ids_ = ids.size();
    std::cout << std::flush;
  }

 private:
  const text::HfTokenizer* tok_;
  bool echo_ids_;
  std::size_t shown_ids_ = 0, printed_ = 0;
};

std::int32_t data_named(const Dag& dag, const std::string& name) {
  for (std::size_t i = 0; i < dag.data.size(); ++i)
    if (dag.data[i].name == name) return std::int32_t(i);
  throw std::runtime_error("workflow '" + dag.file + "' has no data '" + name +
                           "': a generate workflow keeps its tokens in 'generated' and their number in 'count'");
}

/// Each sequence's tokens so far (data 'generated' [sequences, max_new] and
/// 'count' [sequences] of the run).
std::vector<std::vector<std::int32_t>> read_generated(const Dag& dag, const DataStore& store, Session* s) {
  const std::int32_t g = data_named(dag, "generated"), n = data_named(dag, "count");
  if (s) s->acquire(n, false), s->acquire(g, false);
  const DataDecl &gd = dag.data[size_t(g)], &nd = dag.data[size_t(n)];
  const std::int64_t seqs = nd.rows * nd.cols, cap = seqs > 1 ? gd.cols : gd.rows * gd.cols;
  const auto* counts = static_cast<const std::int32_t*>(store.base(n));
  const auto* p = static_cast<const std::int32_t*>(store.base(g));
  std::vector<std::vector<std::int32_t>> ids(static_cast<std::size_t>(seqs));
  for (std::int64_t q = 0; q < seqs; ++q) {
    const std::int64_t k = std::clamp<std::int64_t>(counts[q], 0, cap);
    ids[size_t(q)].assign(p + q * gd.ld, p + q * gd.ld + k);
  }
  if (s) s->release(g), s->release(n);
  return ids;
}

std::size_t total(const std::vector<std::vector<std::int32_t>>& ids) {
  std::size_t n = 0;
  for (const auto& v : ids) n += v.size();
  return n;
}

/// "KV cache: at most 12 of its 40 blocks of 16 tokens in use (3.0 of 10.0 MiB)":
/// data 'pool' ([2 + blocks]: in use, most in use) and the caches' bytes.
std::string pool_line(const Dag& dag, const DataStore& store) {
  std::int32_t pool = -1;
  double bytes = 0;
  for (std::size_t i = 0; i < dag.data.size(); ++i) {
    const DataDecl& d = dag.data[i];
    if (d.name == "pool") pool = std::int32_t(i);
    if (d.name == "kc" || d.name == "vc" || d.name == "kcs" || d.name == "vcs") bytes += double(d.storage_bytes());
  }
  if (pool < 0 || !store.base(pool)) return "";
  const DataDecl& pd = dag.data[size_t(pool)];
  const std::int64_t blocks = pd.rows * pd.cols - 2;
  if (blocks < 1) return "";
  const std::int32_t most = static_cast<const std::int32_t*>(store.base(pool))[1];
  char buf[200];
  std::snprintf(buf, sizeof buf, "KV cache: at most %d of its %lld blocks in use (%.1f of %.1f MiB)", most,
                static_cast<long long>(blocks), bytes * most / double(blocks) / 1048576.0, bytes / 1048576.0);
  return buf;
}

/// The prefill's time: from the first start to the last end of the tasks
/// before the decode loop.
double prefill_seconds(const Dag& dag, const ExecResult& r) {
  std::int32_t end = std::int32_t(dag.tasks.size());
  for (const Region& g : dag.regions)
    if (g.kind == Region::Kind::while_ || g.kind == Region::Kind::until) end = std::min(end, g.first_task);
  double t0 = INFINITY, t1 = 0;
  for (std::int32_t t = 0; t < end && std::size_t(t) < r.records.size(); ++t)
    if (r.records[size_t(t)].ran) t0 = std::min(t0, r.records[size_t(t)].start_us), t1 = std::max(t1, r.records[size_t(t)].end_us);
  return t1 > t0 ? (t1 - t0) * 1e-6 : 0;
}

}  // namespace

namespace {

/// The prompts as token ids (--prompt through the tokenizer, or --ids), with
/// the checks of their length against the model's context and --context.
std::vector<std::vector<std::int32_t>> prompt_ids_of(const GenerateArgs& a, const ModelCheckpoint& c,
                                                     const text::HfTokenizer* tok) {
  std::vector<std::vector<std::int32_t>> prompts;
  for (const std::string& t : a.prompts) {
    prompts.push_back(tok->encode(t, true));
    if (prompts.back().empty()) throw ModelCheckpointError("--prompt '" + t + "' gives no tokens");
  }
  for (const std::string& t : a.ids) prompts.push_back(parse_id_list(t, "--ids"));
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    const std::string which = prompts.size() > 1 ? " of sequence " + std::to_string(s) : "";
    const std::int64_t want = std::int64_t(prompts[s].size()) + a.max_new;
    if (c.shape.context > 0 && want > c.shape.context)
      throw ModelCheckpointError("the prompt" + which + "'s " + std::to_string(prompts[s].size()) + " tokens and -n " +
                                 std::to_string(a.max_new) + " make " + std::to_string(want) +
                                 ", more than the model's context of " + std::to_string(c.shape.context));
    if (a.context > 0 && want > a.context)
      throw UsageError("generate: --context " + std::to_string(a.context) + " is less than the prompt" + which + "'s " +
                       std::to_string(prompts[s].size()) + " tokens and -n " + std::to_string(a.max_new));
  }
  return prompts;
}

/// The workflow parameters of a generation: the prompts concatenated (a batch
/// also names each id's sequence and each sequence's last row), sampling, cache.
void generate_sets(const GenerateArgs& a, const ModelCheckpoint& c, const std::vector<std::vector<std::int32_t>>& prompts,
                   const std::string& eos_list, std::vector<std::string>& sets) {
  std::vector<std::int32_t> all, seq, last;
  std::size_t longest = 0;
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    all.insert(all.end(), prompts[s].begin(), prompts[s].end());
    seq.insert(seq.end(), prompts[s].size(), std::int32_t(s));
    last.push_back(std::int32_t(all.size() - 1));
    longest = std::max(longest, prompts[s].size());
  }
  std::set<std::string> given;  // by --set: those win over what is derived here
  for (const auto& [name, value] : parse_sets(sets)) given.insert(name);
  auto num = [](double v) {
    std::ostringstream o;
    o.precision(17);
    o << v;
    return o.str();
  };
  for (const std::string& s :
       {"ids=" + save_prompt_ids(all).path, "seq=" + std::to_string(all.size()), "max_new=" + std::to_string(a.max_new),
        "temperature=" + num(a.temperature), "top_k=" + std::to_string(a.top_k), "top_p=" + num(a.top_p),
        "min_p=" + num(a.min_p), "seed=" + std::to_string(a.seed), "eos=" + eos_list, "kv_dtype=" + a.kv_dtype,
        "cache_rows=" + std::to_string(a.context > 0 ? a.context : std::int64_t(longest) + a.max_new)})
    sets.push_back(s);
  // tiles sized for the CPU workers; the same on both backends, so they give the same tokens
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (!given.count("workers")) sets.push_back("workers=" + std::to_string(a.run.ncpu > 0 ? unsigned(a.run.ncpu) : cores));
  if (prompts.size() > 1)
    for (const std::string& s : {"batch=" + std::to_string(prompts.size()), "prompt_seq=" + save_prompt_ids(seq).path,
                                 "prompt_last=" + save_prompt_ids(last).path})
      sets.push_back(s);
  if (prompts.size() > 1 && c.window > 0 && !given.count("longest"))  // sizes a window's pool
    sets.push_back("longest=" + std::to_string(longest));
}

/// A batch's texts, once every sequence has ended: its prompt, then its tokens.
void print_batch(const GenerateArgs& a, const std::vector<std::vector<std::int32_t>>& ids,
                 const text::HfTokenizer* tok) {
  for (std::size_t s = 0; s < ids.size(); ++s) {
    std::cout << (s ? "\n" : "") << "--- sequence " << s << " ---\n";
    if (!a.quiet && s < a.prompts.size()) std::cout << a.prompts[s];
    if (tok && !a.prompts.empty()) {
      std::cout << tok->decode(ids[s], true);
    } else {
      for (std::size_t i = 0; i < ids[s].size(); ++i) std::cout << (i ? " " : "") << ids[s][i];
    }
    std::cout << "\n";
  }
  std::cout << std::flush;
}

}  // namespace

int cmd_generate(const std::vector<std::string>& args) {
  GenerateArgs a;
  if (!parse_generate_args(args, a)) return 0;
  ModelCheckpoint c;
  std::optional<text::HfTokenizer> tok;
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<std::int64_t> eos;
  try {
    c = read_checkpoint(a.model);
    if (c.shape.arch != "gpt2" && c.shape.arch != "llama")
      throw ModelCheckpointError(a.model + ": a " + c.shape.arch + " checkpoint: only decoders (gpt2, llama) generate");
    const fs::path dir = fs::is_directory(a.model) ? fs::path(a.model) : fs::path(a.model).parent_path();
    if (fs::exists(dir / "tokenizer.json")) tok = text::HfTokenizer::from_file((dir / "tokenizer.json").string());
    else if (!a.prompts.empty())
      throw ModelCheckpointError(a.model + ": no tokenizer.json to turn --prompt into ids (give --ids instead)");
    prompts = prompt_ids_of(a, c, tok ? &*tok : nullptr);
    if (!a.ignore_eos) {
      if (!a.eos.empty())
        eos = eos_tokens(a.eos, tok ? &*tok : nullptr, a.model);
      else
        eos = model_eos(c, tok ? &*tok : nullptr);
    }
  } catch (const ModelCheckpointError& e) {
    std::cerr << "ymlopt: error: generate: " << e.what() << "\n";
    return 1;
  } catch (const text::TokenizerError& e) {
    std::cerr << "ymlopt: error: generate: " << e.what() << "\n";
    return 1;
  }
  std::string eos_list;
  for (auto id : eos) {
    if (!eos_list.empty()) eos_list += ',';
    eos_list += std::to_string(id);
  }

  RunArgs& r = a.run;
  r.wf.file = a.workflow.empty() ? workflows_dir() + "/models/" + c.shape.arch + "_generate.xml" : a.workflow;
  r.wf.model = a.model;
  generate_sets(a, c, prompts, eos_list, r.wf.sets);
  r.quiet = true;
  const bool batch = prompts.size() > 1;
  std::size_t prompt_tokens = 0;
  for (const auto& p : prompts) prompt_tokens += p.size();

  if (!a.quiet && !batch && !a.prompts.empty()) std::cout << a.prompts[0] << std::flush;
  TextStream out(tok ? &*tok : nullptr, a.prompts.empty());
  using Clock = std::chrono::steady_clock;
  Clock::time_point first, last;
  std::size_t first_count = 0, count = 0;
  std::vector<double> steps;  // seconds per step (a token per sequence still going)
  std::vector<std::vector<std::int32_t>> final_ids;
  std::string pool;
  RunHooks hooks;
  std::string watch_error;  // a workflow without the data generate reads: the run goes on, then fails
  hooks.on_iteration = [&](const Dag& dag, const DataStore& store, std::int32_t, std::int64_t, Session& s) {
    if (!watch_error.empty()) return;
    std::vector<std::vector<std::int32_t>> ids;
    try {
      ids = read_generated(dag, store, &s);
    } catch (const std::runtime_error& e) {
      watch_error = e.what();
      return;
    }
    const std::size_t n = total(ids);
    const auto now = Clock::now();
    if (first_count == 0) first = now, first_count = n;
    else if (n > count) steps.push_back(std::chrono::duration<double>(now - last).count());
    last = now, count = n;
    if (!batch && !ids.empty()) out.update(ids[0]);
  };
  double prefill_s = 0;
  hooks.after_run = [&](const Dag& dag, const DataStore& store, const ExecResult& res) {
    if (!res.ok || !watch_error.empty()) return;
    try {
      final_ids = read_generated(dag, store, nullptr);
    } catch (const std::runtime_error& e) {
      watch_error = e.what();
      return;
    }
    if (!batch && !final_ids.empty()) out.update(final_ids[0]);
    count = total(final_ids);
    prefill_s = prefill_seconds(dag, res);
    pool = pool_line(dag, store);
  };
  const int rc = run_command(r, hooks);
  if (!batch) std::cout << "\n" << std::flush;
  if (rc == 0 && !watch_error.empty()) {
    std::cerr << "ymlopt: error: generate: " << watch_error << "\n";
    return 1;
  }
  if (rc != 0) return rc;
  if (batch) print_batch(a, final_ids, tok ? &*tok : nullptr);
  if (a.quiet) return 0;
  char buf[256];
  const double decode_s = std::chrono::duration<double>(last - first).count();
  std::snprintf(buf, sizeof buf, "prompt: %zu tokens in %.1f ms (%.1f tokens/s); ", prompt_tokens, prefill_s * 1e3,
                prefill_s > 0 ? double(prompt_tokens) / prefill_s : 0.0);
  std::cerr << buf;
  if (count > first_count && decode_s > 0 && !steps.empty()) {
    std::nth_element(steps.begin(), steps.begin() + std::ptrdiff_t(steps.size() / 2), steps.end());
    std::snprintf(buf, sizeof buf, "decode: %zu tokens in %.1f ms (%.2f tokens/s; median step %.1f ms)",
                  count - first_count, decode_s * 1e3, double(count - first_count) / decode_s,
                  steps[steps.size() / 2] * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "decode: none (the prefill drew the only token)");
  }
  std::size_t at_n = 0;
  for (const auto& v : final_ids) at_n += std::int64_t(v.size()) >= a.max_new;
  std::cerr << buf << "; " << count << " generated, ";
  if (!batch)
    std::cerr << (at_n ? "stopped at -n " + std::to_string(a.max_new) : std::string("stopped at an end token"));
  else
    std::cerr << final_ids.size() << " sequences: " << at_n << " stopped at -n " << a.max_new << ", "
              << final_ids.size() - at_n << " at an end token";
  std::cerr << "; " << (pool.empty() ? "" : pool + "; ") << "run directory " << r.out << "\n";
  return 0;
}

}  // namespace ymlopt
