// The instruction sets the op kernels are built for, chosen at run time
// (Isa::best: the widest this CPU has; a forced one the CPU lacks is a KernelError).
#pragma once

namespace ymlopt::op {

enum class Isa { best, scalar, avx2, avx512 };

bool cpu_has_avx2();
bool cpu_has_avx512();
/// "AVX-512", "AVX2" or "scalar": what Isa::best runs here.
const char* best_isa_name();
/// isa itself, or for Isa::best the widest this CPU has; throws KernelError
/// naming `who` for a forced ISA the CPU lacks.
Isa resolve_isa(Isa isa, const char* who);

}  // namespace ymlopt::op
