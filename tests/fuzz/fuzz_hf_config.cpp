// libFuzzer target: any bytes as a Hugging Face checkpoint's config.json, as
// its model.safetensors.index.json and as its generation_config.json (the end
// tokens `ymlopt generate` reads). Each parse must end with its result or its
// error (ModelCheckpointError / IoError); a config that parses is then checked
// against the tensors of a tiny checkpoint of its architecture, as
// `ymlopt model info DIR` does: never a crash, a sanitizer report, a hang or
// an allocation sized by the input. Built and replayed like fuzz_workflow.cpp:
//
//   build-fuzz/bin/ymlopt_fuzz_hf_config -max_total_time=600 /tmp/hcorpus tests/fuzz/corpus_hf_config
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/shard_index.hpp"
#include "io/tensor_file.hpp"
#include "model_checkpoint.hpp"
#include "model_zoo.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    (void)ymlopt::io::parse_shard_index("fuzz/model.safetensors.index.json", text);
  } catch (const ymlopt::io::IoError&) {
  }
  try {
    (void)ymlopt::eos_token_ids("fuzz/generation_config.json", text);
  } catch (const ymlopt::ModelCheckpointError&) {
  }
  ymlopt::ModelCheckpoint c;
  c.path = c.weights = "fuzz";
  c.config = "fuzz/config.json";
  try {
    ymlopt::apply_config(c.config, text, c);
    // the tensors of the tiny preset of that architecture, under a prefix
    for (const auto& w : ymlopt::weight_specs(ymlopt::arch_preset(c.shape.arch, "tiny")))
      c.tensors.push_back({"m." + w.name, "F32", ymlopt::DType::f32, w.shape});
    ymlopt::complete_checkpoint(c);
  } catch (const ymlopt::ModelCheckpointError&) {
  }
  return 0;
}
