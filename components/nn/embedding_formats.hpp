// The table representations nn.embedding accepts beside dense float tables, and
// the gather y[i, :] = dequant(table)[ids[i], :] for each. A compressed table is
// laid out exactly as a quantized nn.linear weight W [n, k] with n = vocab and
// k = d (quant::QWeight: rows are tokens, scale groups run along d), so a tied
// table (GPT-2's wte, read by the embedding and by the lm_head linear with
// transpose_w=true) is one set of codes for both readers:
//
//   format  ports                                                  gather
//   dense   table f32|f64|f16|bf16 [vocab, d]                      row copy, y has the table's dtype
//   bf16    table bf16 [vocab, d]                                  rows widened to f32 y (quant.bf16)
//   int8    table i8 [vocab, d], table_scale f32|f16 [vocab] or    quant::dequantize of the requested
//           [vocab, d/group], table_zero f32|f16 (asymmetric)      rows only, y f32
//   int4    table i8 [vocab, d/2] (two codes per byte, element 2j  same
//           in the low nibble), table_scale, table_zero
//
// Hot rows (either format, quant.embedding hot_rows=H): the first H rows, the
// pieces a tokenizer that numbers them by frequency gives most often, are held
// apart in int8: table_hot i8 [H, d] with one scale per row in table_hot_scale
// f32|f16 [H]; table, table_scale and table_zero then hold rows H..vocab-1 only
// (vocab = H + table rows), and id v >= H reads their row v - H.
//
//   <task component="nn.embedding">
//     <in port="ids" data="ids"/><in port="table" data="E.q"/><in port="table_scale" data="E.scale"/>
//     <out port="y" data="x0"/><arg name="format" value="int4"/><arg name="group" value="64"/>
//   </task>
#pragma once
#include <ymlopt/sdk.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ymlopt::nn {

/// nn.embedding's port indices.
enum EmbeddingPort : std::size_t {
  kEmbIds,
  kEmbTable,
  kEmbY,
  kEmbScale,
  kEmbZero,
  kEmbHot,
  kEmbHotScale,
  kNumEmbeddingPorts
};

/// The companion tensors of a compressed table (roles "<key>.<role>" in the weights
/// file, DataDecl::companions) and the ports that read them: codes and scales, zero
/// points, and the int8 hot rows (quant.embedding hot_rows).
///   for (const auto& [role, port] : table_companion_ports()) ...  // {"w", "table"}, ...
inline const std::vector<std::pair<std::string, std::string>>& table_companion_ports() {
  static const std::vector<std::pair<std::string, std::string>> r = {{"w", "table"},
                                                                      {"w_scale", "table_scale"},
                                                                      {"w_zero", "table_zero"},
                                                                      {"w_hot", "table_hot"},
                                                                      {"w_hot_scale", "table_hot_scale"}};
  return r;
}

/// "" when the ports describe a compressed table of format "int8" or "int4" (arg
/// `group`), with or without int8 hot rows, gathered into y [tokens, d] f32; d is y's width.
///   check_compressed_table(specs, ports, args, 4)  // "port 'table_scale' is not bound: format=int4 needs it"
std::string check_compressed_table(const std::vector<PortSpec>& specs, std::span<const TensorView> p, const Args& a,
                                   int bits);

/// Bytes of one compressed table row (codes, scales, zeros): what a gather reads per id
/// (a hot row's when there are hot rows: the ids read most).
double compressed_row_bytes(std::span<const TensorView> p);

/// y[i, :] = dequant(table)[ids[i], :] for the n ids (ids[i] read at id(i)), dequantizing only
/// the rows requested. Throws KernelError naming the position of an id outside [0, vocab).
///   gather_compressed(ports, args, 8, ids, n, icols);
void gather_compressed(std::span<const TensorView> p, const Args& a, int bits, const std::int32_t* ids,
                       std::int64_t n, std::int64_t ids_ld, std::int64_t ids_cols);

}  // namespace ymlopt::nn
