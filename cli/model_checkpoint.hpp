// A model checkpoint as the Hugging Face hub ships it: a folder with
// config.json and model.safetensors (or shards named by
// model.safetensors.index.json), or a lone safetensors file. It gives the
// model workflows their parameters (`ymlopt run WF --model DIR`) and
// `ymlopt model info PATH` its description.
//
//   ModelCheckpoint c = read_checkpoint("gpt2/");          // config.json + model.safetensors
//   for (auto& [name, value] : c.params) ...          // weights=, prefix=, layers=, width=, ...
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "io/tensor_file.hpp"
#include "model_zoo.hpp"

namespace ymlopt {

/// A checkpoint that cannot be read or contradicts itself; what() starts with the path.
struct ModelCheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ModelCheckpoint {
  std::string path;                  // as given
  std::string config;                // config.json, "" when there is none
  std::string weights;               // what a workflow's `weights` takes: the file, or the shard index
  std::vector<std::string> files;    // the weight files
  std::string model_type;            // config.json's, else the architecture the tensor names show
  ArchConfig shape;                  // arch: gpt2 | bert | llama; 0 where undetermined
  std::string prefix;                // before the architecture's tensor names: "transformer.", "bert.", ""
  std::optional<double> eps;         // the norms' epsilon
  std::optional<double> rope_theta;  // llama
  std::int64_t window = 0;           // llama (Mistral): a sliding window of keys; 0: none
  bool tied = false;                 // the LM head reads the token embedding table
  std::vector<std::string> undetermined;  // shape parameters neither config.json nor the tensors fix
  std::vector<io::TensorInfo> tensors;    // of every weight file
  std::map<std::string, std::string> metadata;  // the (first) weight file's __metadata__
  std::map<std::string, std::int64_t> bytes_by_dtype;  // stored dtype name -> bytes
  std::int64_t parameters = 0;            // elements of every tensor
  std::set<std::string> dense_dtypes;     // stored dtypes of the architecture's dense weights ("F32", "BF16")
  /// Workflow parameters, in this order: weights, prefix, the shapes, eps,
  /// rope_theta, window (when there is one), lm_head_key (tied llama).
  std::vector<std::pair<std::string, std::string>> params;
};

/// Reads PATH (a folder or a .safetensors / .index.json file): the weight
/// files' headers and config.json, never the tensor data. Throws
/// ModelCheckpointError: no weights, a config that contradicts the tensors (naming
/// both), an architecture or option the model workflows do not compute.
ModelCheckpoint read_checkpoint(const std::string& path);

/// Fills c's model_type, shape, eps, rope_theta and tied from config.json's
/// text (HF names: n_embd / hidden_size, num_key_value_heads, ...); throws
/// ModelCheckpointError("FILE: line L, column C: ...") on bad JSON or values.
void apply_config(const std::string& file, const std::string& text, ModelCheckpoint& c);

/// What read_checkpoint does once the headers and config.json are in c: the
/// tensor-name prefix, the shapes the tensors fix, the check of every tensor
/// against the shapes, and c.params. Throws ModelCheckpointError.
void complete_checkpoint(ModelCheckpoint& c);

/// Writes OUT_DIR/model.safetensors with every f16/bf16 tensor of `c` widened
/// to f32 (exactly; other dtypes as stored), tensor by tensor, and copies
/// config.json and the tokenizer files beside it: a folder the model
/// workflows (which compute in f32) read with --model. Returns the bytes written.
std::int64_t convert_checkpoint_to_f32(const ModelCheckpoint& c, const std::string& out_dir);

/// `prompt`'s ids under DIR/tokenizer.json (with the template's special
/// tokens), written to a scratch .npy that lasts until the process exits.
/// Throws (the tokenizer's errors; no tokens; more than `context` > 0).
struct PromptIds {
  std::string path;
  std::size_t count = 0;
};
PromptIds prompt_ids(const std::string& model_dir, const std::string& prompt, std::int64_t context);
/// `ids` written to a scratch .npy (i32 [n]) that lasts until the process exits.
PromptIds save_prompt_ids(const std::vector<std::int32_t>& ids);

/// The end tokens a generation_config.json or config.json names (eos_token_id:
/// an id or a list); nullopt when it names none. Throws ModelCheckpointError
/// ("FILE: line L, column C: ...") on bad JSON or a value that is no token id.
std::optional<std::vector<std::int64_t>> eos_token_ids(const std::string& file, const std::string& text);

/// The description `ymlopt model info PATH` prints.
std::string describe(const ModelCheckpoint& c);

}  // namespace ymlopt
