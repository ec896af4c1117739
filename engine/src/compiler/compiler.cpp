// The driver: compile_workflow and Compiler::run, the phases in order.
#include "compiler.hpp"

#include "ymlopt/xml/yvetteml.hpp"

namespace ymlopt::compiler {

CompileResult Compiler::run(std::unique_ptr<xml::Document> doc) {
  CompileResult res;
  if (!doc) return res;
  if (doc->root.name == "application" && !translate_application(doc->root, diags_)) return res;  // YvetteML
  const xml::Document* root = doc.get();
  dag_.file = *doc->path;
  dag_.docs.push_back(std::move(doc));
  call_stack_.push_back(canonical_path(dag_.file));
  if (root->root.name != "workflow") {
    diags_.error(root->root.loc, "root element must be <workflow> (or a YML <application>), not <" + root->root.name + ">");
    return res;
  }
  dag_.name = attr_or(root->root, "name", fs::path(dag_.file).stem().string());
  if (const Attr* c = root->root.find("checkpoint")) {
    if (c->value == "tasks" || c->value == "none") dag_.checkpoint = c->value;
    else diags_.error(c->loc, "checkpoint must be 'tasks' or 'none', not '" + c->value + "'");
  }
  Frame f;
  f.doc = root;
  f.dir = fs::path(dag_.file).parent_path();
  frames_.push_back(std::move(f));
  check_attrs(root->root);
  declare_params(root->root, opts_.sets, true, {});
  if (res.usage_error = usage_error_; usage_error_) return res;
  push_context();
  body(root->root.children);
  pop_context();
  if (!dag_.regions.empty()) finish_regions();
  if (!diags_.has_errors()) finish_events();
  if (!diags_.has_errors()) order();
  res.ok = !diags_.has_errors();
  res.dag = std::move(dag_);
  return res;
}

}  // namespace ymlopt::compiler

namespace ymlopt {

CompileResult compile_workflow(const CompileOptions& opts, const ComponentRegistry& registry, Diagnostics& diags) {
  compiler::Compiler c(opts, registry, diags);
  return c.run(xml::parse_file(opts.file, diags));
}

CompileResult compile_workflow_text(const std::string& path, const std::string& text, const CompileOptions& opts,
                                    const ComponentRegistry& registry, Diagnostics& diags) {
  compiler::Compiler c(opts, registry, diags);
  return c.run(xml::parse_text(path, text, diags));
}

}  // namespace ymlopt
