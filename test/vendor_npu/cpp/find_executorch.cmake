# Where the ExecuTorch runtime comes from: the C++ SDK of an installed full wheel, found with
# find_package(executorch) (pass -DCMAKE_PREFIX_PATH=$(python -m executorch.sdk --cmake-prefix-path)),
# or, when -DEXECUTORCH_SOURCE_DIR is given, a source tree built here without kernels or bindings.
# Either way it provides executorch::runtime.
set(EXECUTORCH_SOURCE_DIR "" CACHE PATH "ExecuTorch source tree (leave empty to use an installed SDK)")
if(NOT EXECUTORCH_SOURCE_DIR)
  find_package(executorch REQUIRED COMPONENTS runtime)
  return()
endif()
if(NOT EXISTS "${EXECUTORCH_SOURCE_DIR}/runtime/backend/interface.h")
  message(FATAL_ERROR "set -DEXECUTORCH_SOURCE_DIR to the executorch source tree "
                      "(no runtime/backend/interface.h under '${EXECUTORCH_SOURCE_DIR}')")
endif()
set(EXECUTORCH_BUILD_PORTABLE_KERNELS OFF CACHE BOOL "" FORCE)
set(EXECUTORCH_BUILD_PYBIND OFF CACHE BOOL "" FORCE)
set(EXECUTORCH_BUILD_TESTS OFF CACHE BOOL "" FORCE)
add_subdirectory("${EXECUTORCH_SOURCE_DIR}" executorch EXCLUDE_FROM_ALL)
add_library(executorch::runtime ALIAS executorch)
