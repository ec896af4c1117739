#include "opencl/clblast.hpp"

#include <algorithm>
#include <cstdint>

namespace ymlopt::opencl {

std::string clblast_status_name(int status) {
  std::string name;
  switch (status) {
#define YMLOPT_CLBLAST_STATUS(s) \
  case s: name = #s; break;
    YMLOPT_CLBLAST_STATUS(CLBlastSuccess)
    YMLOPT_CLBLAST_STATUS(CLBlastOpenCLCompilerNotAvailable)
    YMLOPT_CLBLAST_STATUS(CLBlastTempBufferAllocFailure)
    YMLOPT_CLBLAST_STATUS(CLBlastOpenCLOutOfResources)
    YMLOPT_CLBLAST_STATUS(CLBlastOpenCLOutOfHostMemory)
    YMLOPT_CLBLAST_STATUS(CLBlastOpenCLBuildProgramFailure)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidValue)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidCommandQueue)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidMemObject)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidBinary)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidBuildOptions)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidProgram)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidProgramExecutable)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidKernelName)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidKernelDefinition)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidKernel)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidArgIndex)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidArgValue)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidArgSize)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidKernelArgs)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidLocalNumDimensions)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidLocalThreadsTotal)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidLocalThreadsDim)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidGlobalOffset)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidEventWaitList)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidEvent)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidOperation)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidBufferSize)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidGlobalWorkSize)
    YMLOPT_CLBLAST_STATUS(CLBlastNotImplemented)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidMatrixA)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidMatrixB)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidMatrixC)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidVectorX)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidVectorY)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidDimension)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidLeadDimA)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidLeadDimB)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidLeadDimC)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidIncrementX)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidIncrementY)
    YMLOPT_CLBLAST_STATUS(CLBlastInsufficientMemoryA)
    YMLOPT_CLBLAST_STATUS(CLBlastInsufficientMemoryB)
    YMLOPT_CLBLAST_STATUS(CLBlastInsufficientMemoryC)
    YMLOPT_CLBLAST_STATUS(CLBlastInsufficientMemoryX)
    YMLOPT_CLBLAST_STATUS(CLBlastInsufficientMemoryY)
    YMLOPT_CLBLAST_STATUS(CLBlastInsufficientMemoryTemp)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidBatchCount)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidOverrideKernel)
    YMLOPT_CLBLAST_STATUS(CLBlastMissingOverrideParameter)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidLocalMemUsage)
    YMLOPT_CLBLAST_STATUS(CLBlastNoHalfPrecision)
    YMLOPT_CLBLAST_STATUS(CLBlastNoDoublePrecision)
    YMLOPT_CLBLAST_STATUS(CLBlastInvalidVectorScalar)
    YMLOPT_CLBLAST_STATUS(CLBlastInsufficientMemoryScalar)
    YMLOPT_CLBLAST_STATUS(CLBlastDatabaseError)
    YMLOPT_CLBLAST_STATUS(CLBlastUnknownError)
    YMLOPT_CLBLAST_STATUS(CLBlastUnexpectedError)
#undef YMLOPT_CLBLAST_STATUS
    default: return "CLBlast status " + std::to_string(status);
  }
  return name + " (" + std::to_string(status) + ")";
}

void clblast_check(CLBlastStatusCode status, const char* call) {
  if (status != CLBlastSuccess) throw KernelError(std::string(call) + ": " + clblast_status_name(status));
}

}  // namespace ymlopt::opencl
