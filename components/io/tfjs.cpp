#include "io/tfjs.hpp"


#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

namespace ymlopt::io {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw IoError(path + ": " + why);
}

std::string errno_text(int err) { return std::strerror(err); }

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open: " + errno_text(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {
    fail(path, std::string("invalid JSON: ") + e.what());
  }
}

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

struct Group {
  std::vector<std::string> shards;  // resolved paths
  std::vector<std::uint64_t> sizes; // their sizes, as checked
  std::uint64_t nbytes = 0;         // what its weights need
};

struct Manifest {
  std::vector<TfjsWeight> weights;
  std::vector<Group> groups;
};

Manifest parse_manifest(const std::string& path) {
  const json m = read_json(path);
  if (!m.is_object() || !m.contains("weightsManifest") || !m["weightsManifest"].is_array())
    fail(path, "no \"weightsManifest\" list (not a TF.js model.json?)");
  const fs::path dir = fs::path(path).parent_path();
  Manifest out;
  std::set<std::string> names;
  const auto& groups = m["weightsManifest"];
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::string where = "weightsManifest[" + std::to_string(g) + "]";
    const json& grp = groups[g];
    if (!grp.is_object() || !grp.contains("paths") || !grp["paths"].is_array() ||
        !grp.contains("weights") || !grp["weights"].is_array())
      fail(path, where + ": expected an object with \"paths\" and \"weights\" lists");
    Group group;
    for (const auto& p : grp["paths"]) {
      if (!p.is_string() || p.get<std::string>().empty())
        fail(path, where + ": \"paths\" must hold file names");
      group.shards.push_back((dir / p.get<std::string>()).string());
    }
    for (const auto& w : grp["weights"]) {
      if (!w.is_object() || !w.contains("name") || !w["name"].is_string())
        fail(path, where + ": a weight has no \"name\"");
      TfjsWeight t;
      t.name = w["name"].get<std::string>();
      const std::string what = "weight '" + t.name + "'";
      if (w.contains("quantization")) {
        const auto& q = w["quantization"];
        const std::string qd = q.is_object() && q.contains("dtype") && q["dtype"].is_string()
                                   ? q["dtype"].get<std::string>() : "?";
        fail(path, what + " is quantized (" + qd +
                       "); quantized TF.js weights are not supported: export the model unquantized");
      }
      if (!w.contains("dtype") || !w["dtype"].is_string()) fail(path, what + ": no \"dtype\"");
      t.dtype = w["dtype"].get<std::string>();
      if (t.dtype != "float32" && t.dtype != "int32")
        fail(path, what + ": unsupported dtype '" + t.dtype + "' (expected float32 or int32)");
      if (!w.contains("shape") || !w["shape"].is_array()) fail(path, what + ": no \"shape\" list");
      std::uint64_t n = 4;
      for (const auto& d : w["shape"]) {
        if (!d.is_number_integer() || d.get<std::int64_t>() < 0)
          fail(path, what + ": invalid shape " + w["shape"].dump());
        t.shape.push_back(d.get<std::int64_t>());
      }
      for (const auto d : t.shape) {
        const auto ud = static_cast<std::uint64_t>(d);
        if (ud != 0 && n > std::numeric_limits<std::uint64_t>::max() / 2 / ud)
          fail(path, what + ": shape " + shape_str(t.shape) + " is too large");
        n *= ud;
      }
      if (!names.insert(t.name).second) fail(path, "duplicate weight name '" + t.name + "'");
      t.group = g;
      t.offset = group.nbytes;
      t.nbytes = n;
      group.nbytes += n;
      out.weights.push_back(std::move(t));
    }
    if (group.shards.empty() && group.nbytes > 0)
      fail(path, where + ": weights but no \"paths\"");
    out.groups.push_back(std::move(group));
  }
  return out;
}

}  // namespace

std::vector<TfjsWeight> read_tfjs_manifest(const std::string& model_json) {
  return parse_manifest(model_json).weights;
}

std::vector<TfjsNode> list_tfjs_nodes(const std::string& model_json) {
  const json m = read_json(model_json);
  if (!m.is_object() || !m.contains("modelTopology") || !m["modelTopology"].is_object())
    fail(model_json, "no \"modelTopology\" object (not a TF.js graph model?)");
  const json& topo = m["modelTopology"];
  std::vector<TfjsNode> out;
  if (!topo.contains("node")) return out;
  if (!topo["node"].is_array()) fail(model_json, "modelTopology.node is not a list");
  for (const auto& n : topo["node"]) {
    if (!n.is_object() || !n.contains("name") || !n["name"].is_string() || !n.contains("op") ||
        !n["op"].is_string())
      fail(model_json, "modelTopology.node: a node has no \"name\" or \"op\"");
    TfjsNode node;
    node.name = n["name"].get<std::string>();
    node.op = n["op"].get<std::string>();
    if (n.contains("input")) {
      if (!n["input"].is_array()) fail(model_json, "node '" + node.name + "': \"input\" is not a list");
      for (const auto& i : n["input"]) {
        if (!i.is_string()) fail(model_json, "node '" + node.name + "': non-string input");
        node.inputs.push_back(i.get<std::string>());
      }
    }
    node.attr_json = n.contains("attr") ? n["attr"].dump() : "{}";
    out.push_back(std::move(node));
  }
  return out;
}

std::vector<TfjsWeight> convert_tfjs(const std::string& model_json,
                                     const std::string& out_safetensors) {
  Manifest m = parse_manifest(model_json);

  // Sizes first: nothing is written unless every group's shards add up exactly.
  for (std::size_t g = 0; g < m.groups.size(); ++g) {
    Group& grp = m.groups[g];
    std::uint64_t have = 0;
    for (const auto& s : grp.shards) {
      std::error_code ec;
      const auto st = fs::status(s, ec);
      if (ec || !fs::exists(st))
        fail(s, "cannot open shard: " + (ec ? ec.message() : errno_text(ENOENT)));
      if (!fs::is_regular_file(st)) fail(s, "shard is not a regular file");
      grp.sizes.push_back(fs::file_size(s, ec));
      if (ec) fail(s, "cannot stat shard: " + ec.message());
      have += grp.sizes.back();
    }
    if (have != grp.nbytes) {
      const std::string where = "weightsManifest[" + std::to_string(g) + "]";
      fail(grp.shards.empty() ? model_json : grp.shards.back(),
           std::string(have < grp.nbytes ? "truncated" : "too long") + ": the weights of " + where +
               " need " + std::to_string(grp.nbytes) + " bytes but its " +
               std::to_string(grp.shards.size()) +
               (grp.shards.size() == 1 ? " shard holds " : " shards hold ") + std::to_string(have));
    }
  }

  // Data in manifest order: the shards of each group are read through once.
  std::vector<TensorInfo> infos;
  for (const auto& w : m.weights)
    infos.push_back({w.name, w.dtype, w.dtype == "float32" ? DType::f32 : DType::i32, w.shape});
  std::size_t group = 0, shard = 0;
  std::ifstream in;
  std::uint64_t left = 0;  // bytes still unread in the open shard
  auto next_shard = [&] {
    while (group < m.groups.size() && shard >= m.groups[group].shards.size()) ++group, shard = 0;
    if (group >= m.groups.size()) fail(model_json, "the shards hold fewer bytes than the weights need");
    const std::string& s = m.groups[group].shards[shard];
    in.close();
    in.open(s, std::ios::binary);
    if (!in) fail(s, "cannot open shard: " + errno_text(errno));
    left = m.groups[group].sizes[shard++];
  };
  save_safetensors_streamed(
      out_safetensors, infos,
      [&](std::size_t, std::span<std::byte> bytes) {
        std::size_t done = 0;
        while (done < bytes.size()) {
          if (left == 0) next_shard();
          const auto k = static_cast<std::streamsize>(std::min<std::uint64_t>(left, bytes.size() - done));
          if (!in.read(reinterpret_cast<char*>(bytes.data() + done), k))
            fail(m.groups[group].shards[shard - 1], "short read (was the shard changed while converting?)");
          done += static_cast<std::size_t>(k);
          left -= static_cast<std::uint64_t>(k);
        }
      },
      {{"format", "pt"}, {"source", "tfjs"}});
  return m.weights;
}

}  // namespace ymlopt::io
