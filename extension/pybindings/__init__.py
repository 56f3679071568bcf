"""Native runtime bindings; `_portable_lib` is built by CMake (EXECUTORCH_BUILD_PYBIND) in the full wheel."""
