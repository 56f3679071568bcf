# The same CMake package at <prefix>/share/cmake, the folder ExecuTorch's docs point
# CMAKE_PREFIX_PATH at (`pathlib.Path(executorch.__path__[0]) / "share" / "cmake"`); it is the
# package under lib/cmake/executorch, read from there so the two cannot drift.
include("${CMAKE_CURRENT_LIST_DIR}/../../lib/cmake/executorch/executorch-config.cmake")
