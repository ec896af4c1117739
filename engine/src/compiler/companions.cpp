// Weights stored compressed by `ymlopt optimize`: their companion tensors, declared
// beside the weight and bound to nn.linear's and nn.embedding's ports.
#include "compiler.hpp"

#include <sstream>

#include "io/tensor_file.hpp"

namespace ymlopt::compiler {

// A weight stored compressed by `ymlopt optimize` (see DataDecl::format): the
// file has metadata "ymlopt.format.<key>" = "FORMAT group=G block=B layout=nk|kn
// n=N k=K [act=f32]" and companion tensors "<key>.w", "<key>.w_scale", ... Returns false
// when the file holds no such record (the key is then checked as usual).
bool Compiler::compressed_source(DataDecl& d, const Attr& src) {
  if (d.key.empty()) return false;
  std::map<std::string, std::string> meta;
  std::vector<io::TensorInfo> infos;
  try {
    meta = io::read_metadata(d.src);
    auto it = meta.find("ymlopt.format." + d.key);
    if (it == meta.end()) return false;
    infos = io::list_tensors(d.src);
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
    for (const char* role : {"w", "w_scale", "w_zero", "w_index", "w_ptr", "w_hot", "w_hot_scale"}) {
      const std::string ck = d.key + "." + role;
      const io::TensorInfo* hit = nullptr;
      for (const auto& t : infos)
        if (t.name == ck) hit = &t;
      if (!hit) {
        if (std::string(role) == "w") {
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

// Binds nn.linear's companion ports for a compressed weight, and nn.embedding's
// (table, table_scale, table_zero) for a compressed table; any other reader
// of one is an error. Returns false after reporting.
bool Compiler::bind_compressed(const Element& e, const ComponentSpec* c, std::vector<Binding>& binds,
                     std::vector<ArgValue>& args, const std::vector<bool>& arg_set,
                     const std::function<std::string()>& who) {
  for (size_t k = 0; k < binds.size(); ++k) {
    if (binds[k].ref.data < 0) continue;
    const DataDecl& d = dag_.data[size_t(binds[k].ref.data)];
    if (d.format.empty()) continue;
    if (c->name == "nn.embedding" && c->ports[k].name == "table") {
      if (!bind_compressed_table(e, c, k, binds, args, arg_set, who)) return false;
      continue;
    }
    if (c->name != "nn.linear" || c->ports[k].name != "w") {
      diags_.error(e.loc, who() + ": '" + d.name + "' is stored compressed (" + d.format + ") in " + d.src +
                              ": only nn.linear's port 'w' can read it (and nn.embedding's port 'table' when it is an "
                              "int8/int4 table)");
      return false;
    }
    for (const auto& [role, idx] : d.companions)
      if (role == "w_hot") {
        diags_.error(e.loc, who() + ": '" + d.name + "' is stored " + d.format + " with int8 hot rows in " + d.src +
                                ": only nn.embedding's port 'table' can read it");
        return false;
      }
    auto param = [&](const char* n) {
      size_t i = 0;
      while (i < c->params.size() && c->params[i].name != n) ++i;
      return i;
    };
    if (arg_set[param("format")] && args[param("format")].text != "dense") {
      diags_.error(e.loc, who() + ": format=\"" + args[param("format")].text + "\" but '" + d.name +
                              "' is stored " + d.format + " (leave format out)");
      return false;
    }
    const std::size_t tw = param("transpose_w");
    if (arg_set[tw] && (args[tw].number != 0) != d.format_nk) {
      diags_.error(e.loc, who() + ": transpose_w=" + args[tw].text + " but '" + d.name + "' is declared " +
                              (d.format_nk ? "[n, k]" : "[k, n]"));
      return false;
    }
    // a tile's index along the output features
    const DataRef w = binds[k].ref;
    const std::int32_t tile = w.tile < 0 ? -1 : std::int32_t(d.format_nk ? w.tile / d.ntile_c : w.tile % d.ntile_c);
    for (const auto& [role, idx] : d.companions) {
      size_t p = 0;
      while (p < c->ports.size() && c->ports[p].name != role) ++p;
      if (p == c->ports.size()) continue;
      binds[p] = Binding{DataRef{idx, tile}, Access::read};
    }
    auto set = [&](const char* n, const std::string& text, double number) {
      const size_t i = param(n);
      if (i < args.size()) args[i].text = text, args[i].number = number;
    };
    if (d.format == "dense") {
      set("transpose_w", "true", 1);  // the companion is [n, k]
    } else {
      set("format", d.format, 0);
      set("group", std::to_string(d.format_group), double(d.format_group));
      set("block", std::to_string(d.format_block), double(d.format_block));
      if (!d.format_act.empty()) set("activations", d.format_act, 0);
    }
  }
  return true;
}

// nn.embedding reading a compressed table (port k): the file's record describes
// W = table [n = vocab, k = d] (layout nk), so the companions "w", "w_scale",
// "w_zero" are the int8/int4 codes and scales the embedding gathers from (the same
// ones a tied lm_head nn.linear with transpose_w=true reads), or "w" a dense table.
bool Compiler::bind_compressed_table(const Element& e, const ComponentSpec* c, size_t k, std::vector<Binding>& binds,
                           std::vector<ArgValue>& args, const std::vector<bool>& arg_set,
                           const std::function<std::string()>& who) {
  const DataDecl& d = dag_.data[size_t(binds[k].ref.data)];
  const std::string what = "'" + d.name + "' is stored " + d.format + " in " + d.src;
  auto param = [&](const char* n) {
    size_t i = 0;
    while (i < c->params.size() && c->params[i].name != n) ++i;
    return i;
  };
  const size_t fi = param("format");
  if (fi < args.size() && arg_set[fi] && args[fi].text != "dense") {
    diags_.error(e.loc, who() + ": format=\"" + args[fi].text + "\" but " + what + " (leave format out)");
    return false;
  }
  if (d.format != "int8" && d.format != "int4" && d.format != "dense") {
    diags_.error(e.loc, who() + ": " + what + ": nn.embedding reads dense, int8 or int4 tables only");
    return false;
  }
  if (!d.format_nk) {
    diags_.error(e.loc, who() + ": " + what + " in layout kn ([d, vocab]): nn.embedding needs the table as [vocab, d]");
    return false;
  }
  if (binds[k].ref.tile >= 0) {
    diags_.error(e.loc, who() + ": " + what + ": nn.embedding reads the whole compressed table, not a tile");
    return false;
  }
  const auto& kPort = table_companion_ports();
  for (const auto& [role, idx] : d.companions) {
    auto it = kPort.begin();
    while (it != kPort.end() && it->first != role) ++it;
    if (it == kPort.end()) {
      diags_.error(e.loc, who() + ": " + what + " with a '" + role + "' tensor nn.embedding cannot read");
      return false;
    }
    size_t p = 0;
    while (p < c->ports.size() && c->ports[p].name != it->second) ++p;
    if (p < binds.size()) binds[p] = Binding{DataRef{idx, -1}, Access::read};
  }
  if (d.format != "dense") {
    if (fi < args.size()) args[fi].text = d.format, args[fi].number = 0;
    if (const size_t gi = param("group"); gi < args.size())
      args[gi].text = std::to_string(d.format_group), args[gi].number = double(d.format_group);
  }
  return true;
}

}  // namespace ymlopt::compiler
