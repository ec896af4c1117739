#pragma once
// The compiler's one class, private to engine/src/compiler/. Its member
// functions are defined by phase in the files beside this header:
//   compiler.cpp      the driver (compile_workflow) and Compiler::run
//   schema.cpp        the attributes each element takes, the statements of a body
//   eval.cpp          ${} attribute templates evaluated in the current scope
//   expansion.cpp     params, let, par/seq loops, if, call of sub-workflows
//   data.cpp          <data> declarations, src= files, data references
//   companions.cpp    weights stored compressed by `ymlopt optimize` and their companion tensors
//   tasks.cpp         <task> and <save>: component, ports, arguments
//   dependencies.cpp  a task's shape check, cost and data dependencies in program order
//   events.cpp        wait/notify: event edges, the topological order, cycles
//   regions.cpp       runtime control flow: until/while, publish/gather, the region tree
//   unite.cpp         <unite> and <comethod>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include <unordered_set>
#include <utility>
#include <vector>

#include "io/shard_index.hpp"
#include "io/tensor_file.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/engine/expr.hpp"

namespace ymlopt::compiler {

namespace fs = std::filesystem;
using xml::Attr;
using xml::Element;

/// fs::exists and fs::weakly_canonical without throwing: a name the system
/// refuses (too long, a loop of links) is a file that is not there.
inline bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}
inline std::string canonical_path(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal().string() : c.string();
}
/// ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b for a huge b.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); }

struct AccessState {
  std::int32_t writer = -1;
  std::vector<std::int32_t> readers;
  // for a tile: how many of the tensor's whole readers its writer already
  // follows (later writers follow that writer, so only newer readers matter)
  std::size_t whole_readers_done = 0;
};

struct DataState {
  AccessState whole;
  std::vector<AccessState> tiles;
  std::vector<std::uint8_t> tile_init;
  std::int64_t uninit_tiles = 0;  // tiles never written (when not initialised)
  bool init = false;
};

struct Frame {
  const xml::Document* doc = nullptr;
  fs::path dir;
  std::unordered_map<std::string, std::int32_t> data;  // name -> data index
  size_t var_base = 0;                                  // first variable of this frame
  std::string prefix;                                   // for local data of calls
  std::set<std::string> failed_data;                    // declarations that had errors
};

struct Context {  // a sequential context: workflow body, par branch, seq loop
  std::int32_t start_task = 0;
  std::vector<int> ranges;  // its waits so far: indices of WaitRanges (closed when it ends)
  int last_wait = -1;       // the latest WaitRange open here (its own or an enclosing context's)
  int last_notify = -1;              // event of its latest notify, or -1
  std::int32_t last_notify_end = 0;  // tasks emitted before that notify: [start_task, this)
};

/// The tasks one <wait> holds back: those emitted after it until its context
/// ends, a contiguous range of task ids (nested contexts included). The waits
/// open at a point of the program are a list through `parent`, latest first
/// (shared, not copied, by every task and notify there).
struct WaitRange {
  int event = -1;
  std::int32_t first = 0, end = -1;
  int parent = -1;  // the wait open before this one, or -1
};

/// One <notify>: its context's tasks [lo, hi) (their sinks are its sources) and
/// the waits open there (`waits`: the head of their list). `prev`: the event its
/// context notified before it, with `since` its tasks then ([lo, since)).
struct NotifyAt {
  int waits = -1;
  std::int32_t lo = 0, hi = 0;
  int prev = -1;
  std::int32_t since = 0;
};

struct EventInfo {
  std::string name;
  std::vector<std::int32_t> sources;  // tasks a waiter must follow
  std::vector<NotifyAt> notifies;
  SrcLoc first_wait;
};

class Compiler {
 public:
  Compiler(const CompileOptions& o, const ComponentRegistry& r, Diagnostics& d)
      : opts_(o), reg_(r), diags_(d) {}

  CompileResult run(std::unique_ptr<xml::Document> doc);

 private:
  using Describe = std::function<std::string()>;  // the task as messages name it, built only on error

  static std::string attr_or(const Element& e, std::string_view n, std::string def) {
    const Attr* a = e.find(n);
    return a ? a->value : def;
  }
  static SrcLoc at_offset(const Attr& a, size_t off) {
    SrcLoc l = a.loc;
    if (l.col > 0 && !a.embedded) l.col += int(a.name.size() + 2 + off);
    return l;
  }
  const Value* lookup(std::string_view n) const {
    for (size_t i = vars_.size(); i-- > frames_.back().var_base;)
      if (vars_[i].first == n) return &vars_[i].second;
    return nullptr;
  }
  Lookup lookup_fn() const {
    return [this](std::string_view n) { return lookup(n); };
  }

  // schema.cpp
  bool check_attrs(const Element& e);
  void statement(const Element& e);

  // eval.cpp
  const Template* tmpl(const Attr& a);
  std::optional<Value> eval(const Attr& a);
  std::optional<std::string> render(const Attr& a);
  static std::optional<double> as_number(const Value& v);
  std::optional<std::int64_t> eval_int(const Attr& a);
  std::optional<std::vector<std::int64_t>> eval_list(const Attr& a);
  static std::optional<Value> convert(const Value& v, const std::string& type);

  // expansion.cpp
  std::optional<Value> model_param(const std::string& name, std::string& origin) const;
  void declare_params(const Element& wf, const std::vector<std::pair<std::string, std::string>>& sets,
                      bool from_cli, const std::vector<const Attr*>& set_locs);
  void body(const std::vector<Element>& children);
  void let(const Element& e);
  void require(const Element& e);
  void loop(const Element& e, bool parallel);
  void iterate(const Element& e, bool parallel, const std::string& var, const std::function<bool(std::int64_t&)>& next);
  bool too_many();
  void if_(const Element& e);
  /// The value of an <if>'s cond=, or nullopt after reporting why it has none.
  std::optional<bool> condition(const Element& e);
  /// The branch of <if> e that `take` selects: each child outside <else>, or
  /// the <else>'s children as a block; a second <else> is reported.
  void branch(const Element& e, bool take, const std::function<void(const Element&)>& each,
              const std::function<void(const std::vector<Element>&)>& otherwise);
  void call(const Element& e);
  std::string chain(const std::string& last) const;

  // data.cpp
  void data(const Element& e);
  bool data_shape(const Element& e, DataDecl& d);
  bool data_tiles(const Element& e, const std::string& name, DataDecl& d);
  void data_placement(const Element& e, DataDecl& d);
  void data_init(const Element& e, const std::string& name, DataDecl& d);
  bool data_source(const Element& e, DataDecl& d);
  void push_decl(DataDecl d);
  void check_source(const DataDecl& d, const Attr& src);
  /// src= names a shard index: d.src becomes the shard holding d.key; false (reported) when none does.
  bool shard_source(DataDecl& d, const Attr& src);
  /// The header of the file at `path`, read on the first call (throws as io::index_file).
  const io::FileIndex& file_index(const std::string& path);
  std::optional<DataRef> resolve(const std::string& text, const Attr& a);

  // companions.cpp
  struct CompressedReaders {
    std::vector<std::string> roles;  // companion roles, in declaration order
    std::set<std::string> required;  // those a compressed weight's file must hold
    std::string who;                 // who reads them: "only <component>'s port '<port>' can read it"
  };
  const CompressedReaders& compressed_readers();
  bool compressed_source(DataDecl& d, const Attr& src);
  bool bind_compressed(const Element& e, const ComponentSpec* c, std::vector<Binding>& binds,
                       std::vector<ArgValue>& args, const std::vector<bool>& arg_set,
                       const std::function<std::string()>& who);

  // tasks.cpp
  const std::vector<ArgValue>& defaults(const ComponentSpec* c);
  static std::optional<ArgValue> parse_arg(const ParamSpec& p, const std::string& s);
  std::string task_desc(const Element& e, const std::string& comp);
  void task(const Element& e);
  bool bind_port(const Element& ch, const ComponentSpec* c, std::vector<Binding>& binds, std::vector<bool>& bound,
                 bool& unknown_port, const Describe& who);
  bool bind_arg(const Element& ch, const ComponentSpec* c, std::vector<ArgValue>& args, std::vector<bool>& arg_set,
                const Describe& who);
  void save(const Element& e);

  // dependencies.cpp
  void pin_task(const Attr& a, TaskNode& t, const Describe& who);
  void add_task(const SrcLoc& loc, const ComponentSpec* c, std::vector<Binding> binds, std::vector<ArgValue> args,
                const Attr* name_attr, const Describe& who);
  bool access(std::int32_t t, const Binding& b, std::vector<std::int32_t>& preds, const SrcLoc& loc,
              const Describe& who, const std::string& port);

  // events.cpp
  int event_id(const std::string& name);
  void notify(const Element& e);
  void wait(const Element& e);
  void push_context();
  void pop_context();
  struct EventClosure;
  void finish_events();
  void add_wait_edges(EventClosure& g);
  void order();

  // regions.cpp
  std::int32_t open_region(Region::Kind kind, const Element& e, std::string name);
  std::vector<Region::Item> items_of(std::int32_t first, std::int32_t end, const std::vector<std::int32_t>& children) const;
  void close_region(std::int32_t idx);
  void finish_regions();
  bool data_ready(std::int32_t d) const;
  std::optional<std::vector<std::int32_t>> data_list(const Attr& a);
  std::optional<std::int32_t> scalar_data(const Attr& a, const std::string& text);
  std::optional<bool> better_attr(const Element& e, bool pareto_ok = false);
  static std::string c_operators(const std::string& text);
  void runtime_loop(const Element& e);
  void exchange(const Element& e);

  // unite.cpp
  void unite(const Element& e);
  void comethod(const Element& e);
  /// The data a declaration of an unwritten file tensor shares, or -1.
  std::int32_t shared_file_tensor(const DataDecl& d);

  const CompileOptions& opts_;
  const ComponentRegistry& reg_;
  Diagnostics& diags_;
  Dag dag_;
  std::vector<DataState> states_;
  std::vector<std::pair<std::string, DataDecl>> pending_companions_;  // of the data being declared
  std::optional<CompressedReaders> readers_;
  std::vector<Frame> frames_;
  std::vector<std::pair<std::string, Value>> vars_;
  std::vector<Context> contexts_;
  std::unordered_map<const Attr*, std::shared_ptr<const Template>> templates_;
  std::unordered_map<const ComponentSpec*, std::vector<ArgValue>> defaults_;
  std::unordered_map<const Element*, std::int32_t> bound_;
  // data read from one file tensor: the first declaration of each (file, key,
  // dtype, shape, tiling, format, placement), and the data a second
  // declaration shares (its name), which no task may write
  std::map<std::string, std::int32_t> file_data_;
  std::map<std::int32_t, std::string> shared_file_data_;
  std::unordered_set<const Element*> checked_;
  std::set<std::string> missing_files_;  // each reported once
  std::set<std::string> broken_files_;   // unreadable header: reported at the first data reading the file
  std::map<std::string, io::FileIndex> file_index_;  // headers read, by path: once per file, not per data
  std::map<std::string, io::ShardIndex> shard_index_;  // shard indexes read, by path
  long double nested_trips_ = 1;         // iterations of the from/to loops being expanded, multiplied
  std::map<std::string, const xml::Document*> docs_by_path_;
  std::vector<std::string> call_stack_;
  std::vector<EventInfo> events_;
  std::unordered_map<std::string, int> event_ids_;
  std::vector<WaitRange> wait_ranges_;
  std::vector<int> task_waits_;  // by task: the waits open where it was emitted (their list's head)
  std::vector<std::vector<std::int32_t>> closed_;  // by event: the tasks its waiters follow (sinks)
  std::vector<std::pair<int, SrcLoc>> wait_locs_;
  // runtime control flow (Region): open regions, each region's sub-regions,
  // the top-level ones, the innermost open comethod, and exchange channels
  std::vector<std::int32_t> region_stack_;
  std::vector<std::vector<std::int32_t>> region_children_;
  std::vector<std::int32_t> top_regions_;
  std::unordered_set<const Element*> incomplete_;  // elements missing a required attribute (reported)
  std::int32_t comethod_ = -1;
  struct Channel {
    std::vector<std::pair<DType, std::vector<std::int64_t>>> tensors;
    SrcLoc loc;
    std::string what;  // "published" or "gathered"
    size_t nscores = 0;
    bool published = false;
    std::vector<SrcLoc> gathers;
  };
  std::map<std::string, Channel> channels_;
  int call_count_ = 0;
  bool usage_error_ = false;
  bool too_many_reported_ = false;
};

}  // namespace ymlopt::compiler
