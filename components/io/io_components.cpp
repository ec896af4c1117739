#include "io/io_components.hpp"

#include <filesystem>
#include <string>

#include "io/tensor_file.hpp"

namespace ymlopt {
namespace {

namespace fs = std::filesystem;

bool is_relative(const std::string& p) { return !fs::path(p).is_absolute(); }

std::string resolve(const std::string& run_dir, const std::string& p) {
  if (run_dir.empty() || !is_relative(p)) return p;
  return (fs::path(run_dir) / p).string();
}

std::string check_path(const TaskShape& t, bool saving) {
  const std::string& p = t.args.get_string("path");
  if (p.empty()) return "parameter 'path' is empty";
  const std::string ext = fs::path(p).extension().string();
  if (ext != ".safetensors" && ext != ".npy")
    return "unsupported file extension '" + ext + "' (expected .safetensors or .npy)";
  if (saving && ext == ".npy" && !t.ports.empty() && t.ports[0].dtype == DType::bf16)
    return "bf16 cannot be saved as .npy (use .safetensors)";
  return "";
}

Cost io_cost(const TaskShape& t) {
  Cost c;
  for (const auto& v : t.ports) c.bytes += double(v.size()) * double(dtype_size(v.dtype));
  return c;
}

void save_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.port(0);
  const std::string& arg = ctx.arg_string("path");
  const std::string path = resolve(ctx.run_dir(), arg);
  try {
    const io::FileFormat fmt = io::format_of(path);
    if (is_relative(arg)) {
      const fs::path parent = fs::path(path).parent_path();
      if (!parent.empty()) fs::create_directories(parent);
    }
    if (fmt == io::FileFormat::safetensors) {
      const std::string& key_arg = ctx.arg_string("key");
      io::save_safetensors(path, {{key_arg.empty() ? std::string(1, 'x') : key_arg, x}});
    } else {
      io::save_npy(path, x);
    }
  } catch (const io::IoError& e) {
    throw KernelError(e.what());
  } catch (const fs::filesystem_error& e) {
    throw KernelError(path + ": cannot create directory: " + e.code().message());
  }
}

void load_kernel(KernelContext& ctx) {
  const TensorView& y = ctx.port(0);
  const std::string path = resolve(ctx.run_dir(), ctx.arg_string("path"));
  try {
    io::load_tensor_into(path, ctx.arg_string("key"), y);
  } catch (const io::IoError& e) {
    throw KernelError(e.what());
  }
}

}  // namespace

void register_io(Registry& reg) {
  {
    ComponentSpec s;
    s.name = "io.save";
    s.doc = "Save x to a .safetensors (under `key`, default 'x') or .npy file; "
            "relative paths resolve against the run directory.";
    s.ports = {{"x", Access::read, {}, false, 8, "tensor to save (any dtype; bf16 needs .safetensors)"}};
    s.params = {{"path", ParamType::string_, "", true, "output file (.safetensors or .npy)"},
                {"key", ParamType::string_, "", false, "tensor name in a .safetensors file (default 'x')"}};
    s.cpu = save_kernel;
    s.check = [](const TaskShape& t) { return check_path(t, true); };
    s.cost = io_cost;
    s.host_only = true;
    reg.add(std::move(s));
  }
  {
    ComponentSpec s;
    s.name = "io.load";
    s.doc = "Load y from a .safetensors (tensor `key`; may be empty if the file holds one "
            "tensor) or .npy file; the stored dtype and shape must match y's.";
    s.ports = {{"y", Access::write, {}, false, 8, "destination (dtype and shape must match the file)"}};
    s.params = {{"path", ParamType::string_, "", true, "input file (.safetensors or .npy)"},
                {"key", ParamType::string_, "", false, "tensor name in a .safetensors file"}};
    s.cpu = load_kernel;
    s.check = [](const TaskShape& t) { return check_path(t, false); };
    s.cost = io_cost;
    s.host_only = true;
    reg.add(std::move(s));
  }
}

}  // namespace ymlopt
