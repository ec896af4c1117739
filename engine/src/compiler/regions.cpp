// Runtime control flow (Region): until/while, publish/gather, the tree of regions.
#include "compiler.hpp"

#include <algorithm>
#include <cctype>
#include <map>

namespace ymlopt::compiler {

std::int32_t Compiler::open_region(Region::Kind kind, const Element& e, std::string name) {
  Region r;
  r.kind = kind;
  r.loc = e.loc;
  r.name = std::move(name);
  r.first_task = std::int32_t(dag_.tasks.size());
  const auto idx = std::int32_t(dag_.regions.size());
  dag_.regions.push_back(std::move(r));
  region_children_.emplace_back();
  (region_stack_.empty() ? top_regions_ : region_children_[size_t(region_stack_.back())]).push_back(idx);
  region_stack_.push_back(idx);
  return idx;
}

// The items of tasks [first, end) around the sub-regions `children`.
std::vector<Region::Item> Compiler::items_of(std::int32_t first, std::int32_t end, const std::vector<std::int32_t>& children) const {
  std::vector<Region::Item> items;
  std::int32_t pos = first;
  for (auto c : children) {
    const Region& r = dag_.regions[size_t(c)];
    if (r.first_task > pos) items.push_back(Region::Item{-1, pos, r.first_task});
    items.push_back(Region::Item{c, 0, 0});
    pos = r.end_task;
  }
  if (end > pos) items.push_back(Region::Item{-1, pos, end});
  return items;
}

void Compiler::close_region(std::int32_t idx) {
  Region& r = dag_.regions[size_t(idx)];
  r.end_task = std::int32_t(dag_.tasks.size());
  r.items = items_of(r.first_task, r.end_task, region_children_[size_t(idx)]);
  region_stack_.pop_back();
}

// The workflow body as the root region, once any runtime construct appeared.
void Compiler::finish_regions() {
  Region root;
  root.kind = Region::Kind::body;
  root.loc = dag_.docs[0]->root.loc;
  root.name = dag_.name;
  root.end_task = std::int32_t(dag_.tasks.size());
  root.items = items_of(0, root.end_task, top_regions_);
  dag_.root_region = std::int32_t(dag_.regions.size());
  dag_.regions.push_back(std::move(root));
  for (const auto& [name, ch] : channels_)
    if (!ch.published)
      for (const auto& at : ch.gathers)
        diags_.error(at, "gather from channel '" + name + "' that no <publish name=\"" + name + "\"> writes");
}

bool Compiler::data_ready(std::int32_t d) const {
  const DataState& s = states_[size_t(d)];
  return s.init || s.uninit_tiles == 0;
}

// "a, b" -> whole tensors (tiles are not exchanged); nullopt after an error.
std::optional<std::vector<std::int32_t>> Compiler::data_list(const Attr& a) {
  auto text = render(a);
  if (!text) return std::nullopt;
  std::vector<std::int32_t> out;
  bool ok = true;
  size_t p = 0;
  while (p <= text->size()) {
    size_t q = text->find(',', p);
    if (q == std::string::npos) q = text->size();
    std::string tok = text->substr(p, q - p);
    tok.erase(0, tok.find_first_not_of(" \t"));
    tok.erase(tok.find_last_not_of(" \t") + 1);
    p = q + 1;
    if (tok.empty()) {
      diags_.error(a.loc, a.name + "=\"" + a.value + "\" has an empty item");
      ok = false;
      continue;
    }
    auto ref = resolve(tok, a);
    if (!ref) {
      ok = false;
      continue;
    }
    if (ref->tile >= 0) {
      diags_.error(a.loc, a.name + "=\"" + a.value + "\": '" + tok + "' is a tile; only whole tensors can be named here");
      ok = false;
      continue;
    }
    out.push_back(ref->data);
  }
  if (!ok) return std::nullopt;
  return out;
}

// One 1-element tensor (a score or a loop condition's operand).
std::optional<std::int32_t> Compiler::scalar_data(const Attr& a, const std::string& text) {
  auto ref = resolve(text, a);
  if (!ref) return std::nullopt;
  const DataDecl& d = dag_.data[size_t(ref->data)];
  if (ref->tile >= 0 || d.rows * d.cols != 1) {
    diags_.error(a.loc, a.name + "=\"" + a.value + "\": '" + text + "' must be a 1-element tensor, but it is " +
                            dtype_name(d.dtype) + shape_str(d.shape));
    return std::nullopt;
  }
  if (d.dtype != DType::f32 && d.dtype != DType::f64 && d.dtype != DType::i32) {
    diags_.error(a.loc, a.name + "=\"" + a.value + "\": '" + text + "' is " + dtype_name(d.dtype) +
                            "; a score or condition operand must be f32, f64 or i32");
    return std::nullopt;
  }
  return ref->data;
}

std::optional<bool> Compiler::better_attr(const Element& e, bool pareto_ok) {
  const Attr* b = e.find("better");
  if (!b) return false;
  auto v = render(*b);
  if (!v) return std::nullopt;
  if (*v == "min" || *v == "max") return *v == "max";
  diags_.error(b->loc, "better=\"" + *v + "\" must be min" + (pareto_ok ? ", max or pareto" : " or max"));
  return std::nullopt;
}

// YvetteML's word operators (le, gt, and, ...) as the expression language's.
std::string Compiler::c_operators(const std::string& text) {
  static const std::map<std::string, std::string> words = {{"eq", "=="}, {"neq", "!="}, {"gt", ">"},  {"ge", ">="},
                                                            {"lt", "<"},  {"le", "<="},  {"and", "&&"}, {"or", "||"},
                                                            {"not", "!"}};
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (std::isalpha(c) || c == '_') {
      size_t j = i;
      while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
      const std::string w = text.substr(i, j - i);
      const bool exponent = i > 0 && std::isdigit(static_cast<unsigned char>(text[i - 1])) && (w[0] == 'e' || w[0] == 'E');
      auto it = words.find(w);
      out += it != words.end() && !exponent ? " " + it->second + " " : w;
      i = j;
    } else {
      out += text[i++];
    }
  }
  return out;
}

void Compiler::runtime_loop(const Element& e) {
  const bool until = e.name == "until";
  const Attr* ca = e.find("cond");
  std::int64_t max_iter = 1000;
  if (const Attr* m = e.find("max")) {
    auto v = eval_int(*m);
    if (!v) return;
    if (*v < 1) {
      diags_.error(m->loc, "max=\"" + m->value + "\" must be at least 1");
      return;
    }
    max_iter = *v;
  }
  auto text = render(*ca);
  if (!text) return;
  const std::string expr = c_operators(*text);
  std::shared_ptr<const Template> t;
  try {
    t = Template::compile("${" + expr + "}");
  } catch (const ExprError& x) {
    diags_.error(ca->loc, "bad condition '" + *text + "': " + x.message);
    return;
  }
  // its names are 1-element tensors, read when the loop runs
  std::vector<std::int32_t> operands;
  bool ok = true;
  const Value zero = Value::of_float(0);
  try {
    (void)t->value([&](std::string_view n) -> const Value* {
      auto d = scalar_data(*ca, std::string(n));
      if (!d) {
        ok = false;
        return &zero;
      }
      if (std::find(operands.begin(), operands.end(), *d) == operands.end()) operands.push_back(*d);
      return &zero;
    });
  } catch (const ExprError& x) {
    diags_.error(ca->loc, "bad condition '" + *text + "': " + x.message);
    return;
  }
  if (!ok) return;
  if (!until)
    for (auto d : operands)
      if (!data_ready(d))
        diags_.error(ca->loc, "<while> tests '" + dag_.data[size_t(d)].name +
                                  "' before anything writes it (give it init= or write it before the loop)");
  const std::int32_t idx = open_region(until ? Region::Kind::until : Region::Kind::while_, e, "");
  dag_.regions[size_t(idx)].cond = expr;
  dag_.regions[size_t(idx)].cond_data = operands;
  dag_.regions[size_t(idx)].max_iter = max_iter;
  body(e.children);
  close_region(idx);
  if (until)
    for (auto d : operands)
      if (!data_ready(d))
        diags_.error(ca->loc, "<until> tests '" + dag_.data[size_t(d)].name + "', which nothing writes");
}

void Compiler::exchange(const Element& e) {
  const bool pub = e.name == "publish";
  auto channel = render(*e.find("name"));
  const Attr* da = e.find(pub ? "data" : "into");
  const Attr* sa = e.find("score");
  const Attr* ba = e.find("better");
  auto better = ba && !pub && ba->value == "pareto" ? std::optional<bool>(false) : better_attr(e, !pub);
  if (!channel || !better) return;
  const bool pareto = ba && !pub && ba->value == "pareto";
  auto list = data_list(*da);
  auto scores = data_list(*sa);
  if (!list || !scores) return;
  bool ok = true;
  for (auto d : *scores) {
    const DataDecl& sd = dag_.data[size_t(d)];
    if (sd.rows * sd.cols != 1 || (sd.dtype != DType::f32 && sd.dtype != DType::f64 && sd.dtype != DType::i32)) {
      diags_.error(sa->loc, "score=\"" + sa->value + "\": '" + sd.name + "' must be a 1-element f32, f64 or i32 tensor, but it is " +
                                dtype_name(sd.dtype) + shape_str(sd.shape));
      ok = false;
    }
  }
  if (pareto && scores->size() < 2) {
    diags_.error(sa->loc, "better=\"pareto\" needs several scores (score=\"a,b\"), got " + std::to_string(scores->size()));
    ok = false;
  }
  for (auto d : *list)
    if (!data_ready(d)) {
      diags_.error(da->loc, std::string(pub ? "<publish>" : "<gather>") + " of '" + dag_.data[size_t(d)].name +
                                "' before anything writes it (give it init= or write it first)");
      ok = false;
    }
  for (auto d : *scores)
    if (pub && !data_ready(d)) {
      diags_.error(sa->loc, "<publish> score '" + dag_.data[size_t(d)].name + "' is never written before");
      ok = false;
    }
  if (!ok) return;
  // every publish and gather of a channel exchanges the same tensors
  std::vector<std::pair<DType, std::vector<std::int64_t>>> sig;
  for (auto d : *list) sig.emplace_back(dag_.data[size_t(d)].dtype, dag_.data[size_t(d)].shape);
  auto [it, fresh] = channels_.try_emplace(*channel);
  if (!fresh && it->second.nscores != scores->size()) {
    diags_.error(sa->loc, "channel '" + *channel + "' is " + it->second.what + " with " +
                              std::to_string(it->second.nscores) + " score(s) at line " + std::to_string(it->second.loc.line) +
                              ", but " + std::to_string(scores->size()) + " here");
    return;
  }
  Channel& ch = it->second;
  if (fresh) {
    ch.tensors = sig;
    ch.nscores = scores->size();
    ch.loc = e.loc;
    ch.what = pub ? "published" : "gathered";
  } else if (ch.tensors != sig) {
    auto str = [](const std::vector<std::pair<DType, std::vector<std::int64_t>>>& v) {
      std::string o;
      for (const auto& [t, s] : v) o += (o.empty() ? "" : ", ") + std::string(dtype_name(t)) + shape_str(s);
      return o;
    };
    diags_.error(da->loc, "channel '" + *channel + "' is " + ch.what + " as (" + str(ch.tensors) + ") at line " +
                              std::to_string(ch.loc.line) + ", but " + (pub ? "published" : "gathered") + " here as (" +
                              str(sig) + ")");
    return;
  }
  if (pub) ch.published = true;
  else ch.gathers.push_back(e.loc);
  const std::int32_t idx = open_region(pub ? Region::Kind::publish : Region::Kind::gather, e, *channel);
  Region& r = dag_.regions[size_t(idx)];
  r.data = *list;
  r.scores = *scores;
  r.maximize = *better;
  r.pareto = pareto;
  close_region(idx);
}

}  // namespace ymlopt::compiler
