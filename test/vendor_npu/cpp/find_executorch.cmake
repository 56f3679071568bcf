# Where the ExecuTorch runtime comes from. Today: the source tree, built here without kernels
# or bindings (EXECUTORCH_SOURCE_DIR). Later: find_package(executorch) from an installed wheel.
# Either way it provides executorch::runtime (and executorch::kernels when built).
set(EXECUTORCH_SOURCE_DIR "" CACHE PATH "ExecuTorch source tree")
if(NOT EXISTS "${EXECUTORCH_SOURCE_DIR}/runtime/backend/interface.h")
  message(FATAL_ERROR "set -DEXECUTORCH_SOURCE_DIR to the executorch source tree "
                      "(no runtime/backend/interface.h under '${EXECUTORCH_SOURCE_DIR}')")
endif()
set(EXECUTORCH_BUILD_PORTABLE_KERNELS OFF CACHE BOOL "" FORCE)
set(EXECUTORCH_BUILD_PYBIND OFF CACHE BOOL "" FORCE)
set(EXECUTORCH_BUILD_TESTS OFF CACHE BOOL "" FORCE)
add_subdirectory("${EXECUTORCH_SOURCE_DIR}" executorch EXCLUDE_FROM_ALL)
add_library(executorch::runtime ALIAS executorch)
