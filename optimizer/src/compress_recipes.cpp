// The compression search's recipe menu and strategies, the moves between
// recipes (next, lateral, crossover) and the Pareto front of measured points.
#include "ymlopt/optimizer/compress_search.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace ymlopt::opt {

const std::vector<Recipe>& recipes() {
  static const std::vector<Recipe> r = {
      {"f32", "", 32, false},
      {"nm24", "prune.nm,sparse.nm24", 18, false},  // 2:4, stored as the kept values + 2-bit positions
      {"int8", "quant.int8", 8, false},
      // group scales (and zero points) stored in f16, as llama.cpp's: no quality lost on
      // USE-lite (BENCHMARKS, "f16 group scales"), 1 bit per weight less in groups of 32
      {"int4-g128", "quant.group:bits=4:group=128:scale_dtype=f16", 4.125, false},
      {"gptq-int4-g128", "quant.gptq:bits=4:group=128:scale_dtype=f16", 4.125, false},
      {"obs50-int4-g128", "prune.obs:sparsity=0.5,quant.group:bits=4:group=128:scale_dtype=f16", 4.125, false},
      {"gptq-int8", "quant.gptq:bits=8:group=0", 8, false},  // per output channel, like int8
      // embedding tables: per-row symmetric int8; 4-bit codes with an f16 scale and zero per 32
      {"emb-int8", "quant.embedding:bits=8", 8, true},
      {"emb-int4-g32a", "quant.embedding:bits=4:group=32:symmetric=false:scale_dtype=f16", 5, true},
      // the same with the first quarter / eighth / half of the ids (the frequent pieces of a
      // tokenizer that numbers them by frequency) in int8: 5.75 / 5.4 / 6.5 bits, a third to
      // two thirds of the 4-bit table's error on USE-lite (BENCHMARKS, "hot rows"); recipes
      // are appended, never reordered: configurations hold their indices
      {"emb-int4-g32a-hot25", "quant.embedding:bits=4:group=32:symmetric=false:scale_dtype=f16:hot_fraction=0.25",
       5.75, true},
      {"emb-int4-g32a-hot12", "quant.embedding:bits=4:group=32:symmetric=false:scale_dtype=f16:hot_fraction=0.125",
       5.375, true},
      {"emb-int4-g32a-hot50", "quant.embedding:bits=4:group=32:symmetric=false:scale_dtype=f16:hot_fraction=0.5",
       6.5, true},
  };
  return r;
}

const std::vector<Strategy>& strategies() {
  // each family holds the table recipe its single strategy would use too
  static const std::vector<Strategy> s = {
      {"int8", {2, 7}},
      {"nm24-int8", {1, 2, 7}},
      {"int4-g128", {3, 11, 9, 10, 8}},
      {"gptq", {6, 4, 7, 11, 9, 10, 8}},  // GPTQ per channel int8, then int4 in groups of 128
      {"obs50-int4", {5, 11, 9, 10, 8}},
  };
  return s;
}

const Strategy* find_strategy(const std::string& name) {
  const auto& all = strategies();
  for (const auto& s : all)
    if (s.name == name) return &s;
  if (!name.empty() && name.size() < 4 && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
      std::size_t(std::stoi(name)) < all.size())
    return &all[std::size_t(std::stoi(name))];
  return nullptr;
}

std::string strategy_names() {
  std::string out;
  for (std::size_t i = 0; i < strategies().size(); ++i) {
    if (!out.empty()) out += ", ";
    out += std::to_string(i);
    out += ' ';
    out += strategies()[i].name;
  }
  return out;
}

std::int32_t next_recipe(const Strategy& s, std::int32_t current, bool table) {
  const auto& menu = recipes();
  if (current < 0 || std::size_t(current) >= menu.size()) return -1;
  const double bits = menu[std::size_t(current)].bits;
  std::int32_t best = -1;
  for (std::int32_t r : s.family)
    if (menu[std::size_t(r)].table == table && menu[std::size_t(r)].bits < bits &&
        (best < 0 || menu[std::size_t(r)].bits > menu[std::size_t(best)].bits))
      best = r;
  return best;
}

std::int32_t lateral_recipe(const Strategy& s, std::int32_t current, bool table, std::int32_t after) {
  const auto& menu = recipes();
  if (current <= 0 || std::size_t(current) >= menu.size()) return -1;
  bool past = after < 0;
  for (std::int32_t r : s.family) {
    if (!past) {
      past = r == after;
      continue;
    }
    if (r != current && menu[std::size_t(r)].table == table && menu[std::size_t(r)].bits == menu[std::size_t(current)].bits)
      return r;
  }
  return -1;
}

std::int32_t crossover_recipe(std::int32_t current, std::int32_t gathered, bool table,
                              const std::function<bool(std::int32_t)>& rejected) {
  const auto& menu = recipes();
  if (gathered < 0 || std::size_t(gathered) >= menu.size() || current < 0 || std::size_t(current) >= menu.size())
    return -1;
  const Recipe& g = menu[std::size_t(gathered)];
  const double own_bits = menu[std::size_t(current)].bits;  // 0, f32, serves both kinds
  if (gathered == current || g.bits >= own_bits || g.table != table) return -1;
  if (!rejected(gathered)) return gathered;
  // the gathered recipe broke the bound here: the next one up the ladder of a family
  // that holds it (gptq-int4-g128 -> gptq-int8), still below this unit's bits
  std::int32_t up = -1;
  for (const Strategy& st : strategies()) {
    if (std::find(st.family.begin(), st.family.end(), gathered) == st.family.end()) continue;
    for (std::int32_t r : st.family) {
      const Recipe& c = menu[std::size_t(r)];
      if (c.table != g.table || c.bits <= g.bits || c.bits >= own_bits || rejected(r)) continue;
      if (up < 0 || c.bits < menu[std::size_t(up)].bits) up = r;
    }
  }
  return up;
}

std::vector<SearchPoint> pareto_front(const std::vector<SearchPoint>& pts, bool time) {
  std::vector<SearchPoint> front;
  for (std::size_t a = 0; a < pts.size(); ++a) {
    bool dominated = false;
    for (std::size_t b = 0; b < pts.size() && !dominated; ++b) {
      if (a == b) continue;
      const SearchPoint &x = pts[b], &y = pts[a];
      const bool le = x.bytes <= y.bytes && x.error <= y.error && (!time || x.predicted_s <= y.predicted_s);
      const bool lt = x.bytes < y.bytes || x.error < y.error || (time && x.predicted_s < y.predicted_s);
      // of two equal points keep the first
      dominated = le && (lt || b < a);
    }
    if (!dominated) front.push_back(pts[a]);
  }
  std::sort(front.begin(), front.end(), [](const SearchPoint& x, const SearchPoint& y) { return x.bytes < y.bytes; });
  return front;
}

}  // namespace ymlopt::opt
