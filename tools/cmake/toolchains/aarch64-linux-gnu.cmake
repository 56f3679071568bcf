# Cross-compiles for 64-bit Arm Linux (aarch64, glibc) on another Linux machine with Debian's
# cross GCC (apt-get install g++-aarch64-linux-gnu): the same GCC major as the x86-64 build, so the
# SDK keeps libstdc++'s C++ ABI, and its static libstdc++/libc for the aarch64 side.
#   cmake -S . -B cmake-out-aarch64 -DCMAKE_TOOLCHAIN_FILE=tools/cmake/toolchains/aarch64-linux-gnu.cmake
# The full wheel's build picks this file with EXECUTORCH_TARGET_ARCH=aarch64 (README.md, "Wheels").

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(EXECUTORCH_CROSS_TRIPLE aarch64-linux-gnu)

# CXX, when set, names the cross compiler (as it names the compiler of a native build).
if(NOT "$ENV{CXX}" STREQUAL "")
  set(_et_cross_cxx "$ENV{CXX}")
else()
  find_program(_et_cross_cxx ${EXECUTORCH_CROSS_TRIPLE}-g++)
  if(NOT _et_cross_cxx)
    message(FATAL_ERROR "no ${EXECUTORCH_CROSS_TRIPLE}-g++ on PATH for the aarch64 cross build: "
                        "apt-get install g++-aarch64-linux-gnu (Debian/Ubuntu), or set CXX to a cross compiler")
  endif()
endif()
set(CMAKE_CXX_COMPILER "${_et_cross_cxx}")
set(CMAKE_STRIP "${EXECUTORCH_CROSS_TRIPLE}-strip" CACHE FILEPATH "strip for aarch64 objects")

# Programs (flatc, python, ninja) are the build machine's; libraries and headers may come from
# either side (the Python headers are the build machine's: the same on every LP64 Linux).
set(CMAKE_FIND_ROOT_PATH "/usr/${EXECUTORCH_CROSS_TRIPLE}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)

# Test programs (ctest, try_run) run under user-mode QEMU when it is installed
# (apt-get install qemu-user-static); the static libc needs no sysroot, a dynamic program finds
# its loader through -L.
find_program(_et_qemu NAMES qemu-aarch64-static qemu-aarch64)
if(_et_qemu)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${_et_qemu};-L;/usr/${EXECUTORCH_CROSS_TRIPLE}")
endif()
