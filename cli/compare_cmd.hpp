#pragma once
#include <string>
#include <vector>

namespace ymlopt {
/// `ymlopt compare DIR... [-o OUT_PREFIX]`: reads the report.json of several
/// `ymlopt optimize` runs and writes them side by side: OUT_PREFIX.md (a table:
/// weight bytes, peak memory, time, flops, quality, each with its ratio to the
/// original), OUT_PREFIX.svg (relative error vs weight-bytes ratio, coloured by
/// time ratio, with the Pareto front) and OUT_PREFIX.json (the merged rows).
///
///   ymlopt optimize gpt2.xml --set ... --passes quant.int8 --eval -o runs/int8
///   ymlopt optimize gpt2.xml --set ... --passes prune.nm --eval -o runs/nm
///   ymlopt compare runs/int8 runs/nm -o runs/compare   # runs/compare.{md,svg,json}
///
/// Returns 0, 1 (a missing or malformed report, named in the message) or throws
/// UsageError (exit 2).
int cmd_compare(const std::vector<std::string>& args);
}  // namespace ymlopt
