#include "submit_cmd.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "report.hpp"
#include "usage_error.hpp"
#include "workflow_args.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ymlopt {

long parse_slurm_time(const std::string& text) {
  static const std::regex re(R"(^(?:(\d+)-)?(\d+):(\d\d):(\d\d)$)");
  std::smatch m;
  if (!std::regex_match(text, m, re)) return -1;
  if (m[1].length() > 5 || m[2].length() > 6) return -1;
  const long days = m[1].matched ? std::stol(m[1].str()) : 0;
  const long h = std::stol(m[2].str()), mi = std::stol(m[3].str()), s = std::stol(m[4].str());
  if (mi >= 60 || s >= 60) return -1;
  if (m[1].matched && h >= 24) return -1;
  return ((days * 24 + h) * 60 + mi) * 60 + s;
}

std::string choose_mpi_plugin(const std::string& srun_mpi_list) {
  std::vector<std::string> names;
  std::istringstream in(srun_mpi_list);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("srun:", 0) == 0) line = line.substr(5);
    const auto b = line.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    const auto e = line.find_last_not_of(" \t\r");
    const std::string word = line.substr(b, e - b + 1);
    // plugin names only: headers ("MPI plugin types are...") and the versions line have spaces
    if (std::all_of(word.begin(), word.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; }))
      names.push_back(word);
  }
  auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  if (has("pmix")) return "pmix";
  std::string best;
  for (const auto& n : names)
    if (n.rfind("pmix_v", 0) == 0 && (best.empty() || n > best)) best = n;
  if (!best.empty()) return best;
  if (has("pmi2")) return "pmi2";
  return "";
}

namespace {

// Single-quotes a word for sh unless it is made of plainly safe characters.
std::string sh_quote(const std::string& s) {
  const bool safe = !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || std::strchr("_./:=@%+,-", c) != nullptr;
  });
  if (safe) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct Captured {
  int rc = -1;
  std::string out;  // stdout and stderr together
};

// Runs a shell command line, capturing its output.
Captured capture(const std::string& cmd) {
  Captured c;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return c;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) c.out.append(buf, n);
  const int st = ::pclose(p);
  c.rc = st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  return c;
}

// The program's path when it is on PATH; empty otherwise.
std::string find_on_path(const std::string& prog) {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::istringstream in(path);
  for (std::string dir; std::getline(in, dir, ':');) {
    const fs::path p = (dir.empty() ? fs::path(".") : fs::path(dir)) / prog;  // an empty entry is the current directory
    std::error_code ec;
    if (fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string default_run_dir(const std::string& name) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  const std::string base = "runs/" + name + "-" + buf;
  std::string dir = base;
  for (int k = 2; fs::exists(dir); ++k) dir = base + "-" + std::to_string(k);
  return dir;
}

// #SBATCH lines are split on whitespace by sbatch: refuse what would not survive that.
void check_sbatch_word(const std::string& what, const std::string& value) {
  for (unsigned char c : value)
    if (std::isspace(c) || c == '"' || c == '\'' || c == '#' || c < 0x20)
      throw UsageError(what + " '" + value + "' must not contain spaces, quotes or '#' (it goes on an #SBATCH line)");
}

std::string job_name(const std::string& workflow_name) {
  std::string n;
  for (unsigned char c : workflow_name) n += (std::isalnum(c) || c == '-' || c == '_' || c == '.') ? char(c) : '_';
  return n.empty() ? "ymlopt" : n;
}

}  // namespace

std::string batch_script(const SlurmJob& j) {
  const int ranks = j.nodes * j.ntasks_per_node;
  const bool mpi_backend = j.backend == "starpu-mpi";
  // StarPU-MPI keeps one core of each rank for its communication thread
  const int ncpu = mpi_backend ? std::max(1, j.cpus_per_task - 1) : j.cpus_per_task;
  std::ostringstream s;
  s << "#!/bin/bash\n";
  s << "#SBATCH --job-name=" << j.name << "\n";
  s << "#SBATCH --nodes=" << j.nodes << "\n";
  s << "#SBATCH --ntasks-per-node=" << j.ntasks_per_node << "\n";
  s << "#SBATCH --cpus-per-task=" << j.cpus_per_task << "\n";
  s << "#SBATCH --time=" << j.time << "\n";
  if (!j.partition.empty()) s << "#SBATCH --partition=" << j.partition << "\n";
  if (j.gpus_per_node > 0) s << "#SBATCH --gpus-per-node=" << j.gpus_per_node << "\n";
  s << "#SBATCH --chdir=" << j.workdir << "\n";
  s << "#SBATCH --output=" << j.run_dir << "/slurm-%j.out\n";
  s << "#SBATCH --error=" << j.run_dir << "/slurm-%j.err\n";
  if (j.checkpoint) s << "#SBATCH --requeue\n#SBATCH --open-mode=append\n";
  s << "# written by `ymlopt submit`" << (j.submitted_at.empty() ? "" : " at " + j.submitted_at) << ": workflow "
    << j.workflow << ", " << ranks << " rank" << (ranks == 1 ? "" : "s") << " (" << j.nodes << " node"
    << (j.nodes == 1 ? "" : "s") << " x " << j.ntasks_per_node << "), " << j.cpus_per_task << " CPU"
    << (j.cpus_per_task == 1 ? "" : "s") << " per rank, backend " << j.backend << "\n";
  s << "set -eu\n";
  s << "# StarPU provides the parallelism: one thread per BLAS call\n";
  s << "export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1\n";
  s << "export STARPU_NCPU=" << ncpu;
  if (mpi_backend) s << "  # --cpus-per-task minus the StarPU-MPI communication thread";
  s << "\n";
  s << "run_dir=" << sh_quote(j.run_dir) << "\n";
  s << "mkdir -p \"$run_dir\"\n";
  s << "echo \"ymlopt submit: job $SLURM_JOB_ID on $(hostname), $SLURM_NTASKS rank(s), started $(date -u "
       "+%Y-%m-%dT%H:%M:%SZ)\"\n";
  if (j.checkpoint) {
    // the first start runs with --checkpoint tasks; a requeued job (preempted,
    // node failure, scontrol requeue) finds the checkpoint and resumes
    s << "if [ -f \"$run_dir/checkpoint/run.json\" ]; then\n  set -- --resume \"$run_dir\"\nelse\n  set -- "
      << sh_quote(j.workflow) << " --out \"$run_dir\" --checkpoint tasks";
    for (const auto& set : j.sets) s << " --set " << sh_quote(set);
    for (const auto& p : j.plugins) s << " --plugin " << sh_quote(p);
    s << "\nfi\n";
  }
  // srun: every rank gets its own STARPU_HOME (two processes sharing one race on perf-model files)
  s << "srun";
  if (!j.mpi.empty()) s << " --mpi=" << j.mpi;
  s << " --ntasks=" << ranks << " --ntasks-per-node=" << j.ntasks_per_node << " --cpus-per-task=" << j.cpus_per_task;
  if (j.gpus_per_node > 0) s << " --gpus-per-node=" << j.gpus_per_node;
  s << " \\\n  /bin/sh -c 'export STARPU_HOME=\"$1/starpu.${SLURM_PROCID:-0}\"; mkdir -p \"$STARPU_HOME\"; shift; exec "
       "\"$@\"' ymlopt-rank \"$run_dir\" \\\n  ";
  if (j.checkpoint) {
    s << sh_quote(j.ymlopt) << " run \"$@\" --backend " << sh_quote(j.backend) << "\n";
    return s.str();
  }
  s << sh_quote(j.ymlopt) << " run " << sh_quote(j.workflow) << " --out \"$run_dir\" --backend " << sh_quote(j.backend);
  for (const auto& set : j.sets) s << " --set " << sh_quote(set);
  for (const auto& p : j.plugins) s << " --plugin " << sh_quote(p);
  s << "\n";
  return s.str();
}

namespace {

// The options of `ymlopt submit`.
struct SubmitArgs {
  static constexpr int kUnset = std::numeric_limits<int>::min();  // a required option not given
  WorkflowArgs wf;
  std::string out, backend, time, partition;
  int nodes = kUnset, ntasks_per_node = kUnset, cpus_per_task = kUnset, gpus_per_node = 0;
  bool dry_run = false, checkpoint = false;
  int ranks() const { return nodes * ntasks_per_node; }
};

// Parses the options and refuses now everything Slurm would refuse later; false on --help.
bool parse_submit_args(const std::vector<std::string>& args, SubmitArgs& a) {
  po::options_description d(
      "ymlopt submit WF.xml --nodes N --ntasks-per-node T --cpus-per-task C --time HH:MM:SS [options]");
  d.add_options()("help,h", "show this help")("nodes,N", po::value(&a.nodes), "number of nodes (required)")(
      "ntasks-per-node", po::value(&a.ntasks_per_node), "MPI ranks per node (required)")(
      "cpus-per-task,c", po::value(&a.cpus_per_task), "CPU cores per rank (required)")(
      "time,t", po::value(&a.time), "time limit, [D-]HH:MM:SS (required)")(
      "partition,p", po::value(&a.partition), "Slurm partition (default: the cluster's default)")(
      "gpus-per-node", po::value(&a.gpus_per_node), "GPUs per node (default 0)")(
      "out,o", po::value(&a.out), "run directory (default runs/<workflow>-<time>)")(
      "backend,b", po::value(&a.backend),
      "backend of `ymlopt run` (default: starpu for one rank, starpu-mpi for several)")(
      "dry-run", po::bool_switch(&a.dry_run), "print the batch script; write and submit nothing")(
      "checkpoint", po::bool_switch(&a.checkpoint),
      "run with --checkpoint tasks and mark the job requeueable: a requeued job (preemption, node failure, "
      "scontrol requeue) resumes from the checkpoint (one rank only)");
  add_workflow_options(d, a.wf);
  if (parse_or_help(args, d, &a.wf)) return false;

  std::vector<std::string> missing;
  if (a.nodes == SubmitArgs::kUnset) missing.push_back("--nodes");
  if (a.ntasks_per_node == SubmitArgs::kUnset) missing.push_back("--ntasks-per-node");
  if (a.cpus_per_task == SubmitArgs::kUnset) missing.push_back("--cpus-per-task");
  if (a.time.empty()) missing.push_back("--time");
  if (!missing.empty()) {
    std::string m;
    for (const auto& x : missing) m += (m.empty() ? "" : ", ") + x;
    throw UsageError("submit: missing " + m);
  }
  if (a.nodes < 1) throw UsageError("submit: --nodes must be >= 1, got " + std::to_string(a.nodes));
  if (a.ntasks_per_node < 1)
    throw UsageError("submit: --ntasks-per-node must be >= 1, got " + std::to_string(a.ntasks_per_node));
  if (a.cpus_per_task < 1) throw UsageError("submit: --cpus-per-task must be >= 1, got " + std::to_string(a.cpus_per_task));
  if (a.gpus_per_node < 0) throw UsageError("submit: --gpus-per-node must be >= 0, got " + std::to_string(a.gpus_per_node));
  const long seconds = parse_slurm_time(a.time);
  if (seconds < 0)
    throw UsageError("submit: --time '" + a.time + "' is not HH:MM:SS or D-HH:MM:SS (minutes and seconds below 60)");
  if (seconds == 0) throw UsageError("submit: --time must be longer than 00:00:00");
  if (!a.partition.empty()) check_sbatch_word("--partition", a.partition);
  const int ranks = a.ranks();
  if (a.backend.empty()) a.backend = ranks > 1 ? "starpu-mpi" : "starpu";
  const std::vector<std::string> backends{"starpu", "sequential", "starpu-mpi"};
  if (std::find(backends.begin(), backends.end(), a.backend) == backends.end())
    throw UsageError("submit: unknown backend '" + a.backend + "' (expected starpu, sequential or starpu-mpi)");
  if (ranks > 1 && a.backend != "starpu-mpi")
    throw UsageError("submit: " + std::to_string(ranks) + " ranks need --backend starpu-mpi (backend '" + a.backend +
                     "' runs the whole workflow in every rank)");
  if (a.checkpoint && a.backend == "starpu-mpi")
    throw UsageError("submit: --checkpoint needs one rank (the starpu-mpi backend does not checkpoint)");
  parse_sets(a.wf.sets);  // NAME=VALUE, or a usage error
  return true;
}

// The job for workflow `dag_name`: absolute paths, resources, the run's options.
SlurmJob make_job(const SubmitArgs& a, const std::string& dag_name) {
  SlurmJob job;
  job.name = job_name(dag_name);
  job.workflow = fs::absolute(a.wf.file).lexically_normal().string();
  job.workdir = fs::current_path().string();
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  job.ymlopt = ec ? std::string("ymlopt") : self.string();
  job.run_dir = fs::absolute(a.out.empty() ? default_run_dir(dag_name) : a.out).lexically_normal().string();
  while (job.run_dir.size() > 1 && job.run_dir.back() == '/') job.run_dir.pop_back();
  job.nodes = a.nodes;
  job.ntasks_per_node = a.ntasks_per_node;
  job.cpus_per_task = a.cpus_per_task;
  job.gpus_per_node = a.gpus_per_node;
  job.time = a.time;
  job.partition = a.partition;
  job.backend = a.backend;
  job.sets = a.wf.sets;
  job.checkpoint = a.checkpoint;
  for (const auto& p : a.wf.plugins) job.plugins.push_back(fs::absolute(p).string());
  check_sbatch_word("run directory", job.run_dir);
  check_sbatch_word("working directory", job.workdir);
  if (fs::exists(job.run_dir + "/submit.json"))
    throw UsageError("submit: " + job.run_dir + " already holds a submitted run (submit.json); choose another --out");
  return job;
}

// The MPI plugin of a starpu-mpi job: what this cluster's srun offers, else pmix
// (Open MPI and StarPU-MPI speak it). A note for the user ("" if none).
std::string choose_job_mpi(SlurmJob& job, const std::string& sbatch, bool dry_run) {
  std::string mpi_note;
  if (job.backend == "starpu-mpi") {
    job.mpi = "pmix";
    const std::string srun = find_on_path("srun");
    if (!sbatch.empty() && !srun.empty()) {
      const Captured list = capture(sh_quote(srun) + " --mpi=list");
      const std::string chosen = list.rc == 0 ? choose_mpi_plugin(list.out) : "";
      if (!chosen.empty()) job.mpi = chosen;
      else
        mpi_note = "srun --mpi=list " + std::string(list.rc == 0 ? "lists no pmix or pmi2 plugin" : "failed") +
                   "; using --mpi=pmix";
    }
  }
#ifndef YMLOPT_WITH_STARPU_MPI
  // the job runs this very executable: refuse now what its ranks would refuse later
  if (job.backend == "starpu-mpi") {
    const std::string m = "this ymlopt was built without StarPU-MPI (no backend starpu-mpi); submit one rank "
                          "(--nodes 1 --ntasks-per-node 1) or rebuild with libopenmpi-dev and StarPU-MPI";
    if (!dry_run) throw UsageError("submit: " + m);
    mpi_note += (mpi_note.empty() ? "" : "; ") + m;
  }
#else
  (void)dry_run;
#endif
  return mpi_note;
}

// Writes the script into the run directory and submits it with sbatch; the job
// id ("" when sbatch failed, its output printed).
std::string sbatch_submit(const SlurmJob& job, const std::string& sbatch, const std::string& script,
                          std::string& script_path) {
  script_path = job.run_dir + "/job.sbatch";
  write_file_atomic(script_path, script);
  std::error_code ec;
  fs::permissions(script_path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add, ec);
  const Captured sub = capture(sh_quote(sbatch) + " --parsable " + sh_quote(script_path));
  // --parsable prints "JOBID" or "JOBID;CLUSTER"; warnings may come before it
  std::string job_id;
  static const std::regex id_re(R"(^(\d+)(;\S+)?$)");
  std::istringstream lines(sub.out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, id_re)) job_id = m[1].str();
  }
  if (sub.rc != 0 || job_id.empty()) {
    std::cerr << sub.out << "ymlopt: error: sbatch failed (exit " << sub.rc << "); the script is " << script_path
              << "\n";
    return "";
  }
  return job_id;
}

}  // namespace

int cmd_submit(const std::vector<std::string>& args) {
  SubmitArgs a;
  if (!parse_submit_args(args, a)) return 0;
  // the workflow: the same compile as `ymlopt check`
  ComponentRegistry reg;
  CompileResult cr;
  if (int rc = prepare(a.wf, reg, cr)) return rc;
  SlurmJob job = make_job(a, cr.dag.name);
  const std::string sbatch = find_on_path("sbatch");
  if (sbatch.empty() && !a.dry_run) throw UsageError("sbatch not found (install slurm-client or use --dry-run)");
  const std::string mpi_note = choose_job_mpi(job, sbatch, a.dry_run);
  job.submitted_at = utc_now();
  const std::string script = batch_script(job);
  if (a.dry_run) {
    if (!mpi_note.empty()) std::cerr << "ymlopt: warning: " << mpi_note << "\n";
    std::cout << script;
    return 0;
  }
  std::error_code ec;
  fs::create_directories(job.run_dir, ec);
  if (ec) {
    std::cerr << "ymlopt: error: cannot create run directory '" << job.run_dir << "': " << ec.message() << "\n";
    return 1;
  }
  if (!mpi_note.empty()) std::cerr << "ymlopt: warning: " << mpi_note << "\n";
  std::string script_path;
  const std::string job_id = sbatch_submit(job, sbatch, script, script_path);
  if (job_id.empty()) return 1;
  nlohmann::json rec = {{"job_id", job_id},
                        {"script", script_path},
                        {"submitted_at", job.submitted_at},
                        {"workflow", job.workflow},
                        {"workflow_name", cr.dag.name},
                        {"run_dir", job.run_dir},
                        {"output", job.run_dir + "/slurm-" + job_id + ".out"},
                        {"error", job.run_dir + "/slurm-" + job_id + ".err"},
                        {"nodes", a.nodes},
                        {"ntasks_per_node", a.ntasks_per_node},
                        {"cpus_per_task", a.cpus_per_task},
                        {"gpus_per_node", a.gpus_per_node},
                        {"time", a.time},
                        {"partition", a.partition},
                        {"backend", a.backend},
                        {"mpi", job.mpi},
                        {"checkpoint", a.checkpoint},
                        {"set", a.wf.sets}};
  write_file_atomic(job.run_dir + "/submit.json", rec.dump(1) + "\n");
  const int ranks = a.ranks();
  std::cout << "submitted job " << job_id << ": workflow '" << cr.dag.name << "', " << ranks << " rank"
            << (ranks == 1 ? "" : "s") << ", backend " << a.backend << "\n"
            << "script: " << script_path << "\n"
            << "run directory: " << job.run_dir << "\n"
            << "follow it with: ymlopt status " << job.run_dir << "\n";
  return 0;
}

namespace {

struct JobState {
  std::string state;      // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...; empty: unknown
  std::string exit_code;  // "N:S" (exit status : signal) when known
  std::string source;     // squeue, sacct, scontrol, report.json
};

std::string first_word(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_first_of(" \t\r\n", b);
  return s.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

JobState slurm_state(const std::string& id) {
  JobState js;
  const std::string squeue = find_on_path("squeue");
  if (!squeue.empty()) {
    // pending, running and completing jobs
    const Captured q = capture(sh_quote(squeue) + " -h -j " + id + " -o %T");
    if (q.rc == 0 && !first_word(q.out).empty()) return {first_word(q.out), "", "squeue"};
  }
  const std::string sacct = find_on_path("sacct");
  if (!sacct.empty()) {
    // needs accounting storage; "Slurm accounting storage is disabled" otherwise
    const Captured a = capture(sh_quote(sacct) + " -n -X -P -j " + id + " -o State,ExitCode");
    static const std::regex re(R"(^([A-Z_]+)[^|]*\|(\d+:\d+)\s*$)");
    std::istringstream in(a.out);
    for (std::string line; a.rc == 0 && std::getline(in, line);) {
      std::smatch m;
      if (std::regex_match(line, m, re)) return {m[1].str(), m[2].str(), "sacct"};
    }
  }
  const std::string scontrol = find_on_path("scontrol");
  if (!scontrol.empty()) {
    // finished jobs stay in the controller's memory for MinJobAge (300 s by default)
    const Captured c = capture(sh_quote(scontrol) + " show job " + id);
    std::smatch m;
    static const std::regex st(R"(JobState=([A-Z_]+))"), ex(R"(ExitCode=(\d+:\d+))");
    if (c.rc == 0 && std::regex_search(c.out, m, st)) {
      js = {m[1].str(), "", "scontrol"};
      if (std::regex_search(c.out, m, ex)) js.exit_code = m[1].str();
      return js;
    }
  }
  return js;
}

bool failed_state(const std::string& s) {
  return s == "FAILED" || s == "TIMEOUT" || s == "OUT_OF_MEMORY" || s == "NODE_FAIL" || s == "BOOT_FAIL" ||
         s == "DEADLINE" || s == "PREEMPTED";
}

}  // namespace

int cmd_status(const std::vector<std::string>& args) {
  std::string dir;
  bool json = false;
  po::options_description d("ymlopt status RUN_DIR [options]");
  d.add_options()("help,h", "show this help")("json", po::bool_switch(&json), "machine-readable output");
  po::options_description all = d;
  all.add_options()("run-dir", po::value(&dir), "run directory");
  po::positional_options_description pos;
  pos.add("run-dir", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("status: ") + e.what());
  }
  if (vm.count("help")) {
    std::cout << d;
    return 0;
  }
  if (dir.empty()) throw UsageError("status: missing RUN_DIR");
  const std::string rec_path = dir + "/submit.json";
  if (!fs::is_regular_file(rec_path))
    throw UsageError("status: " + dir + " is not a submitted run directory (no submit.json; see `ymlopt submit`)");
  nlohmann::json rec;
  try {
    std::ifstream f(rec_path);
    rec = nlohmann::json::parse(f);
    if (!rec.contains("job_id") || !rec["job_id"].is_string()) throw std::runtime_error("no job_id");
  } catch (const std::exception& e) {
    throw UsageError("status: " + rec_path + " is not a submit record: " + e.what());
  }
  const std::string id = rec["job_id"].get<std::string>();
  if (id.empty() || !std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isdigit(c); }))
    throw UsageError("status: " + rec_path + ": job_id '" + id + "' is not a Slurm job id");
  const std::string output = rec.value("output", dir + "/slurm-" + id + ".out");

  JobState js = slurm_state(id);
  // the run's own report: the makespan, and the outcome once Slurm has forgotten the job
  const std::string report_path = dir + "/report.json";
  nlohmann::json report;
  bool have_report = false;
  if (fs::is_regular_file(report_path)) {
    try {
      std::ifstream f(report_path);
      report = nlohmann::json::parse(f);
      have_report = true;
    } catch (const std::exception&) {
      have_report = false;  // being written, or damaged: the state stays Slurm's
    }
  }
  if (js.state.empty() && have_report)
    js = {report.value("status", "") == "ok" ? "COMPLETED" : "FAILED", "", "report.json"};
  double makespan_us = -1;
  if (have_report && report.contains("totals") && report["totals"].contains("makespan_us") &&
      report["totals"]["makespan_us"].is_number())
    makespan_us = report["totals"]["makespan_us"].get<double>();
  const bool finished = js.state == "COMPLETED" || failed_state(js.state) || js.state == "CANCELLED";

  if (json) {
    nlohmann::json j = {{"job_id", id},      {"state", js.state.empty() ? "UNKNOWN" : js.state},
                        {"source", js.source}, {"exit_code", js.exit_code},
                        {"output", output},  {"run_dir", dir}};
    if (finished && makespan_us >= 0) j["makespan_us"] = makespan_us;
    std::cout << j.dump(1) << "\n";
  } else {
    std::cout << "job " << id << ": " << (js.state.empty() ? "UNKNOWN" : js.state);
    if (!js.exit_code.empty() && js.exit_code != "0:0") {
      const auto colon = js.exit_code.find(':');
      std::cout << " (exit code " << js.exit_code.substr(0, colon);
      if (js.exit_code.substr(colon + 1) != "0") std::cout << ", signal " << js.exit_code.substr(colon + 1);
      std::cout << ")";
    }
    if (js.source == "report.json") std::cout << " (from report.json; Slurm no longer knows the job)";
    std::cout << "\n";
    if (js.state.empty())
      std::cout << "squeue, sacct and scontrol know nothing of it, and " << report_path << " does not exist\n";
    std::cout << "output: " << output << "\n";
    if (finished && makespan_us >= 0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "makespan: %.3f s", makespan_us / 1e6);
      std::cout << buf << " (" << report_path << ")\n";
    } else if (js.state == "COMPLETED") {
      std::cout << "no report.json in " << dir << "\n";
    }
  }
  if (js.state.empty() || failed_state(js.state)) return 1;
  return 0;
}

}  // namespace ymlopt
