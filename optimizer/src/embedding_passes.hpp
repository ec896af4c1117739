// quant.embedding: the embedding tables (nn.embedding's `table`, and the nn.linear
// readers tied to it) quantized to int8 or int4 codes + scales by the registered
// quant.int8 / quant.group components. Internal to the optimizer: passes.cpp lists
// the pass in all_passes().
//
//   {quant_embedding_pass()}  // in the all_passes() table
//   ymlopt optimize model.xml --passes quant.embedding:bits=4:group=64,quant.int8
#pragma once
#include "ymlopt/optimizer/passes.hpp"

namespace ymlopt::opt {

/// The pass's table entry: name "quant.embedding", options bits (8 | 4), group
/// (0 | 32 | 64 | 128), symmetric (true | false), scale_dtype (f32 | f16), match (a
/// regex on table names).
PassInfo quant_embedding_pass();

/// The `scale_dtype` option of the quantizing passes (quant.group, quant.gptq,
/// quant.embedding): f32 (default) or f16, else a PassError naming the pass.
///   const DType sd = scale_dtype_option(spec);  // "quant.gptq:scale_dtype=f16" -> DType::f16
DType scale_dtype_option(const PassSpec& s);

}  // namespace ymlopt::opt
