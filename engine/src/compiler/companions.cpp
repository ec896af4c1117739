// Weights stored compressed by `ymlopt optimize`: their companion tensors, declared
// beside the weight, and bound to the ports of the tasks that read it by the
// component's reader (ComponentSpec::compressed).
#include "compiler.hpp"

#include <algorithm>
#include <sstream>

#include "io/tensor_file.hpp"

namespace ymlopt::compiler {

// A weight stored compressed by `ymlopt optimize` (see DataDecl::format): the
// file has metadata "ymlopt.format.<key>" = "FORMAT group=G block=B layout=nk|kn
// n=N k=K [act=f32]" and companion tensors "<key>.w", "<key>.w_scale", ... Returns false
// when the file holds no such record (the key is then checked as usual).
bool Compiler::compressed_source(DataDecl& d, const Attr& src) {
  if (d.key.empty()) return false;
  try {
    const io::FileIndex& index = file_index(d.src);
    const std::map<std::string, std::string>& meta = index.metadata;
    auto it = meta.find("ymlopt.format." + d.key);
    if (it == meta.end()) return false;
    const std::vector<io::TensorInfo>& infos = index.tensors;
    std::istringstream words(it->second);
    std::string w;
    words >> d.format;
    std::map<std::string, std::string> kv;
    while (words >> w)
      if (auto eq = w.find('='); eq != std::string::npos) kv[w.substr(0, eq)] = w.substr(eq + 1);
    d.format_group = kv.count("group") ? std::stoll(kv["group"]) : 0;
    d.format_block = kv.count("block") ? std::stoll(kv["block"]) : 0;
    d.format_act = kv.count("act") ? kv["act"] : "";
    const bool nk = kv["layout"] == "nk";
    d.format_nk = nk;
    const std::int64_t n = std::stoll(kv.at("n")), k = std::stoll(kv.at("k"));
    const std::vector<std::int64_t> want = nk ? std::vector<std::int64_t>{n, k} : std::vector<std::int64_t>{k, n};
    const std::string what = "'" + d.key + "' in " + d.src + " (stored " + d.format + ")";
    if (d.shape != want) {
      diags_.error(src.loc, what + " is a " + shape_str(want) + " weight but data '" + d.name + "' is declared " +
                                shape_str(d.shape));
      d.format.clear();
      return true;
    }
    std::int64_t tile_n = 0;
    if (d.tiled()) {
      if ((nk ? d.ntile_c : d.ntile_r) > 1) {
        diags_.error(src.loc, what + ": tiles of a compressed weight may split its output features only");
        d.format.clear();
        return true;
      }
      tile_n = nk ? d.tile_rows : d.tile_cols;
    }
    const CompressedReaders& readers = compressed_readers();
    for (const std::string& role : readers.roles) {
      const std::string ck = d.key + "." + role;
      const io::TensorInfo* hit = nullptr;
      for (const auto& t : infos)
        if (t.name == ck) hit = &t;
      if (!hit) {
        if (readers.required.count(role)) {
          diags_.error(src.loc, what + ": the file has no companion tensor '" + ck + "'");
          d.format.clear();
          return true;
        }
        continue;
      }
      if (!hit->dtype || hit->shape.empty() || hit->shape.size() > 2) {
        diags_.error(src.loc, what + ": companion '" + ck + "' has an unsupported dtype or shape");
        d.format.clear();
        return true;
      }
      DataDecl c;
      c.name = d.name + "." + role;
      c.dtype = *hit->dtype;
      c.shape = hit->shape;
      c.rows = c.shape.size() == 1 ? 1 : c.shape[0];
      c.cols = c.shape.back();
      c.ld = c.cols;
      c.init = InitKind::file;
      c.src = d.src;
      c.key = ck;
      c.loc = d.loc;
      if (tile_n > 0) {
        // row tiles (output features), like the weight's
        const std::int64_t lead = c.shape.size() == 1 ? c.cols : c.rows;
        if (lead != n) {
          diags_.error(src.loc, what + ": format " + d.format + " cannot be split into tiles (used by tiles here)");
          d.format.clear();
          return true;
        }
        if (c.shape.size() == 1) c.tile_rows = 1, c.tile_cols = tile_n;
        else c.tile_rows = tile_n, c.tile_cols = c.cols;
        c.ntile_r = ceil_div(c.rows, c.tile_rows);
        c.ntile_c = ceil_div(c.cols, c.tile_cols);
      }
      pending_companions_.emplace_back(role, std::move(c));
    }
  } catch (const io::IoError& e) {  // the file itself (its message names it): reported at its first use
    broken_files_.insert(d.src);
    diags_.error(src.loc, e.what());
    pending_companions_.clear();
    d.format.clear();
    return true;
  } catch (const std::exception& e) {
    diags_.error(src.loc, d.src + ": " + e.what());
    pending_companions_.clear();
    d.format.clear();
    return true;
  }
  return true;
}

// The components that read compressed weights (ComponentSpec::compressed), those
// that always can first: the companion roles of them all, in that order, and who
// they are, for the message to any other reader.
const Compiler::CompressedReaders& Compiler::compressed_readers() {
  if (readers_) return *readers_;
  CompressedReaders r;
  std::vector<const ComponentSpec*> readers;
  for (const ComponentSpec* c : reg_.all())
    if (c->compressed.bind && !c->compressed.port.empty()) readers.push_back(c);
  std::stable_partition(readers.begin(), readers.end(),
                        [](const ComponentSpec* c) { return c->compressed.when.empty(); });
  std::vector<std::string> always, sometimes;  // "<component>'s port '<port>'[ <when>]"
  for (const ComponentSpec* c : readers) {
    const CompressedReader& cr = c->compressed;
    for (const std::string& role : cr.roles)
      if (std::find(r.roles.begin(), r.roles.end(), role) == r.roles.end()) r.roles.push_back(role);
    if (!cr.roles.empty()) r.required.insert(cr.roles.front());
    const std::string who = c->name + "'s port '" + cr.port + "'";
    if (cr.when.empty()) always.push_back(who);
    else sometimes.push_back(who + " " + cr.when);
  }
  if (always.empty()) std::swap(always, sometimes);
  auto join = [](const std::vector<std::string>& v, const char* sep) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
    return s;
  };
  r.who = always.empty() ? "no component can read it"
                         : "only " + join(always, " or ") + " can read it" +
                               (sometimes.empty() ? "" : " (and " + join(sometimes, ", ") + ")");
  return *(readers_ = std::move(r));
}

// Binds the companions of each compressed weight a task reads through its
// component's reader; any other reader of one is an error. Returns false after reporting.
bool Compiler::bind_compressed(const Element& e, const ComponentSpec* c, std::vector<Binding>& binds,
                               std::vector<ArgValue>& args, const std::vector<bool>& arg_set,
                               const std::function<std::string()>& who) {
  auto param = [&](std::string_view n) {
    size_t i = 0;
    while (i < c->params.size() && c->params[i].name != n) ++i;
    return i;
  };
  for (size_t k = 0; k < binds.size(); ++k) {
    if (binds[k].ref.data < 0) continue;
    const DataDecl& d = dag_.data[size_t(binds[k].ref.data)];
    if (d.format.empty()) continue;
    if (!c->compressed.bind || c->ports[k].name != c->compressed.port) {
      diags_.error(e.loc, who() + ": '" + d.name + "' is stored compressed (" + d.format + ") in " + d.src + ": " +
                              compressed_readers().who);
      return false;
    }
    const DataRef ref = binds[k].ref;
    CompressedWeight w;
    w.port = k;
    w.name = d.name;
    w.src = d.src;
    w.format = d.format;
    w.group = d.format_group;
    w.block = d.format_block;
    w.nk = d.format_nk;
    w.activations = d.format_act;
    w.tiled = ref.tile >= 0;
    for (const auto& [role, idx] : d.companions) w.roles.push_back(role);
    w.given = [&](std::string_view n) -> const ArgValue* {
      const size_t i = param(n);
      return i < args.size() && arg_set[i] ? &args[i] : nullptr;
    };
    CompanionBinding out;
    std::string err;
    try {
      err = c->compressed.bind(w, out);
    } catch (const std::exception& x) {  // a plugin's reader
      err = std::string("reading compressed '") + d.name + "': " + x.what();
    }
    if (!err.empty()) {
      diags_.error(e.loc, who() + ": " + err);
      return false;
    }
    // companions are split like the weight, along its output features only
    const std::int32_t tile =
        ref.tile < 0 ? -1 : std::int32_t(d.format_nk ? ref.tile / d.ntile_c : ref.tile % d.ntile_c);
    for (const auto& [role, port] : out.ports) {
      auto comp = d.companions.begin();
      while (comp != d.companions.end() && comp->first != role) ++comp;
      size_t p = 0;
      while (p < c->ports.size() && c->ports[p].name != port) ++p;
      if (comp != d.companions.end() && p < binds.size()) binds[p] = Binding{DataRef{comp->second, tile}, Access::read};
    }
    for (const auto& [name, value] : out.args)
      if (const size_t i = param(name); i < args.size()) args[i] = value;
  }
  return true;
}

}  // namespace ymlopt::compiler
