// Malformed files: every truncation and bit flip of the fixtures, and the saved
// crashers, must give an error or a clean run, never a crash.
#include <dirent.h>

#include <string>

#include "test/cpp/runtime/exercise.h"
#include "test/cpp/runtime/harness.h"

using namespace executorch::runtime;

namespace {

const char* kFixtures[] = {"native/add.pte", "native/affine.pte", "native/cond.pte", "native/channels_last.pte"};

}  // namespace

RTEST(fixtures_run_clean) {
  for (const char* f : kFixtures) {
    auto file = rtest::read_file(rtest::fixture(f));
    RCHECK(!file.empty());
    RCHECK(rtest::exercise(file.data(), file.size()) == Error::Ok);
  }
}

RTEST(every_truncation_is_an_error) {
  for (const char* f : kFixtures) {
    auto file = rtest::read_file(rtest::fixture(f));
    for (size_t n = 0; n < file.size(); ++n) {
      // The segment data follows the program; a cut inside it must still be caught.
      RCHECK(rtest::exercise(file.data(), n) != Error::Ok);
    }
  }
}

RTEST(every_bit_flip_is_survived) {
  size_t runs = 0;
  for (const char* f : kFixtures) {
    auto file = rtest::read_file(rtest::fixture(f));
    for (size_t i = 0; i < file.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        file[i] ^= uint8_t(1u << bit);
        rtest::exercise(file.data(), file.size());
        file[i] ^= uint8_t(1u << bit);
        ++runs;
      }
    }
  }
  RCHECK(runs > 8000);
}

RTEST(random_bytes_are_an_error) {
  uint32_t state = 12345;
  std::vector<uint8_t> buf;
  for (int trial = 0; trial < 2000; ++trial) {
    buf.resize(trial % 300);
    for (auto& b : buf) b = uint8_t((state = state * 1664525u + 1013904223u) >> 24);
    if (trial % 2 == 0 && buf.size() >= 8) std::memcpy(&buf[4], "ET12", 4);
    RCHECK(rtest::exercise(buf.data(), buf.size()) != Error::Ok);
  }
}

RTEST(saved_crashers_are_errors) {
  std::string dir = rtest::fixture("malformed");
  DIR* d = opendir(dir.c_str());
  RCHECK(d != nullptr);
  if (d == nullptr) return;
  size_t n = 0;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".pte") != 0) continue;
    auto file = rtest::read_file(dir + "/" + name);
    Error err = rtest::exercise(file.data(), file.size());
    if (err == Error::Ok) std::printf("  %s ran clean\n", name.c_str());
    RCHECK(err != Error::Ok);
    ++n;
  }
  closedir(d);
  RCHECK(n > 0);
}
