// Definitions for symbols GCC 12's libstdc++ references from glibc releases newer than the
// targeted one (EXECUTORCH_GLIBC_MINOR, e.g. 28). Local to each binary (hidden), so they never
// replace the system's own where it has them.
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

extern "C" {

#if EXECUTORCH_GLIBC_MINOR < 32
// glibc 2.32: libstdc++'s inline reference counting (shared_ptr, locale) reads it to skip atomics
// in single-threaded processes. Zero means "threads may exist": always atomic, always correct.
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;
#endif

#if EXECUTORCH_GLIBC_MINOR < 36
// glibc 2.36: std::random_device's default source. getrandom (glibc 2.25) gives the same kernel
// randomness; it blocks only until the pool is first initialised and is retried when interrupted.
__attribute__((visibility("hidden"))) uint32_t arc4random(void) {
  uint32_t value = 0;
  auto* out = reinterpret_cast<unsigned char*>(&value);
  size_t got = 0;
  while (got < sizeof(value)) {
    const ssize_t n = getrandom(out + got, sizeof(value) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      abort();  // no kernel randomness at all (pre-3.17 kernel): arc4random cannot fail either
    }
  }
  return value;
}
#endif

}  // extern "C"
