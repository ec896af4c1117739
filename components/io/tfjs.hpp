// TF.js graph models (model.json + binary weight shards) -> safetensors.
//
//   ymlopt::io::convert_tfjs("dist/model.json", "use_lite.safetensors");
//   for (const auto& n : ymlopt::io::list_tfjs_nodes("dist/model.json")) ...
//
// model.json's "weightsManifest" is a list of groups, each with "paths" (shard
// files, relative to model.json's folder) and "weights" ({name, shape, dtype});
// a group's weights are stored raw, little-endian and back to back across the
// concatenation of its shards, in manifest order. Only float32 and int32
// weights are accepted; quantized weights ("quantization" entries) are refused.
// Every error is an IoError whose message starts with the file concerned:
// "PATH: reason".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/tensor_file.hpp"

namespace ymlopt::io {

/// One weight of a TF.js weightsManifest.
struct TfjsWeight {
  std::string name;
  std::string dtype;                // "float32" or "int32"
  std::vector<std::int64_t> shape;  // empty for a scalar
  std::size_t group = 0;            // index of its group in weightsManifest
  std::uint64_t offset = 0;         // byte offset within the group's concatenated shards
  std::uint64_t nbytes = 0;
};

/// One node of modelTopology.node.
struct TfjsNode {
  std::string name;
  std::string op;                   // "Const", "Placeholder", "MatMul", ...
  std::vector<std::string> inputs;  // as written ("name", "name:1", "^control")
  std::string attr_json;            // the node's "attr" object as compact JSON ("{}" if none)
};

/// The weights of model.json's weightsManifest, in manifest order (validated:
/// dtypes, shapes, unique names, no quantization); shards are not read.
std::vector<TfjsWeight> read_tfjs_manifest(const std::string& model_json);

/// The nodes of model.json's modelTopology.node, in file order.
std::vector<TfjsNode> list_tfjs_nodes(const std::string& model_json);

/// Converts a TF.js graph model's weights into one safetensors file (tensor
/// names from the manifest, dtypes F32/I32, scalars of shape [], metadata
/// {"format": "pt", "source": "tfjs"}), written atomically. The shards of each
/// group must hold exactly the bytes its weights need; otherwise the IoError
/// names the group's last shard and both byte counts. Returns the manifest.
std::vector<TfjsWeight> convert_tfjs(const std::string& model_json,
                                     const std::string& out_safetensors);

}  // namespace ymlopt::io
