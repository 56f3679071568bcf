# CMake package for the ExecuTorch C++ SDK installed by the executorch wheel (or `cmake --install
# <build> --component sdk`). Use:
#
#   find_package(executorch REQUIRED COMPONENTS runtime kernels_portable)
#   target_link_libraries(app PRIVATE executorch::runtime executorch::kernels_portable)
#
# Components, each an imported target executorch::<component>:
#   runtime                  libexecutorch.so: program loading, method execution, backend and
#                            kernel registration, the ExecutorBackend
#   kernels_portable         libportable_kernels.so: the portable operators and prim ops; linked
#                            only for its registrations, which run when it loads
#   extension_module         libextension_module.so: executorch::extension::Module, TensorPtr
#   extension_data_loader    libextension_data_loader.so: FileDataLoader, MmapDataLoader (and the
#                            header-only BufferDataLoader), for Program::load(DataLoader*)
#   runtime_static           the same runtime as static archives
#   kernels_portable_static  the portable kernels as a static archive, linked whole
# With no COMPONENTS (`find_package(executorch)`, as ExecuTorch's docs write it), runtime and
# kernels_portable are required and every other shared-library component the wheel installed
# (extension_module, extension_data_loader) is found too, so `${EXECUTORCH_LIBRARIES}` links
# Module, TensorPtr/from_blob and the data loaders as the published package's does; the static
# archives are opt-in (they hold the same runtime again). A named component that is not
# installed fails the configure step naming it (or only sets executorch_<c>_FOUND to FALSE when
# it is OPTIONAL_COMPONENTS).
#
# Variables, as ExecuTorch's own package sets them:
#   EXECUTORCH_FOUND, EXECUTORCH_INCLUDE_DIRS, EXECUTORCH_LIBRARIES (the imported targets of the
#   components found; with no COMPONENTS, every shared-library component installed), EXECUTORCH_COMPILE_DEFINITIONS (what the libraries were built with),
#   EXECUTORCH_CXX_STANDARD (the C++ standard the headers need).
cmake_minimum_required(VERSION 3.24)

get_filename_component(_et_root "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(_et_lib "${_et_root}/lib")
set(EXECUTORCH_INCLUDE_DIRS "${_et_root}/include" "${_et_root}/include/executorch")
set(EXECUTORCH_COMPILE_DEFINITIONS "ET_LOG_ENABLED=1")
set(EXECUTORCH_CXX_STANDARD 17)
set(EXECUTORCH_LIBRARIES)

# component -> the files it needs, in link order.
set(_et_files_runtime libexecutorch.so)
set(_et_files_kernels_portable libportable_kernels.so)
set(_et_files_extension_module libextension_module.so)
set(_et_files_extension_data_loader libextension_data_loader.so)
set(_et_files_runtime_static libexecutorch.a libexecutor_backend.a libexecutorch_core.a)
set(_et_files_kernels_portable_static libportable_kernels.a libxnnpack_backend.a libkernels_cpu.a)
set(_et_known runtime kernels_portable extension_module extension_data_loader runtime_static kernels_portable_static)

set(_et_wanted ${executorch_FIND_COMPONENTS})
if(NOT _et_wanted)
  set(_et_wanted runtime kernels_portable extension_module extension_data_loader)
  set(executorch_FIND_REQUIRED_runtime TRUE)
  set(executorch_FIND_REQUIRED_kernels_portable TRUE)
endif()
# Dependencies between components: kernels and Module need the runtime they were built against.
foreach(_dep kernels_portable:runtime extension_module:runtime extension_data_loader:runtime
              kernels_portable_static:runtime_static)
  string(REPLACE ":" ";" _dep "${_dep}")
  list(GET _dep 0 _c)
  list(GET _dep 1 _needs)
  if(_c IN_LIST _et_wanted AND NOT _needs IN_LIST _et_wanted)
    list(APPEND _et_wanted ${_needs})
    set(executorch_FIND_REQUIRED_${_needs} ${executorch_FIND_REQUIRED_${_c}})
  endif()
endforeach()

function(_et_missing message)
  set(executorch_FOUND FALSE PARENT_SCOPE)
  set(EXECUTORCH_FOUND FALSE PARENT_SCOPE)
  set(executorch_NOT_FOUND_MESSAGE "${message}" PARENT_SCOPE)
endfunction()

# A shared library linked only for its registrations must stay in DT_NEEDED under --as-needed.
set(CMAKE_LINK_LIBRARY_USING_EXECUTORCH_NO_AS_NEEDED
    "LINKER:--push-state,--no-as-needed" "<LINK_ITEM>" "LINKER:--pop-state")
set(CMAKE_LINK_LIBRARY_USING_EXECUTORCH_NO_AS_NEEDED_SUPPORTED TRUE)

set(executorch_FOUND TRUE)
foreach(_c IN LISTS _et_wanted)
  set(executorch_${_c}_FOUND FALSE)
  if(NOT _c IN_LIST _et_known)
    set(_why "executorch has no component '${_c}' (known: ${_et_known})")
  else()
    set(_why "")
    foreach(_f IN LISTS _et_files_${_c})
      if(NOT EXISTS "${_et_lib}/${_f}")
        set(_why "executorch component '${_c}' is not installed: ${_et_lib}/${_f} is missing; install the full executorch wheel (not EXECUTORCH_BUILD_MINIMAL)")
        break()
      endif()
    endforeach()
  endif()
  if(_why)
    if(executorch_FIND_REQUIRED_${_c})
      _et_missing("${_why}")
      return()
    endif()
    continue()
  endif()
  set(executorch_${_c}_FOUND TRUE)
  if(NOT TARGET executorch::${_c})
    add_library(executorch::${_c} INTERFACE IMPORTED)
    set(_libs)
    foreach(_f IN LISTS _et_files_${_c})
      list(APPEND _libs "${_et_lib}/${_f}")
    endforeach()
    if(_c MATCHES "^kernels_portable")
      # Linked only for its registrations: nothing references it, so keep the linker from dropping it.
      if(_c STREQUAL "kernels_portable_static")
        # The kernels and the XnnpackBackend (both register themselves) whole; their CPU routines after.
        list(GET _libs 0 1 2 _parts)
        list(GET _parts 0 _kernels)
        list(GET _parts 1 _xnnpack)
        list(GET _parts 2 _cpu)
        # The kernels' thread pool calls pthreads, which older glibc keeps out of libc.
        find_package(Threads REQUIRED)
        # The kernels register load passes, which the executor archive defines: it comes again after them.
        set(_libs "$<LINK_LIBRARY:WHOLE_ARCHIVE,${_kernels}>" "$<LINK_LIBRARY:WHOLE_ARCHIVE,${_xnnpack}>" ${_cpu}
                  "${_et_lib}/libexecutorch.a" "${_et_lib}/libexecutorch_core.a" Threads::Threads)
      else()
        set(_libs "$<LINK_LIBRARY:EXECUTORCH_NO_AS_NEEDED,${_libs}>")
      endif()
    endif()
    set_target_properties(executorch::${_c} PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${EXECUTORCH_INCLUDE_DIRS}"
      INTERFACE_COMPILE_DEFINITIONS "${EXECUTORCH_COMPILE_DEFINITIONS}"
      INTERFACE_COMPILE_FEATURES cxx_std_${EXECUTORCH_CXX_STANDARD})
    if(_c STREQUAL "runtime_static")
      # executor_backend registers itself from a static initializer: link it whole too.
      set(_libs "${_et_lib}/libexecutorch.a" "$<LINK_LIBRARY:WHOLE_ARCHIVE,${_et_lib}/libexecutor_backend.a>"
                "${_et_lib}/libexecutorch_core.a")
    endif()
    target_link_libraries(executorch::${_c} INTERFACE ${_libs})
  endif()
  list(APPEND EXECUTORCH_LIBRARIES executorch::${_c})
endforeach()
foreach(_dep kernels_portable:runtime extension_module:runtime extension_data_loader:runtime
              kernels_portable_static:runtime_static)
  string(REPLACE ":" ";" _dep "${_dep}")
  list(GET _dep 0 _c)
  list(GET _dep 1 _needs)
  if(TARGET executorch::${_c} AND TARGET executorch::${_needs})
    set_property(TARGET executorch::${_c} APPEND PROPERTY INTERFACE_LINK_LIBRARIES executorch::${_needs})
  endif()
endforeach()
set(EXECUTORCH_FOUND TRUE)
