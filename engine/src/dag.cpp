// The Dag's methods and the IR helpers of ir.hpp, apart from the compiler: the
// analyses, the scheduler and the backends use them on a compiled DAG.
#include "ymlopt/engine/ir.hpp"

#include <exception>

namespace ymlopt {

Shape Dag::ref_shape(const DataRef& r) const {
  const DataDecl& d = data[size_t(r.data)];
  if (r.tile < 0) return d.shape;
  const std::int64_t tr = r.tile / d.ntile_c, tc = r.tile % d.ntile_c;
  if (d.shape.size() == 1) return {d.tile_ncols(tc)};
  return {d.tile_nrows(tr), d.tile_ncols(tc)};
}

std::string Dag::ref_name(const DataRef& r) const {
  const DataDecl& d = data[size_t(r.data)];
  if (r.tile < 0) return d.name;
  const std::int64_t tr = r.tile / d.ntile_c, tc = r.tile % d.ntile_c;
  if (d.shape.size() == 1) return d.name + "[" + std::to_string(tc) + "]";
  return d.name + "[" + std::to_string(tr) + "," + std::to_string(tc) + "]";
}

TensorView Dag::ref_view(const DataRef& r) const {
  const DataDecl& d = data[size_t(r.data)];
  TensorView v;
  v.dtype = d.dtype;
  v.shape = ref_shape(r);
  if (r.tile < 0) v.rows = d.rows, v.cols = d.cols;
  else v.rows = d.tile_nrows(r.tile / d.ntile_c), v.cols = d.tile_ncols(r.tile % d.ntile_c);
  v.ld = v.cols;
  return v;
}

std::string Dag::task_error(const TaskNode& t) const {
  return (t.loc.file ? *t.loc.file : file) + ":" + std::to_string(t.loc.line) + ":" + std::to_string(t.loc.col) +
         ": error: task " + (t.label.empty() ? t.comp->name + " #" + std::to_string(t.id) : "'" + t.label + "'");
}

std::vector<TensorView> Dag::shape_views(const std::vector<Binding>& binds) const {
  std::vector<TensorView> views(binds.size());
  for (size_t k = 0; k < binds.size(); ++k)
    if (binds[k].ref.data >= 0) views[k] = ref_view(binds[k].ref);
  return views;
}

Cost Dag::task_cost(const TaskNode& t) const { return task_cost(t, shape_views(t.bindings)); }

Cost Dag::task_cost(const TaskNode& t, const std::vector<TensorView>& views) const {
  Cost c;
  if (t.comp->cost) {
    try {
      c = t.comp->cost(TaskShape{views, t.args});
    } catch (const std::exception&) {
    }
  } else {
    for (const auto& v : views) c.bytes += double(v.rows * v.cols) * double(dtype_size(v.dtype));
  }
  return c;
}

std::size_t Dag::num_edges() const {
  std::size_t n = 0;
  for (const auto& t : tasks) n += t.preds.size();
  return n;
}

std::int64_t padded_ld(std::int64_t rows, std::int64_t cols, DType t) {
  const std::int64_t es = std::int64_t(dtype_size(t));
  if (rows > 1 && (cols * es) % 4096 == 0) return cols + 64 / es;
  return cols;
}

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);
  }
  return out + "]";
}

}  // namespace ymlopt

namespace ymlopt {

const char* where_name(Where w) {
  switch (w) {
    case Where::cpu: return "cpu";
    case Where::opencl: return "opencl";
    case Where::cuda: return "cuda";
    case Where::any: break;
  }
  return "any";
}

bool parse_where(std::string_view s, Where& out) {
  for (Where w : {Where::any, Where::cpu, Where::opencl, Where::cuda})
    if (s == where_name(w)) {
      out = w;
      return true;
    }
  return false;
}

std::string where_refusal(const ComponentSpec& c, Where w, const TaskShape& t) {
  if (w == Where::any || w == Where::cpu) return "";
  const bool cl = w == Where::opencl;
  if (c.host_only) return c.name + " runs on the host only";
  if (!(cl ? c.opencl : c.cuda))
    return c.name + " has no " + (cl ? "OpenCL" : "CUDA") + " kernel in this build";
  const auto& check = cl ? c.opencl_check : c.cuda_check;
  if (!check) return "";
  try {
    std::string why = check(t);
    return why.empty() ? why : "its " + std::string(cl ? "OpenCL" : "CUDA") + " kernel does not handle it: " + why;
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace ymlopt
