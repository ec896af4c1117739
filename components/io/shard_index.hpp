// Sharded safetensors checkpoints (Hugging Face): MODEL.safetensors.index.json
// names the shard file that holds each tensor.
//
//   ShardIndex ix = read_shard_index("llama/model.safetensors.index.json");
//   const std::string& file = ix.shard_of.at("model.norm.weight");  // llama/model-00002-of-00002.safetensors
//
// A workflow's src= may name the index: the compiler reads key= from its shard.
#pragma once

#include <exception>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ymlopt::io {

struct ShardIndex {
  std::string path;                               // the index file
  std::map<std::string, std::string> shard_of;    // tensor name -> shard path (joined with the index's folder)
  std::vector<std::string> shards;                // the distinct shard paths, in file-name order
};

/// True when `path` names a shard index (it ends with ".index.json").
bool is_shard_index(std::string_view path);

/// Reads an index: a JSON object whose "weight_map" maps tensor names to shard
/// file names in the index's folder. Throws IoError("PATH: reason"), with the
/// line and column of a JSON syntax error; a shard name that leaves the folder
/// (absolute, or with "..") is refused. The shards themselves are not opened.
ShardIndex read_shard_index(const std::string& path);
/// The same from the file's text (`path` names it in errors and locates the shards).
ShardIndex parse_shard_index(const std::string& path, std::string_view text);

}  // namespace ymlopt::io
