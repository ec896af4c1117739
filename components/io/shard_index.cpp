#include "io/shard_index.hpp"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/tensor_file.hpp"
#include "ymlopt/parse_position.hpp"

namespace ymlopt::io {

namespace fs = std::filesystem;

bool is_shard_index(std::string_view path) {
  constexpr std::string_view suffix = ".index.json";
  return path.size() > suffix.size() && path.substr(path.size() - suffix.size()) == suffix;
}

ShardIndex read_shard_index(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_shard_index(path, ss.str());
}

ShardIndex parse_shard_index(const std::string& path, std::string_view text) {
  auto fail = [&](const std::string& why) -> IoError { return IoError(path + ": " + why); };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw fail(line_column(text, e.byte ? e.byte - 1 : 0) + ": not valid JSON");
  } catch (const nlohmann::json::exception& e) {  // a number out of range
    throw fail(std::string("not valid JSON: ") + json_reason(e));
  }
  if (!j.is_object()) throw fail("a shard index is a JSON object");
  const auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) throw fail("no \"weight_map\" object (tensor name -> shard file)");
  if (wm->empty()) throw fail("\"weight_map\" names no tensor");
  ShardIndex ix;
  ix.path = path;
  const fs::path dir = fs::path(path).parent_path();
  std::set<std::string> shards;
  for (const auto& [name, file] : wm->items()) {
    if (!file.is_string()) throw fail("\"weight_map\": '" + name + "' maps to " + file.type_name() + ", not a file name");
    const std::string f = file.get<std::string>();
    const fs::path fp(f);
    bool leaves = f.empty() || fp.is_absolute();
    for (const auto& part : fp) leaves = leaves || part == "..";
    if (leaves) throw fail("\"weight_map\": '" + name + "' maps to '" + f + "', which is not a file in the index's folder");
    const std::string shard = (dir / fp).string();
    ix.shard_of.emplace(name, shard);
    shards.insert(shard);
  }
  ix.shards.assign(shards.begin(), shards.end());
  return ix;
}

}  // namespace ymlopt::io
