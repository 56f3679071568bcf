# EXECUTORCH_GLIBC_TARGET: link the shipped binaries for an older glibc than the build machine's.
#
# GCC still compiles (libstdc++'s C++ ABI, which the SDK's users share), but links against zig's stub
# libraries of that glibc, so each reference binds to the newest symbol version that glibc had
# (exp@GLIBC_2.2.5, not exp@GLIBC_2.29). libstdc++ and libgcc are linked statically and kept local
# (their newer GLIBCXX/CXXABI versions never reach the dynamic symbol table), and executables are
# linked fully static, since the system's crt1.o starts programs the way only glibc 2.34+ does.
# Empty (the default): the build machine's glibc, as any plain g++ build.

set(EXECUTORCH_GLIBC_TARGET "" CACHE STRING
    "Oldest glibc the shipped binaries must run on, e.g. 2.28 (empty: the build machine's)")

if(EXECUTORCH_GLIBC_TARGET)
  if(NOT CMAKE_SYSTEM_NAME STREQUAL "Linux" OR NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    message(FATAL_ERROR "EXECUTORCH_GLIBC_TARGET=${EXECUTORCH_GLIBC_TARGET} needs GCC on Linux, not "
                        "${CMAKE_CXX_COMPILER_ID} on ${CMAKE_SYSTEM_NAME}: configure with -DEXECUTORCH_GLIBC_TARGET=")
  endif()
  if(NOT EXECUTORCH_GLIBC_TARGET MATCHES "^2\\.[0-9]+$")
    message(FATAL_ERROR "EXECUTORCH_GLIBC_TARGET=${EXECUTORCH_GLIBC_TARGET} is not a glibc version: give one "
                        "such as 2.28, or leave it empty for the build machine's glibc")
  endif()
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  execute_process(COMMAND "${CMAKE_CXX_COMPILER}" -print-file-name=libc_nonshared.a
                  OUTPUT_VARIABLE _et_nonshared OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(EXECUTORCH_GLIBC_STUBS "${CMAKE_BINARY_DIR}/glibc-${EXECUTORCH_GLIBC_TARGET}")
  execute_process(
    COMMAND "${Python3_EXECUTABLE}" "${CMAKE_CURRENT_LIST_DIR}/glibc/make_stubs.py"
            "${EXECUTORCH_GLIBC_TARGET}" "${EXECUTORCH_GLIBC_STUBS}" --nonshared "${_et_nonshared}"
            --arch "${CMAKE_SYSTEM_PROCESSOR}"
    RESULT_VARIABLE _et_rc ERROR_VARIABLE _et_err OUTPUT_QUIET)
  if(NOT _et_rc EQUAL 0)
    string(STRIP "${_et_err}" _et_err)
    message(FATAL_ERROR "${_et_err}")
  endif()
  message(STATUS "Linking for glibc ${EXECUTORCH_GLIBC_TARGET} (stubs in ${EXECUTORCH_GLIBC_STUBS})")
  # Every link, including the compiler checks after this point, sees the stubs before the system.
  add_link_options("-L${EXECUTORCH_GLIBC_STUBS}" -static-libstdc++ "LINKER:--exclude-libs,ALL")
  if(EXECUTORCH_GLIBC_TARGET VERSION_LESS 2.36)
    string(REGEX REPLACE "^2\\." "" _et_minor "${EXECUTORCH_GLIBC_TARGET}")
    add_library(executorch_glibc_compat OBJECT "${CMAKE_CURRENT_LIST_DIR}/glibc/compat.cpp")
    target_compile_definitions(executorch_glibc_compat PRIVATE EXECUTORCH_GLIBC_MINOR=${_et_minor})
  endif()
endif()

# Applies the target glibc to one program or shared object: the local definitions it lacks, and a static link
# for an executable. No-op without EXECUTORCH_GLIBC_TARGET.
function(executorch_glibc_target target)
  if(NOT EXECUTORCH_GLIBC_TARGET)
    return()
  endif()
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "EXECUTABLE")
    # The static libc defines everything itself.
    target_link_options(${target} PRIVATE -static)
  else()
    if(TARGET executorch_glibc_compat)
      target_sources(${target} PRIVATE $<TARGET_OBJECTS:executorch_glibc_compat>)
    endif()
    if(EXECUTORCH_GLIBC_TARGET VERSION_LESS 2.34)
      # Before 2.34 the pthread functions (the kernels' thread pool) live in libpthread, not libc;
      # this machine's FindThreads sees them in libc and so adds nothing.
      target_link_libraries(${target} PRIVATE pthread)
    endif()
  endif()
endfunction()

# Every target of directory `dir` and below.
function(_executorch_targets_under dir out)
  get_property(_targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(_subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(_sub IN LISTS _subdirs)
    _executorch_targets_under("${_sub}" _more)
    list(APPEND _targets ${_more})
  endforeach()
  set(${out} ${_targets} PARENT_SCOPE)
endfunction()

# Applies the target glibc to every program and shared object of the build (shipped or not: all
# link against the stubs). Call once, after every target is defined.
function(executorch_glibc_target_all)
  if(NOT EXECUTORCH_GLIBC_TARGET)
    return()
  endif()
  _executorch_targets_under("${PROJECT_SOURCE_DIR}" _all)
  foreach(_t IN LISTS _all)
    get_target_property(_type ${_t} TYPE)
    if(_type MATCHES "^(EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY)$")
      executorch_glibc_target(${_t})
    endif()
  endforeach()
endfunction()
