// io.* components: save a tensor to / load a tensor from a .safetensors or
// .npy file (format from the extension; relative paths resolve against the
// run directory). Both run on the host, in submission order.
//
//   <task component="io.save"><in port="x" data="C"/><arg name="path" value="c.safetensors"/></task>
//   <task component="io.load"><out port="y" data="W"/><arg name="path" value="/data/w.npy"/></task>
#pragma once

#include <ymlopt/sdk.hpp>

namespace ymlopt {
/// Registers io.save and io.load.
void register_io(Registry& reg);
}  // namespace ymlopt
