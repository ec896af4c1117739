#include "ymlopt/optimizer/model_editor.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

#include <ymlopt/half.hpp>

#include "io/tensor_file.hpp"
#include "component_names.hpp"
#include "nn/embedding_formats.hpp"

namespace fs = std::filesystem;

namespace ymlopt::opt {
namespace {

/// "#12" (the key of an unlabelled task).
std::string hash_id(std::int32_t id) {
  std::string s = "#";
  s += std::to_string(id);
  return s;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string join(const std::vector<std::int64_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s;
}

/// Data names as the flat workflow spells them (call prefixes hold '#' and '/').
std::string flat_name(const std::string& n) {
  std::string o = n;
  for (char& c : o)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) c = '_';
  return o;
}

std::string ref_text(const Dag& dag, const DataRef& r, const std::vector<std::string>& names) {
  const DataDecl& d = dag.data[std::size_t(r.data)];
  const std::string& n = names[std::size_t(r.data)];
  if (r.tile < 0) return n;
  const std::int64_t tr = r.tile / d.ntile_c, tc = r.tile % d.ntile_c;
  if (d.shape.size() == 1) return n + "[" + std::to_string(tc) + "]";
  return n + "[" + std::to_string(tr) + "," + std::to_string(tc) + "]";
}

const char* init_name(InitKind k) {
  switch (k) {
    case InitKind::zeros: return "zeros";
    case InitKind::ones: return "ones";
    case InitKind::identity: return "identity";
    case InitKind::random: return "random";
    case InitKind::spd: return "spd";
    case InitKind::dominant: return "dominant";
    case InitKind::value: return "value";
    case InitKind::range: return "range";
    default: return nullptr;
  }
}

void write_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    f.close();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw std::runtime_error("cannot write '" + path + "'");
    }
  }
  fs::rename(tmp, path);
}

/// Element (r, c) of a loaded tensor as float.
float element(const io::TensorData& t, std::int64_t i) {
  switch (t.dtype) {
    case DType::f32: {
      float v;
      std::memcpy(&v, t.bytes.data() + i * 4, 4);
      return v;
    }
    case DType::f64: {
      double v;
      std::memcpy(&v, t.bytes.data() + i * 8, 8);
      return static_cast<float>(v);
    }
    case DType::f16: {
      std::uint16_t b;
      std::memcpy(&b, t.bytes.data() + i * 2, 2);
      return static_cast<float>(half::f16_bits_to_double(b));
    }
    case DType::bf16: {
      std::uint16_t b;
      std::memcpy(&b, t.bytes.data() + i * 2, 2);
      return half::bf16_bits_to_float(b);
    }
    default: throw std::runtime_error("weight has a non-float dtype");
  }
}

}  // namespace

std::string emit_workflow(const Dag& dag, const std::string& out_xml_dir) {
  // names: flat and unique
  std::vector<std::string> names(dag.data.size());
  std::set<std::string> taken;
  for (std::size_t i = 0; i < dag.data.size(); ++i) {
    std::string n = flat_name(dag.data[i].name);
    for (int s = 2; taken.count(n); ++s) n = flat_name(dag.data[i].name) + "_" + std::to_string(s);
    taken.insert(n);
    names[i] = n;
  }
  std::vector<char> used(dag.data.size(), 0);
  for (const TaskNode& t : dag.tasks)
    for (const Binding& b : t.bindings)
      if (b.ref.data >= 0) used[std::size_t(b.ref.data)] = 1;

  std::ostringstream o;
  o << "<!-- Written by ymlopt optimize from " << xml_escape(dag.file)
    << ": a flat workflow (parameters, loops and calls expanded). -->\n";
  o << "<workflow name=\"" << xml_escape(dag.name) << "\">\n";
  const fs::path base = fs::absolute(out_xml_dir.empty() ? fs::path(".") : fs::path(out_xml_dir)).lexically_normal();
  for (std::size_t i = 0; i < dag.data.size(); ++i) {
    if (!used[i]) continue;
    const DataDecl& d = dag.data[i];
    o << "  <data name=\"" << xml_escape(names[i]) << "\"";
    if (d.dtype != DType::f32) o << " dtype=\"" << dtype_name(d.dtype) << "\"";
    o << " shape=\"" << join(d.shape) << "\"";
    if (!d.col_starts.empty()) {
      o << " split=\"";
      for (std::size_t c = 0; c + 1 < d.col_starts.size(); ++c) o << (c ? "," : "") << d.col_starts[c + 1] - d.col_starts[c];
      o << "\"";
    } else if (d.tiled()) {
      if (d.shape.size() == 1) o << " tile=\"" << d.tile_cols << "\"";
      else o << " tile=\"" << d.tile_rows << "," << d.tile_cols << "\"";
    }
    if (d.init == InitKind::file) {
      fs::path p = fs::absolute(d.src).lexically_normal();
      const fs::path rel = p.lexically_relative(base);
      const bool inside = !rel.empty() && *rel.begin() != "..";
      o << " src=\"" << xml_escape(inside ? rel.string() : p.string()) << "\"";
      if (!d.key.empty()) o << " key=\"" << xml_escape(d.key) << "\"";
      if (d.reshape) o << " reshape=\"true\"";
    } else if (const char* in = init_name(d.init)) {
      o << " init=\"" << in << "\"";
      if (d.init == InitKind::random || d.init == InitKind::spd || d.init == InitKind::dominant) o << " seed=\"" << d.seed << "\"";
      if (d.init == InitKind::value) {
        std::ostringstream v;
        v.precision(17);
        v << d.value;
        o << " value=\"" << v.str() << "\"";
      }
    }
    o << "/>\n";
  }
  for (const TaskNode& t : dag.tasks) {
    const ComponentSpec& c = *t.comp;
    o << "  <task component=\"" << xml_escape(c.name) << "\"";
    if (!t.label.empty()) o << " name=\"" << xml_escape(t.label) << "\"";
    o << ">";
    for (std::size_t p = 0; p < t.bindings.size() && p < c.ports.size(); ++p) {
      const Binding& b = t.bindings[p];
      if (b.ref.data < 0) continue;
      const char* el = b.mode == Access::read ? "in" : b.mode == Access::write ? "out" : "inout";
      o << "<" << el << " port=\"" << c.ports[p].name << "\" data=\"" << xml_escape(ref_text(dag, b.ref, names))
        << "\"/>";
    }
    const auto& vals = t.args.values();
    for (std::size_t a = 0; a < c.params.size() && a < vals.size(); ++a)
      if (vals[a].text != c.params[a].default_value || c.params[a].required)
        o << "<arg name=\"" << c.params[a].name << "\" value=\"" << xml_escape(vals[a].text) << "\"/>";
    o << "</task>\n";
  }
  o << "</workflow>\n";
  return o.str();
}

ModelEditor::ModelEditor(Dag dag, const ComponentRegistry& reg) : dag_(std::move(dag)), reg_(reg) {
  // every task gets a stable key (calibration captures and originals refer to it)
  for (TaskNode& t : dag_.tasks)
    if (t.label.empty()) t.label = hash_id(t.id);
}

std::size_t ModelEditor::port_index(const TaskNode& t, const std::string& name) const {
  for (std::size_t i = 0; i < t.comp->ports.size(); ++i)
    if (t.comp->ports[i].name == name) return i;
  throw std::invalid_argument("component " + t.comp->name + " has no port '" + name + "'");
}

std::vector<WeightUse> ModelEditor::linear_weights() const {
  std::map<std::int32_t, WeightUse> uses;
  std::vector<std::int32_t> order;
  std::set<std::int32_t> rejected;
  for (std::size_t i = 0; i < dag_.tasks.size(); ++i) {
    const TaskNode& t = dag_.tasks[i];
    for (std::size_t p = 0; p < t.bindings.size(); ++p) {
      const std::int32_t d = t.bindings[p].ref.data;
      if (d < 0) continue;
      const bool is_w = t.comp->name == components::kLinear && t.comp->ports[p].name == "w";
      if (!is_w) {
        rejected.insert(d);  // shared with another component (e.g. a tied embedding)
        continue;
      }
      const DataDecl& decl = dag_.data[std::size_t(d)];
      const bool floaty = decl.dtype == DType::f32 || decl.dtype == DType::f64 || decl.dtype == DType::f16 ||
                          decl.dtype == DType::bf16;
      if (decl.init != InitKind::file || !floaty || t.args.get_string("format") != "dense" || decl.shape.size() != 2) {
        rejected.insert(d);
        continue;
      }
      const bool nk = t.args.get_bool("transpose_w");
      auto [it, fresh] = uses.try_emplace(d);
      WeightUse& u = it->second;
      if (fresh) {
        order.push_back(d);
        u.data = d;
        u.name = decl.key.empty() ? decl.name : decl.key;
        if (auto o = origin_name_.find(d); o != origin_name_.end()) u.name = o->second;
        u.nk = nk;
        u.n = nk ? decl.rows : decl.cols;
        u.k = nk ? decl.cols : decl.rows;
        if (!decl.col_starts.empty()) rejected.insert(d);  // split= tiles: not one tile size
        if (decl.tiled()) {
          // tiles may split the output features only
          const bool splits_k = nk ? decl.ntile_c > 1 : decl.ntile_r > 1;
          if (splits_k) rejected.insert(d);
          u.tile_n = nk ? decl.tile_rows : decl.tile_cols;
        }
      } else if (u.nk != nk) {
        rejected.insert(d);
      }
      u.tasks.push_back(i);
    }
  }
  std::vector<WeightUse> out;
  for (std::int32_t d : order)
    if (!rejected.count(d)) out.push_back(uses[d]);
  return out;
}

DenseWeight ModelEditor::load(const WeightUse& u) const {
  const DataDecl& d = dag_.data[std::size_t(u.data)];
  io::TensorData full;
  if (auto it = new_bytes_.find(u.data); it != new_bytes_.end()) {
    full.dtype = d.dtype;
    full.shape = d.shape;
    full.bytes = it->second;
  } else {
    full = io::load_tensor(d.src, d.key);
  }
  const std::int64_t count = d.rows * d.cols;
  if (static_cast<std::int64_t>(full.bytes.size()) != count * std::int64_t(dtype_size(full.dtype)))
    throw std::runtime_error(d.src + ": tensor '" + d.key + "' does not hold " + std::to_string(count) + " values");
  DenseWeight w;
  w.n = u.n;
  w.k = u.k;
  w.w.resize(std::size_t(count));
  for (std::int64_t r = 0; r < d.rows; ++r)
    for (std::int64_t c = 0; c < d.cols; ++c) {
      const float v = element(full, r * d.cols + c);
      if (u.nk) w.w[std::size_t(r * u.k + c)] = v;
      else w.w[std::size_t(c * u.k + r)] = v;
    }
  return w;
}

std::vector<float> ModelEditor::load_values(std::int32_t data) const {
  const DataDecl& d = dag_.data[std::size_t(data)];
  io::TensorData full;
  if (auto it = new_bytes_.find(data); it != new_bytes_.end()) {
    full.dtype = d.dtype;
    full.bytes = it->second;
  } else if (d.init == InitKind::file) {
    full = io::load_tensor(d.src, d.key);
  } else {
    throw std::runtime_error("'" + d.name + "' has no stored values");
  }
  const std::int64_t count = d.rows * d.cols;
  if (static_cast<std::int64_t>(full.bytes.size()) != count * std::int64_t(dtype_size(full.dtype)))
    throw std::runtime_error(d.src + ": tensor '" + d.key + "' does not hold " + std::to_string(count) + " values");
  std::vector<float> v(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) v[std::size_t(i)] = element(full, i);
  return v;
}

const DenseWeight* ModelEditor::original(const std::string& name) const {
  auto it = originals_.find(name);
  return it == originals_.end() ? nullptr : &it->second;
}

void ModelEditor::keep_original(const WeightUse& u) {
  if (originals_.count(u.name) || (!keep_originals_ && final_.count(u.name))) return;
  if (keep_originals_) originals_.emplace(u.name, load(u));
  Final& f = final_[u.name];
  f.src = dag_.data[std::size_t(u.data)].src;
  f.orig_nk = u.nk;
  f.n = u.n;
  f.k = u.k;
}

void ModelEditor::mark_graph_changed(const WeightUse& u) {
  keep_original(u);
  final_[u.name].graph_changed = true;
}

std::map<std::string, DataRef> ModelEditor::add_replacement(const std::string& name, std::vector<NewTensor> tensors,
                                                           std::int64_t tile_n) {
  std::map<std::string, DataRef> made;
  for (NewTensor& nt : tensors) {
    if (tile_n > 0 && !nt.row_tiled)
      throw std::runtime_error("'" + name + "' is used by tiles: its " + nt.role + " cannot be split by rows");
    const DataRef r = add_tensor(name + "." + nt.role, nt.dtype, nt.shape, std::move(nt.bytes));
    DataDecl& d = dag_.data[std::size_t(r.data)];
    if (tile_n > 0) {
      // tiles of tile_n rows (output features, or tokens of a table); a vector [n] tiles by tile_n
      if (d.shape.size() == 1) d.tile_rows = 1, d.tile_cols = tile_n;
      else d.tile_rows = tile_n, d.tile_cols = d.cols;
      d.ntile_r = (d.rows + d.tile_rows - 1) / d.tile_rows;
      d.ntile_c = (d.cols + d.tile_cols - 1) / d.tile_cols;
    }
    made[nt.role] = r;
  }
  if (!made.count("w")) throw std::logic_error("a replacement of '" + name + "' needs a 'w' tensor");
  return made;
}

WeightUse ModelEditor::replace(const WeightUse& u, std::vector<NewTensor> tensors,
                               const std::map<std::string, std::string>& args) {
  const DataDecl old = dag_.data[std::size_t(u.data)];
  keep_original(u);
  {
    Final& f = final_[u.name];
    auto arg = [&](const char* k, const std::string& def) {
      auto it = args.find(k);
      return it == args.end() ? def : it->second;
    };
    f.format = arg("format", "dense");
    f.group = std::stoll(arg("group", "0"));
    f.block = std::stoll(arg("block", "0"));
    f.activations = arg("activations", "");
  }
  const std::map<std::string, DataRef> made = add_replacement(u.name, std::move(tensors), old.tiled() ? u.tile_n : 0);
  origin_name_[made.at("w").data] = u.name;
  for (std::size_t i : u.tasks) {
    TaskNode& t = dag_.tasks[i];
    const DataRef wref = t.bindings[port_index(t, "w")].ref;
    std::int64_t tile = -1;
    if (wref.tile >= 0) tile = u.nk ? wref.tile / old.ntile_c : wref.tile % old.ntile_c;  // index along n
    for (const char* role : {"w", "w_scale", "w_zero", "w_index", "w_ptr", "b"}) {
      auto it = made.find(role);
      if (it == made.end()) {
        if (std::string(role) != "w" && std::string(role) != "b") unbind(t, role);  // a bias stays unless replaced
        continue;
      }
      DataRef r = it->second;
      if (tile >= 0) r.tile = std::int32_t(tile);  // row tile (tile, 0), or element block of a vector
      bind(t, role, r);
    }
    for (const auto& [k, v] : args) set_arg(t, k, v);
  }
  WeightUse out = u;
  out.data = made.at("w").data;
  if (auto it = args.find("transpose_w"); it != args.end()) out.nk = it->second == "true";
  return out;
}

std::string ModelEditor::task_key(const TaskNode& t) {
  return t.label.empty() ? hash_id(t.id) : t.label;  // the constructor labels every task
}

std::string ModelEditor::fresh_name(const std::string& base) const {
  std::set<std::string> names;
  for (const DataDecl& d : dag_.data) names.insert(flat_name(d.name));
  std::string n = flat_name(base);
  for (int s = 2; names.count(n); ++s) n = flat_name(base) + "_" + std::to_string(s);
  return n;
}

DataRef ModelEditor::add_tensor(const std::string& name, DType dtype, const std::vector<std::int64_t>& shape,
                                std::vector<std::byte> bytes) {
  DataRef r = add_scratch(name, dtype, shape);
  DataDecl& d = dag_.data[std::size_t(r.data)];
  std::int64_t elems = 1;
  for (auto s : shape) elems *= s;
  if (static_cast<std::int64_t>(bytes.size()) != elems * std::int64_t(dtype_size(dtype)))
    throw std::invalid_argument("tensor '" + name + "': byte count does not match its shape");
  d.init = InitKind::file;
  d.key = name;  // the file's key is the raw name (model keys hold '/' and '.')
  for (std::int32_t i : new_data_)
    if (dag_.data[std::size_t(i)].key == name) dag_.data[std::size_t(i)].key += ".superseded";
  new_data_.push_back(r.data);
  new_bytes_[r.data] = std::move(bytes);
  return r;
}

DataRef ModelEditor::add_scratch(const std::string& name, DType dtype, const std::vector<std::int64_t>& shape) {
  DataDecl d;
  d.name = fresh_name(name);
  d.dtype = dtype;
  d.shape = shape;
  if (shape.size() == 1) d.rows = 1, d.cols = shape[0];
  else {
    d.cols = shape.back();
    d.rows = 1;
    for (std::size_t i = 0; i + 1 < shape.size(); ++i) d.rows *= shape[i];
  }
  d.ld = d.cols;
  dag_.data.push_back(std::move(d));
  return DataRef{std::int32_t(dag_.data.size() - 1), -1};
}

void ModelEditor::bind(TaskNode& t, const std::string& port, DataRef ref, Access mode) const {
  Binding& b = t.bindings[port_index(t, port)];
  b.ref = ref;
  b.mode = mode;
}

void ModelEditor::unbind(TaskNode& t, const std::string& port) const {
  t.bindings[port_index(t, port)] = Binding{};
}

void ModelEditor::set_arg(TaskNode& t, const std::string& name, const std::string& value) const {
  std::vector<ArgValue> vals = t.args.values();
  const auto& params = t.comp->params;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].name != name) continue;
    vals[i].text = value;
    if (params[i].type == ParamType::bool_) vals[i].number = (value == "true" || value == "1") ? 1 : 0;
    else if (params[i].type != ParamType::string_) vals[i].number = std::stod(value);
    t.args = Args(&params, std::move(vals));
    return;
  }
  throw std::invalid_argument("component " + t.comp->name + " has no param '" + name + "'");
}

TaskNode& ModelEditor::insert_task(std::size_t pos, TaskNode t) {
  pos = std::min(pos, dag_.tasks.size());
  auto it = dag_.tasks.insert(dag_.tasks.begin() + std::ptrdiff_t(pos), std::move(t));
  for (std::size_t i = 0; i < dag_.tasks.size(); ++i) dag_.tasks[i].id = std::int32_t(i);
  return *it;
}

void ModelEditor::remove_task(std::size_t pos) {
  dag_.tasks.erase(dag_.tasks.begin() + std::ptrdiff_t(pos));
  for (std::size_t i = 0; i < dag_.tasks.size(); ++i) dag_.tasks[i].id = std::int32_t(i);
}

std::int64_t ModelEditor::weight_bytes() const {
  std::vector<char> used(dag_.data.size(), 0);
  for (const TaskNode& t : dag_.tasks)
    for (const Binding& b : t.bindings)
      if (b.ref.data >= 0) used[std::size_t(b.ref.data)] = 1;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < dag_.data.size(); ++i)
    if (used[i] && dag_.data[i].init == InitKind::file) total += dag_.data[i].bytes();
  return total;
}

void ModelEditor::write(const std::string& out_xml, const std::string& out_weights,
                        const std::map<std::string, std::string>& metadata) {
  std::vector<char> used(dag_.data.size(), 0);
  for (const TaskNode& t : dag_.tasks)
    for (const Binding& b : t.bindings)
      if (b.ref.data >= 0) used[std::size_t(b.ref.data)] = 1;
  std::set<std::string> model_files;
  for (const auto& [name, f] : final_) model_files.insert(f.src);
  const std::string out_abs = fs::absolute(out_weights).lexically_normal().string();
  std::set<std::int32_t> is_new(new_data_.begin(), new_data_.end());
  std::vector<io::NamedTensor> tensors;
  std::vector<io::TensorData> copies;  // keeps copied tensors alive until saved
  std::set<std::string> keys;
  std::vector<std::int32_t> copied;
  for (std::size_t i = 0; i < dag_.data.size(); ++i) {
    if (!used[i]) continue;
    DataDecl& d = dag_.data[i];
    if (d.init != InitKind::file) continue;
    const bool fresh = is_new.count(std::int32_t(i)) > 0;
    if (!fresh && !model_files.count(d.src)) continue;  // inputs and untouched files stay where they are
    if (!keys.insert(d.key).second) {  // the same tensor read twice: one copy
      d.src = out_abs;
      continue;
    }
    io::NamedTensor nt;
    nt.name = d.key;
    nt.view.dtype = d.dtype;
    nt.view.rows = d.rows;
    nt.view.cols = d.cols;
    nt.view.ld = d.cols;
    nt.view.shape = Shape(d.shape);
    if (fresh) {
      nt.view.data = new_bytes_[std::int32_t(i)].data();
    } else {
      copies.push_back(io::load_tensor(d.src, d.key));
      nt.view.data = copies.back().bytes.data();
    }
    tensors.push_back(std::move(nt));
    copied.push_back(std::int32_t(i));
  }
  std::map<std::string, std::string> meta = metadata;
  for (const auto& [name, f] : final_) {
    if (f.graph_changed) continue;
    std::ostringstream o;
    o << f.format << " group=" << f.group << " block=" << f.block << " layout=" << (f.orig_nk ? "nk" : "kn")
      << " n=" << f.n << " k=" << f.k;
    if (!f.activations.empty()) o << " act=" << f.activations;
    meta["ymlopt.format." + name] = o.str();
  }
  if (!tensors.empty()) io::save_safetensors(out_weights, tensors, meta);  // atomic
  for (std::int32_t i : copied) dag_.data[std::size_t(i)].src = out_abs;
  const fs::path xml_dir = fs::absolute(out_xml).parent_path();
  write_atomic(out_xml, emit_workflow(dag_, xml_dir.string()));
}

}  // namespace ymlopt::opt

// ---------------------------------------------------------------- embedding tables

namespace ymlopt::opt {

std::vector<ModelEditor::EmbeddingUse> ModelEditor::embedding_tables(std::vector<std::string>* refused) const {
  std::map<std::int32_t, EmbeddingUse> uses;
  std::map<std::int32_t, std::string> why;  // the first reason a table cannot be compressed
  std::vector<std::int32_t> order;
  auto name_of = [&](std::int32_t d) {
    const DataDecl& decl = dag_.data[std::size_t(d)];
    if (auto o = origin_name_.find(d); o != origin_name_.end()) return o->second;
    return decl.key.empty() ? decl.name : decl.key;
  };
  // the tables: data bound to nn.embedding's port 'table'
  for (std::size_t i = 0; i < dag_.tasks.size(); ++i) {
    const TaskNode& t = dag_.tasks[i];
    if (t.comp->name != components::kEmbedding) continue;
    const DataRef r = t.bindings[port_index(t, "table")].ref;
    if (r.data < 0) continue;
    auto [it, fresh] = uses.try_emplace(r.data);
    EmbeddingUse& u = it->second;
    if (fresh) {
      order.push_back(r.data);
      const DataDecl& decl = dag_.data[std::size_t(r.data)];
      u.data = r.data;
      u.name = name_of(r.data);
      u.vocab = decl.rows;
      u.d = decl.cols;
      const bool floaty = decl.dtype == DType::f32 || decl.dtype == DType::f64 || decl.dtype == DType::f16 ||
                          decl.dtype == DType::bf16;
      if (decl.init != InitKind::file) why.emplace(r.data, "not loaded from a file");
      else if (!floaty) why.emplace(r.data, std::string("stored as ") + dtype_name(decl.dtype) + " (already compressed)");
      else if (decl.shape.size() != 2) why.emplace(r.data, "not a 2-D [vocab, d] tensor");
      if (decl.tiled()) {
        if (decl.ntile_c > 1) why.emplace(r.data, "tiles split its width d");
        u.tile_n = decl.tile_rows;
      }
    }
    if (r.tile >= 0) why.emplace(r.data, "nn.embedding reads a tile of it");
    if (t.args.get_string("format") != "dense") why.emplace(r.data, "read with format=" + t.args.get_string("format"));
    u.tasks.push_back(i);
  }
  // every other reader: a tied nn.linear (w = table as [vocab, d]) or a refusal
  for (std::size_t i = 0; i < dag_.tasks.size(); ++i) {
    const TaskNode& t = dag_.tasks[i];
    for (std::size_t p = 0; p < t.bindings.size(); ++p) {
      const std::int32_t d = t.bindings[p].ref.data;
      auto it = uses.find(d);
      if (d < 0 || it == uses.end()) continue;
      const std::string& port = t.comp->ports[p].name;
      if (t.comp->name == components::kEmbedding && port == "table") continue;
      if (t.comp->name == components::kLinear && port == "w") {
        if (t.args.get_string("format") != "dense")
          why.emplace(d, "the tied nn.linear '" + task_key(t) + "' reads it with format=" + t.args.get_string("format"));
        else if (!t.args.get_bool("transpose_w"))
          why.emplace(d, "the tied nn.linear '" + task_key(t) +
                             "' reads it as [k, n] (transpose_w=false): its codes would need the other layout");
        else
          it->second.linear_tasks.push_back(i);
        continue;
      }
      why.emplace(d, "also read by " + t.comp->name + " port '" + port + "'");
    }
  }
  std::vector<EmbeddingUse> out;
  for (std::int32_t d : order) {
    if (auto w = why.find(d); w != why.end()) {
      if (refused) refused->push_back(uses[d].name + ": " + w->second);
      continue;
    }
    out.push_back(uses[d]);
  }
  return out;
}

DenseWeight ModelEditor::load_table(const EmbeddingUse& u) const {
  DenseWeight w;
  w.n = u.vocab;
  w.k = u.d;
  w.w = load_values(u.data);
  return w;
}

ModelEditor::EmbeddingUse ModelEditor::replace_embedding(const EmbeddingUse& u, std::vector<NewTensor> tensors,
                                                         const std::map<std::string, std::string>& args) {
  const DataDecl old = dag_.data[std::size_t(u.data)];
  auto arg = [&](const char* k, const std::string& def) {
    auto it = args.find(k);
    return it == args.end() ? def : it->second;
  };
  const bool hot = std::any_of(tensors.begin(), tensors.end(), [](const NewTensor& t) { return t.role == "w_hot"; });
  if (hot && !u.linear_tasks.empty())
    throw std::invalid_argument("table '" + u.name + "': hot rows are read by nn.embedding only, not by its tied linears");
  Final& f = final_[u.name];
  if (f.src.empty()) {
    f.src = old.src;
    f.orig_nk = true;  // W = table [n = vocab, k = d]
    f.n = u.vocab;
    f.k = u.d;
  }
  f.format = arg("format", "dense");
  f.group = std::stoll(arg("group", "0"));
  f.block = 0;
  const std::map<std::string, DataRef> made = add_replacement(u.name, std::move(tensors), old.tiled() ? u.tile_n : 0);
  origin_name_[made.at("w").data] = u.name;
  for (std::size_t i : u.tasks) {
    TaskNode& t = dag_.tasks[i];
    for (const auto& [role, port] : nn::table_companion_ports()) {
      auto it = made.find(role);
      if (it == made.end()) unbind(t, port);
      else bind(t, port, DataRef{it->second.data, -1});
    }
    set_arg(t, "format", f.format);
    set_arg(t, "group", std::to_string(f.group));
  }
  for (std::size_t i : u.linear_tasks) {
    TaskNode& t = dag_.tasks[i];
    const DataRef wref = t.bindings[port_index(t, "w")].ref;
    const std::int64_t tile = wref.tile >= 0 ? wref.tile / old.ntile_c : -1;  // the row tile (along vocab)
    for (const char* role : {"w", "w_scale", "w_zero"}) {
      auto it = made.find(role);
      if (it == made.end()) {
        unbind(t, role);
        continue;
      }
      DataRef r = it->second;
      if (tile >= 0) r.tile = std::int32_t(tile);
      bind(t, role, r);
    }
    set_arg(t, "format", f.format);
    set_arg(t, "group", std::to_string(f.group));
    if (f.format != "dense") set_arg(t, "transpose_w", "false");  // compressed W is always [n, k]
  }
  EmbeddingUse out = u;
  out.data = made.at("w").data;
  return out;
}

}  // namespace ymlopt::opt
