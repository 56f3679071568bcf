# Selective build: which operators a kernel library registers, generated from its functions.yaml.
#
#   gen_selected_ops(LIB_NAME <name> [OPS_SCHEMA_YAML <yaml>] [ROOT_OPS <a,b,...>]
#                    [INCLUDE_ALL_OPS <bool>] [KERNEL_YAMLS <functions.yaml>...])
# writes <build>/<name>/selected_operators.yaml at configure time: the union of OPS_SCHEMA_YAML and
# ROOT_OPS, or every operator when INCLUDE_ALL_OPS is true. Configure fails naming any operator none
# of KERNEL_YAMLS (default: the portable kernels) provides, and on a malformed yaml.
#
# DTYPE_SELECTIVE_BUILD requires recorded dtypes for every selected operator.
#
#   executorch_generate_kernel_registrations(<target> LIB_NAME <name> KERNEL_YAML <functions.yaml>
#                                            [DTYPE_SELECTIVE_BUILD <bool>])
# generates, at build time, the registration file each kernel source includes
# (portable_registrations/<stem>.inc) holding only the selected kernels, and
# portable_registrations/selected_dtypes.h, the elementwise compute paths to compile.

set(EXECUTORCH_CODEGEN_DIR "${CMAKE_CURRENT_LIST_DIR}/../selective_build")

function(_executorch_codegen_python out_var)
  if(NOT Python3_EXECUTABLE)
    find_package(Python3 COMPONENTS Interpreter REQUIRED)
  endif()
  set(${out_var} "${Python3_EXECUTABLE}" PARENT_SCOPE)
endfunction()

function(gen_selected_ops)
  cmake_parse_arguments(GEN "" "LIB_NAME;OPS_SCHEMA_YAML;ROOT_OPS;INCLUDE_ALL_OPS;DTYPE_SELECTIVE_BUILD"
                        "KERNEL_YAMLS" ${ARGN})
  if(NOT GEN_LIB_NAME)
    message(FATAL_ERROR "gen_selected_ops: LIB_NAME is required")
  endif()
  if(NOT GEN_KERNEL_YAMLS)
    set(GEN_KERNEL_YAMLS "${PROJECT_SOURCE_DIR}/kernels/portable/functions.yaml")
  endif()
  _executorch_codegen_python(_python)
  set(_out "${CMAKE_CURRENT_BINARY_DIR}/${GEN_LIB_NAME}/selected_operators.yaml")
  file(MAKE_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}/${GEN_LIB_NAME}")
  set(_cmd "${_python}" "${EXECUTORCH_CODEGEN_DIR}/gen_registrations.py" select -o "${_out}"
           "--root-ops=${GEN_ROOT_OPS}")
  foreach(_yaml ${GEN_KERNEL_YAMLS})
    list(APPEND _cmd --kernel-yaml "${_yaml}")
  endforeach()
  if(GEN_OPS_SCHEMA_YAML)
    list(APPEND _cmd --ops-yaml "${GEN_OPS_SCHEMA_YAML}")
  endif()
  if(GEN_INCLUDE_ALL_OPS)
    list(APPEND _cmd --include-all-ops ON)
  endif()
  if(GEN_DTYPE_SELECTIVE_BUILD)
    list(APPEND _cmd --dtype-selective ON)
  endif()
  execute_process(COMMAND ${_cmd} RESULT_VARIABLE _rc ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    string(STRIP "${_err}" _err)
    message(FATAL_ERROR "gen_selected_ops(${GEN_LIB_NAME}): ${_err}")
  endif()
  # Re-run configure when an input yaml changes.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${GEN_KERNEL_YAMLS} ${GEN_OPS_SCHEMA_YAML})
endfunction()

function(executorch_generate_kernel_registrations target)
  cmake_parse_arguments(GEN "" "LIB_NAME;KERNEL_YAML;DTYPE_SELECTIVE_BUILD" "" ${ARGN})
  set(_dtype OFF)
  if(GEN_DTYPE_SELECTIVE_BUILD)
    set(_dtype ON)
  endif()
  _executorch_codegen_python(_python)
  set(_dir "${CMAKE_CURRENT_BINARY_DIR}/${GEN_LIB_NAME}")
  set(_selected "${_dir}/selected_operators.yaml")
  get_target_property(_sources ${target} SOURCES)
  set(_outputs)
  foreach(_src ${_sources})
    get_filename_component(_stem "${_src}" NAME_WE)
    if(_stem MATCHES "^op_" OR _stem STREQUAL "register_prim_ops")
      list(APPEND _outputs "${_dir}/portable_registrations/${_stem}.inc")
    endif()
  endforeach()
  list(APPEND _outputs "${_dir}/portable_registrations/selected_dtypes.h")
  add_custom_command(
    OUTPUT ${_outputs}
    COMMAND "${_python}" "${EXECUTORCH_CODEGEN_DIR}/gen_registrations.py" register
            --kernel-yaml "${GEN_KERNEL_YAML}" --selected-yaml "${_selected}" --output-dir "${_dir}"
            --dtype-selective ${_dtype}
    DEPENDS "${GEN_KERNEL_YAML}" "${_selected}" "${EXECUTORCH_CODEGEN_DIR}/gen_registrations.py"
            "${EXECUTORCH_CODEGEN_DIR}/yaml_subset.py"
    COMMENT "Generating ${GEN_LIB_NAME} kernel registrations"
    VERBATIM)
  add_custom_target(${GEN_LIB_NAME}_registrations DEPENDS ${_outputs})
  add_dependencies(${target} ${GEN_LIB_NAME}_registrations)
  target_include_directories(${target} PRIVATE "${_dir}")
endfunction()

# The root EXECUTORCH_SELECT_OPS_* options as gen_selected_ops arguments for the portable kernels.
# EXECUTORCH_SELECT_OPS_MODEL is read at configure time with the project's own .pte reader.
function(executorch_selected_ops_from_options lib_name)
  set(_yaml "${EXECUTORCH_SELECT_OPS_YAML}")
  if(EXECUTORCH_SELECT_OPS_YAML AND NOT EXISTS "${EXECUTORCH_SELECT_OPS_YAML}")
    message(FATAL_ERROR "EXECUTORCH_SELECT_OPS_YAML=${EXECUTORCH_SELECT_OPS_YAML}: no such file")
  endif()
  if(EXECUTORCH_SELECT_OPS_MODEL)
    if(EXECUTORCH_SELECT_OPS_YAML)
      message(FATAL_ERROR "EXECUTORCH_SELECT_OPS_MODEL and EXECUTORCH_SELECT_OPS_YAML both set: "
                          "merge them first (python -m executorch.tools.selective_build merge).")
    endif()
    _executorch_model_ops("${EXECUTORCH_SELECT_OPS_MODEL}" _yaml)
  endif()
  set(_all OFF)
  if(NOT EXECUTORCH_SELECT_OPS_LIST AND NOT _yaml)
    set(_all ON)
  endif()
  if(_all AND EXECUTORCH_DTYPE_SELECTIVE_BUILD)
    message(FATAL_ERROR "EXECUTORCH_DTYPE_SELECTIVE_BUILD needs an operator selection with dtypes: "
                        "add -DEXECUTORCH_SELECT_OPS_MODEL=<m.pte> or -DEXECUTORCH_SELECT_OPS_YAML=<yaml>.")
  endif()
  gen_selected_ops(LIB_NAME ${lib_name} OPS_SCHEMA_YAML "${_yaml}"
                   ROOT_OPS "${EXECUTORCH_SELECT_OPS_LIST}" INCLUDE_ALL_OPS ${_all}
                   DTYPE_SELECTIVE_BUILD ${EXECUTORCH_DTYPE_SELECTIVE_BUILD})
  if(_all)
    set(EXECUTORCH_SELECTIVE_BUILD_ACTIVE OFF PARENT_SCOPE)
  else()
    set(EXECUTORCH_SELECTIVE_BUILD_ACTIVE ON PARENT_SCOPE)
  endif()
endfunction()

# Writes the operators of the .pte files in `models` (a ;-list) to a yaml; sets out_var to its path.
function(_executorch_model_ops models out_var)
  _executorch_codegen_python(_python)
  set(_models)
  foreach(_m ${models})
    get_filename_component(_abs "${_m}" ABSOLUTE BASE_DIR "${CMAKE_BINARY_DIR}")
    if(NOT EXISTS "${_abs}")
      get_filename_component(_abs "${_m}" ABSOLUTE BASE_DIR "${PROJECT_SOURCE_DIR}")
    endif()
    if(NOT EXISTS "${_abs}")
      message(FATAL_ERROR "EXECUTORCH_SELECT_OPS_MODEL=${_m}: no such file")
    endif()
    list(APPEND _models "${_abs}")
  endforeach()
  # The source tree imported as the `executorch` package; its .pte reader needs only the standard library.
  set(_pkg_root "${CMAKE_BINARY_DIR}/selective_build_py")
  file(MAKE_DIRECTORY "${_pkg_root}")
  file(CREATE_LINK "${PROJECT_SOURCE_DIR}" "${_pkg_root}/executorch" SYMBOLIC)
  set(_out "${CMAKE_BINARY_DIR}/model_operators.yaml")
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -E env "PYTHONPATH=${_pkg_root}"
            "${_python}" -m executorch.tools.selective_build gen-oplist ${_models} -o "${_out}"
    RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    # The last line holds the reason (a traceback may precede it).
    string(STRIP "${_err}" _err)
    string(REGEX REPLACE ".*\n" "" _err "${_err}")
    message(FATAL_ERROR "EXECUTORCH_SELECT_OPS_MODEL: reading the operators with ${_python} failed: ${_err}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_models})
  set(${out_var} "${_out}" PARENT_SCOPE)
endfunction()
