// Test plugin: test.throw, whose kernel always throws a KernelError. Used to
// check that a failing plugin kernel cancels the run cleanly (exit 1, task,
// component and XML line in the message, a report.json with status "failed").
#include <ymlopt/sdk.hpp>

namespace {

void throw_cpu(ymlopt::KernelContext&) { throw ymlopt::KernelError("deliberate failure"); }

}  // namespace

YMLOPT_PLUGIN(reg) {
  ymlopt::ComponentSpec s;
  s.name = "test.throw";
  s.doc = "always fails with KernelError(\"deliberate failure\") (test plugin)";
  s.ports = {{"x", ymlopt::Access::read_write, {}, false, 8, "any tensor (not touched)"}};
  s.cpu = throw_cpu;
  s.check = [](const ymlopt::TaskShape& t) -> std::string {
    return t.ports.size() == 1 && t.ports[0].bound() ? "" : "port 'x' is not bound";
  };
  s.cost = [](const ymlopt::TaskShape&) { return ymlopt::Cost{}; };
  reg.add(std::move(s));
}
