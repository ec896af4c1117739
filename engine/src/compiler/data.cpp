// <data> declarations (shape, tiles, placement, init, src= files) and references to data.
#include "compiler.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "io/tensor_file.hpp"

namespace ymlopt::compiler {

void Compiler::data(const Element& e) {
  const Attr* na = e.find("name");
  const Attr* sa = e.find("shape");
  if (!na || !sa) return;
  Frame& fr = frames_.back();
  // names may be computed (one tensor per layer in a loop: name="w_${l}")
  const auto rendered = render(*na);
  if (!rendered) return;
  const std::string& name = *rendered;
  DataDecl d;
  d.name = fr.prefix + name;
  d.loc = e.loc;
  // until the declaration succeeds, uses of the name are not reported again
  fr.failed_data.insert(name);
  if (!data_shape(e, d) || !data_tiles(e, name, d)) return;
  data_placement(e, d);
  data_init(e, name, d);
  if (!data_source(e, d)) return;
  const bool init_or_src = e.find("init") || e.find("src");
  if (fr.data.count(name)) {
    const DataDecl& prev = dag_.data[size_t(fr.data[name])];
    if (prev.loc.line != e.loc.line || prev.loc.file != e.loc.file) {
      diags_.error(na->loc, "data '" + name + "' declared twice (first at line " + std::to_string(prev.loc.line) + ")");
      return;
    }
  }
  if (bound_.count(&e)) {  // a sub-workflow's data bound by the caller
    const std::int32_t idx = bound_[&e];
    const DataDecl& outer = dag_.data[size_t(idx)];
    if (outer.dtype != d.dtype || outer.shape != d.shape)
      diags_.error(e.loc, "data '" + name + "' is declared " + dtype_name(d.dtype) + shape_str(d.shape) +
                              " but the caller binds '" + outer.name + "' which is " + dtype_name(outer.dtype) +
                              shape_str(outer.shape));
    if (init_or_src) diags_.error(e.loc, "data '" + name + "' is bound by the caller and cannot have init= or src=");
    fr.data[name] = idx;
    fr.failed_data.erase(name);
    return;
  }
  if (diags_.has_errors() && d.shape.empty()) return;
  if (const std::int32_t same = shared_file_tensor(d); same >= 0) {  // one tensor for both names
    shared_file_data_.emplace(same, d.name);
    pending_companions_.clear();
    fr.failed_data.erase(name);
    fr.data[name] = same;
    return;
  }
  // files are used in place (their rows are dense); allocated tensors may be padded
  d.ld = d.init == InitKind::file ? d.cols : padded_ld(d.rows, d.cols, d.dtype);
  fr.failed_data.erase(name);
  fr.data[name] = std::int32_t(dag_.data.size());
  const std::int32_t index = std::int32_t(dag_.data.size());
  push_decl(std::move(d));
  // the companions of a compressed weight (hidden: tasks name the weight)
  for (auto& [role, cd] : pending_companions_) {
    dag_.data[size_t(index)].companions.emplace_back(role, std::int32_t(dag_.data.size()));
    push_decl(std::move(cd));
  }
  pending_companions_.clear();
}

// A second declaration of a file tensor (the same sub-workflow called twice, as
// generation's prefill and decode step do) reads the first one's storage
// instead of a copy, as long as no task has written it; tasks may not write it
// afterwards (access() refuses).
std::int32_t Compiler::shared_file_tensor(const DataDecl& d) {
  if (d.init != InitKind::file) return -1;
  std::string key = d.src + '\n' + d.key + '\n' + dtype_name(d.dtype) + shape_str(d.shape) + '\n' +
                    std::to_string(d.tile_rows) + 'x' + std::to_string(d.tile_cols) + '\n' + d.format + '\n' +
                    d.distribute + '\n' + std::to_string(d.owner) + '\n' + std::to_string(d.rank_first) + '+' +
                    std::to_string(d.rank_count) + (d.reshape ? "\nreshape" : "");
  for (auto c : d.col_starts) key += ',' + std::to_string(c);
  const auto it = file_data_.find(key);
  if (it == file_data_.end()) {
    file_data_.emplace(std::move(key), std::int32_t(dag_.data.size()));
    return -1;
  }
  const DataState& st = states_[size_t(it->second)];
  bool written = st.whole.writer >= 0;
  for (const AccessState& t : st.tiles) written = written || t.writer >= 0;
  return written ? -1 : it->second;
}

// dtype= and shape=: the tensor's element type, dimensions, rows and columns.
bool Compiler::data_shape(const Element& e, DataDecl& d) {
  const Attr* sa = e.find("shape");
  if (const Attr* a = e.find("dtype")) {
    auto text = render(*a);
    if (!text) return false;
    auto t = parse_dtype(*text);
    if (!t) {
      diags_.error(a->loc, "unknown dtype '" + *text + "' (expected f32, f64, f16, bf16, i8 or i32)");
      return false;
    }
    d.dtype = *t;
  }
  auto shape = eval_list(*sa);
  if (!shape) return false;
  for (auto x : *shape)
    if (x <= 0) {
      diags_.error(sa->loc, "shape " + shape_str(*shape) + " has a dimension <= 0");
      return false;
    }
  if (shape->size() > Shape::kMaxRank) {
    diags_.error(sa->loc, "shape " + shape_str(*shape) + " has rank " + std::to_string(shape->size()) +
                              "; at most " + std::to_string(Shape::kMaxRank) + " dimensions are supported");
    return false;
  }
  {  // 2^62 bytes at most: sizes and offsets stay in int64 everywhere
    std::int64_t bytes = dtype_size(d.dtype);
    for (auto x : *shape)
      if (__builtin_mul_overflow(bytes, x, &bytes) || bytes > (std::int64_t(1) << 62)) {
        diags_.error(sa->loc, "shape " + shape_str(*shape) + " of " + dtype_name(d.dtype) +
                                  " is too large (more than 2^62 bytes)");
        return false;
      }
  }
  d.shape = *shape;
  if (d.shape.size() == 1) d.rows = 1, d.cols = d.shape[0];
  else {
    d.cols = d.shape.back();
    d.rows = 1;
    for (size_t i = 0; i + 1 < d.shape.size(); ++i) d.rows *= d.shape[i];
  }
  return true;
}

// tile= (uniform tiles) or split= (column tiles of given widths).
bool Compiler::data_tiles(const Element& e, const std::string& name, DataDecl& d) {
  if (const Attr* ta = e.find("tile")) {
    auto t = eval_list(*ta);
    if (!t) return false;
    if (d.shape.size() > 2 || t->size() != d.shape.size()) {
      diags_.error(ta->loc, "tile " + shape_str(*t) + " does not match shape " + shape_str(d.shape) +
                                " (tiles are given per dimension, for rank 1 or 2)");
      return false;
    }
    for (auto x : *t)
      if (x <= 0) {
        diags_.error(ta->loc, "tile " + shape_str(*t) + " has a dimension <= 0");
        return false;
      }
    if (t->size() == 1) d.tile_rows = 1, d.tile_cols = (*t)[0];
    else d.tile_rows = (*t)[0], d.tile_cols = (*t)[1];
    d.ntile_r = ceil_div(d.rows, d.tile_rows);
    d.ntile_c = ceil_div(d.cols, d.tile_cols);
    if (static_cast<long double>(d.ntile_r) * d.ntile_c > static_cast<long double>(opts_.max_tasks)) {
      diags_.error(ta->loc, "tile " + shape_str(*t) + " cuts '" + name + "' " + shape_str(d.shape) + " into " +
                                std::to_string(d.ntile_r) + " x " + std::to_string(d.ntile_c) +
                                " tiles, more than the task limit (" + std::to_string(opts_.max_tasks) +
                                "; --max-tasks)");
      return false;
    }
  }
  if (const Attr* sa = e.find("split")) {
    auto w = eval_list(*sa);
    if (!w) return false;
    if (e.find("tile")) {
      diags_.error(sa->loc, "data '" + name + "' has both tile= and split=");
      return false;
    }
    if (d.shape.size() > 2) {
      diags_.error(sa->loc, "split= is for rank 1 or 2 data; '" + name + "' has shape " + shape_str(d.shape));
      return false;
    }
    std::int64_t sum = 0;
    for (auto x : *w) {
      if (x <= 0) {
        diags_.error(sa->loc, "split " + shape_str(*w) + " has a width <= 0");
        return false;
      }
      sum += x;
    }
    if (sum != d.cols) {
      diags_.error(sa->loc, "split " + shape_str(*w) + " adds up to " + std::to_string(sum) + " columns, but '" +
                                name + "' has " + std::to_string(d.cols));
      return false;
    }
    d.set_split(*w);
  }
  return true;
}

// distribute= and owner=.
void Compiler::data_placement(const Element& e, DataDecl& d) {
  if (const Attr* a = e.find("distribute")) {  // placement on MPI ranks (--backend starpu-mpi)
    static const std::vector<std::string> kinds = {"block-cyclic-2d", "rows", "cols", "replicate"};
    if (std::find(kinds.begin(), kinds.end(), a->value) == kinds.end())
      diags_.error(a->loc, "unknown distribute '" + a->value + "'" + did_you_mean(a->value, kinds) +
                               " (expected block-cyclic-2d, rows, cols or replicate)");
    d.distribute = a->value;
  }
  if (const Attr* a = e.find("owner")) {
    if (auto v = eval_int(*a)) {
      if (*v < 0) diags_.error(a->loc, "owner=" + std::to_string(*v) + " is negative (expected a rank >= 0)");
      d.owner = std::int32_t(*v);
    }
  }
  if (const Attr* a = e.find("ranks")) {  // a rank group: "A-B"
    auto v = render(*a);
    if (!v) return;
    long long lo = -1, hi = -1;
    char tail = 0;
    if (std::sscanf(v->c_str(), "%lld-%lld%c", &lo, &hi, &tail) != 2 || lo < 0 || hi < lo || hi >= (1LL << 30)) {
      diags_.error(a->loc, "ranks=\"" + *v + "\" is not a rank range FIRST-LAST (0 <= FIRST <= LAST)");
      return;
    }
    if (e.find("owner")) diags_.error(a->loc, "data '" + d.name + "' has both owner= and ranks=");
    d.rank_first = std::int32_t(lo);
    d.rank_count = std::int32_t(hi - lo + 1);
  }
}

// init=, seed= and value=.
void Compiler::data_init(const Element& e, const std::string& name, DataDecl& d) {
  const Attr* init = e.find("init");
  const Attr* src = e.find("src");
  if (init && src) diags_.error(src->loc, "data '" + name + "' has both init= and src=");
  if (init) {
    static const std::vector<std::pair<std::string, InitKind>> kinds = {
        {"zeros", InitKind::zeros},   {"ones", InitKind::ones}, {"identity", InitKind::identity},
        {"random", InitKind::random}, {"spd", InitKind::spd},   {"dominant", InitKind::dominant},
        {"value", InitKind::value},   {"range", InitKind::range}};
    std::vector<std::string> names;
    for (auto& [k, v] : kinds) {
      names.push_back(k);
      if (init->value == k) d.init = v;
    }
    if (d.init == InitKind::none)
      diags_.error(init->loc, "unknown init '" + init->value + "'" + did_you_mean(init->value, names) +
                                  " (expected zeros, ones, identity, random, spd, dominant, value or range)");
    if ((d.init == InitKind::identity || d.init == InitKind::spd || d.init == InitKind::dominant) &&
        (d.shape.size() != 2 || d.shape[0] != d.shape[1]))
      diags_.error(init->loc, "init=\"" + init->value + "\" needs a square 2-D shape, not " + shape_str(d.shape));
    if (d.init == InitKind::value && !e.find("value"))
      diags_.error(init->loc, "init=\"value\" requires attribute 'value'");
  }
  if (const Attr* a = e.find("seed")) {
    if (auto v = eval_int(*a)) d.seed = std::uint64_t(*v);
  }
  if (const Attr* a = e.find("value")) {
    if (auto v = eval(*a)) {
      if (auto num = convert(*v, "float"); num) d.value = num->f;  // "1e30" is plain text until converted
      else diags_.error(a->loc, "value=\"" + a->value + "\" is not a number");
      if (!init) d.init = InitKind::value;
    }
  }
}

// src= (with key=, reshape=): the file, found and checked from its header.
bool Compiler::data_source(const Element& e, DataDecl& d) {
  const Attr* src = e.find("src");
  const Frame& fr = frames_.back();
  if (src) {
    auto path = render(*src);
    if (!path) return false;
    // relative to the workflow's folder, else to the current directory
    // (where a path given with --set usually is)
    fs::path p(*path);
    if (p.is_relative() && (path_exists(fr.dir / p) || !path_exists(p))) p = fr.dir / p;
    d.src = p.string();
    d.init = InitKind::file;
    if (const Attr* k = e.find("key")) {
      if (auto kv = render(*k)) d.key = *kv;
    }
    if (const Attr* r = e.find("reshape")) {
      if (r->value != "true" && r->value != "false")
        diags_.error(r->loc, "reshape=\"" + r->value + "\" must be true or false");
      d.reshape = r->value == "true";
    }
    if (io::is_shard_index(d.src) && path_exists(p)) {
      if (!shard_source(d, *src)) return true;
      p = d.src;
    }
    if (!opts_.check_files) {
      // dry run: the declaration alone sizes the tensor
    } else if (!path_exists(p)) {
      if (missing_files_.insert(d.src).second)
        diags_.error(src->loc, "cannot open '" + d.src + "' (nor '" + *path + "' from the current directory)");
    } else if (broken_files_.count(d.src)) {
      // its header error was reported where the file was first used
    } else if (!compressed_source(d, *src)) {
      check_source(d, *src);
    }
  } else {
    for (const char* only : {"key", "reshape"})
      if (const Attr* a = e.find(only)) diags_.error(a->loc, std::string(only) + "= is only meaningful with src=");
  }
  return true;
}

void Compiler::push_decl(DataDecl d) {
  dag_.data.push_back(std::move(d));
  DataState st;
  const DataDecl& dd = dag_.data.back();
  st.init = dd.init != InitKind::none;
  if (dd.tiled()) {
    st.tiles.resize(size_t(dd.ntiles()));
    if (!st.init) st.tile_init.assign(size_t(dd.ntiles()), 0), st.uninit_tiles = dd.ntiles();
  } else if (!st.init) {
    st.uninit_tiles = 1;
  }
  states_.push_back(std::move(st));
}

const io::FileIndex& Compiler::file_index(const std::string& path) {
  auto it = file_index_.find(path);
  if (it == file_index_.end()) it = file_index_.emplace(path, io::index_file(path)).first;
  return it->second;
}

bool Compiler::shard_source(DataDecl& d, const Attr& src) {
  auto it = shard_index_.find(d.src);
  if (it == shard_index_.end()) {
    try {
      it = shard_index_.emplace(d.src, io::read_shard_index(d.src)).first;
    } catch (const io::IoError& e) {
      if (broken_files_.insert(d.src).second) diags_.error(src.loc, e.what());
      return false;
    }
  }
  const io::ShardIndex& ix = it->second;
  if (d.key.empty()) {
    diags_.error(src.loc, d.src + " is a shard index: name the tensor with key=");
    return false;
  }
  const auto hit = ix.shard_of.find(d.key);
  if (hit == ix.shard_of.end()) {
    std::vector<std::string> names;
    for (const auto& [n, f] : ix.shard_of) names.push_back(n);
    diags_.error(src.loc, d.src + " maps no tensor '" + d.key + "'" + did_you_mean(d.key, names));
    return false;
  }
  if (!path_exists(hit->second) && missing_files_.insert(hit->second).second)
    diags_.error(src.loc, "cannot open '" + hit->second + "', the shard " + d.src + " names for '" + d.key + "'");
  d.src = hit->second;
  return true;
}

// The file behind src= must hold the declared dtype and shape (read from its header only).
void Compiler::check_source(const DataDecl& d, const Attr& src) {
  const io::FileIndex* index = nullptr;
  try {
    index = &file_index(d.src);
  } catch (const std::exception& e) {
    broken_files_.insert(d.src);
    diags_.error(src.loc, e.what());
    return;
  }
  const std::vector<io::TensorInfo>& infos = index->tensors;
  const io::TensorInfo* hit = nullptr;
  for (const auto& t : infos)
    if (t.name == d.key) hit = &t;
  if (!hit && (d.key.empty() || io::format_of(d.src) == io::FileFormat::npy) && infos.size() == 1) hit = &infos[0];
  if (!hit) {
    std::vector<std::string> names;
    for (const auto& t : infos) names.push_back(t.name);
    if (d.key.empty())
      diags_.error(src.loc, d.src + " holds " + std::to_string(infos.size()) + " tensors: name one with key=");
    else
      diags_.error(src.loc, d.src + " has no tensor '" + d.key + "'" + did_you_mean(d.key, names));
    return;
  }
  const std::string what = "'" + (hit->name.empty() ? d.src : hit->name) + "' in " + d.src;
  if (!hit->dtype) {
    diags_.error(src.loc, what + " has dtype " + hit->stored_dtype + ", which ymlopt does not support");
    return;
  }
  auto numel = [](const std::vector<std::int64_t>& s) {
    std::int64_t n = 1;
    for (auto x : s) n *= x;
    return n;
  };
  const bool shape_ok = d.reshape ? numel(hit->shape) == numel(d.shape) : hit->shape == d.shape;
  if (*hit->dtype != d.dtype || !shape_ok)
    diags_.error(src.loc, what + " is " + dtype_name(*hit->dtype) + shape_str(hit->shape) + " but data '" + d.name +
                              "' is declared " + dtype_name(d.dtype) + shape_str(d.shape) +
                              (d.reshape ? " (reshape=\"true\" needs as many elements)" : ""));
}

// Parses "A" or "A[i,j]" (already rendered) into a reference.
std::optional<DataRef> Compiler::resolve(const std::string& text, const Attr& a) {
  const auto br = text.find('[');
  std::string name = text.substr(0, br);
  name.erase(name.find_last_not_of(" ") + 1);
  Frame& fr = frames_.back();
  auto it = fr.data.find(name);
  if (it == fr.data.end()) {
    if (fr.failed_data.count(name)) return std::nullopt;  // already reported
    std::vector<std::string> names;
    for (auto& [k, v] : fr.data) names.push_back(k);
    diags_.error(a.loc, "undefined data '" + name + "'" + did_you_mean(name, names));
    return std::nullopt;
  }
  DataRef r{it->second, -1};
  if (br == std::string::npos) return r;
  const DataDecl& d = dag_.data[size_t(r.data)];
  if (text.back() != ']') {
    diags_.error(a.loc, "bad data reference '" + text + "' (expected NAME or NAME[i,j])");
    return std::nullopt;
  }
  std::vector<std::int64_t> idx;
  std::string inner = text.substr(br + 1, text.size() - br - 2);
  size_t p = 0;
  while (p <= inner.size()) {
    size_t q = inner.find(',', p);
    if (q == std::string::npos) q = inner.size();
    const std::string tok = inner.substr(p, q - p);
    char* end = nullptr;
    const long long x = std::strtoll(tok.c_str(), &end, 10);
    if (tok.empty() || *end) {
      diags_.error(a.loc, "bad tile index '" + tok + "' in '" + text + "'");
      return std::nullopt;
    }
    idx.push_back(x);
    p = q + 1;
  }
  if (!d.tiled()) {
    diags_.error(a.loc, "data '" + name + "' is not tiled; it cannot be indexed as '" + text + "'");
    return std::nullopt;
  }
  if (idx.size() != d.shape.size()) {
    diags_.error(a.loc, "'" + text + "' has " + std::to_string(idx.size()) + " indices but '" + name +
                            "' has " + std::to_string(d.shape.size()) + " tiled dimensions");
    return std::nullopt;
  }
  const std::int64_t tr = idx.size() == 1 ? 0 : idx[0];
  const std::int64_t tc = idx.back();
  if (tr < 0 || tr >= d.ntile_r || tc < 0 || tc >= d.ntile_c) {
    const std::string grid = d.shape.size() == 1 ? "[" + std::to_string(d.ntile_c) + "]"
                                                 : "[" + std::to_string(d.ntile_r) + "," + std::to_string(d.ntile_c) + "]";
    diags_.error(a.loc, "tile index out of range: '" + text + "' but '" + name + "' has " + grid + " tiles");
    return std::nullopt;
  }
  r.tile = std::int32_t(tr * d.ntile_c + tc);
  return r;
}

}  // namespace ymlopt::compiler
