#pragma once
#include <string>
#include <vector>

namespace ymlopt {
/// `ymlopt optimize MODEL.xml (--passes LIST | --sequence SEQ.xml) [-o DIR] [--eval]`:
/// compresses a model workflow's weights and rewrites it; with --eval, runs the
/// original and the result and reports bytes, memory, time and output quality.
int cmd_optimize(const std::vector<std::string>& args);
}  // namespace ymlopt
