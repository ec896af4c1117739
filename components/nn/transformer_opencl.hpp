// OpenCL kernels of nn.gelu, nn.silu, nn.softmax, nn.layernorm, nn.rmsnorm,
// nn.swiglu, nn.rope, nn.embedding (transformer_opencl.cpp) and nn.attention
// (transformer_attention_opencl.cpp); built with OpenCL only
// (YMLOPT_HAVE_OPENCL). Ports are cl_mem buffers at ctx.opencl_offset(i),
// rows strided by their ld; kernels are enqueued on ctx.opencl_queue() and not
// waited for, except nn.embedding's, which reads back whether an id was out of
// range. Each *_opencl_check says which tasks the kernel handles (f32 math;
// the others run on a CPU); each kernel validates like the CPU kernel and
// checks its *_opencl_check before any OpenCL call.
//
//   ComponentSpec s = ...;  s.opencl = transformer::rope_opencl;  s.opencl_check = transformer::rope_opencl_check;
#pragma once
#include <ymlopt/sdk.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "opencl/opencl.hpp"

namespace ymlopt::nn::opencl {

/// nn.gelu, nn.silu and nn.softmax, called by nn.cpp once it validated the
/// task; unary_check: "" for f32 x and y.
std::string unary_check(const TaskShape& t);
void gelu(KernelContext& ctx);
void silu(KernelContext& ctx);
void softmax(KernelContext& ctx);

// ---- what the kernels of both files share (transformer_opencl.cpp)

using ymlopt::opencl::Operand;
using ymlopt::opencl::operand;
inline cl_command_queue queue_of(const KernelContext& ctx) { return ymlopt::opencl::task_queue(ctx); }

/// Validates like the CPU kernel (check), then the OpenCL kernel's opencl_check; throws KernelError.
void validate(KernelContext& ctx, const std::vector<PortSpec>& ports, std::string (*check)(const TaskShape&),
              std::string (*opencl_check)(const TaskShape&));

/// "" when t has n_ports ports and every bound one is f32, else why the OpenCL kernel refuses it.
std::string f32_ports(const TaskShape& t, std::size_t n_ports);

/// The largest power of two <= want that the kernel can run as a work-group on q's device.
std::size_t group_size(const ymlopt::opencl::Kernel& k, cl_command_queue q, std::size_t want);

/// Enqueues k on `dims` (<= 3) dimensions: global[d] (> 0) rounded up to a
/// multiple of local[d] (the kernel skips what lies outside); *ev: its event.
void enqueue(cl_command_queue q, const ymlopt::opencl::Kernel& k, cl_uint dims, const std::size_t* global,
             const std::size_t* local, cl_event* ev = nullptr);

}  // namespace ymlopt::nn::opencl

namespace ymlopt::transformer {

std::string layernorm_opencl_check(const TaskShape& t);
void layernorm_opencl(KernelContext& ctx);
std::string rmsnorm_opencl_check(const TaskShape& t);
void rmsnorm_opencl(KernelContext& ctx);
std::string swiglu_opencl_check(const TaskShape& t);
void swiglu_opencl(KernelContext& ctx);
/// f32, positions (row % seq + offset) below 2^24.
std::string rope_opencl_check(const TaskShape& t);
void rope_opencl(KernelContext& ctx);
/// format dense only (any table dtype: rows are copied bit for bit). An id
/// outside [0, vocab) throws the CPU kernel's KernelError (the first such
/// position); the kernel then waits for the queue to read that back.
std::string embedding_opencl_check(const TaskShape& t);
void embedding_opencl(KernelContext& ctx);
/// The largest head dimension the OpenCL nn.attention handles.
inline constexpr std::int64_t kOpenclAttentionMaxHeadDim = 256;
/// f32, head dims up to kOpenclAttentionMaxHeadDim.
std::string attention_opencl_check(const TaskShape& t);
void attention_opencl(KernelContext& ctx);

}  // namespace ymlopt::transformer
