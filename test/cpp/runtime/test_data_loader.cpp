// The data loaders: same bytes from each, bounds checked, and Program::load(DataLoader*) on a fixture.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "extension/data_loader/buffer_data_loader.h"
#include "extension/data_loader/file_data_loader.h"
#include "extension/data_loader/mmap_data_loader.h"
#include "runtime/executor/program.h"
#include "test/cpp/runtime/harness.h"

using namespace executorch::runtime;
using executorch::extension::BufferDataLoader;
using executorch::extension::FileDataLoader;
using executorch::extension::MmapDataLoader;

namespace {

const DataLoader::SegmentInfo kProgram(DataLoader::SegmentInfo::Type::Program);

// Every loader must give the file's own bytes at an unaligned offset and refuse ranges past the end.
bool reads_like_the_file(const DataLoader& loader, const std::vector<uint8_t>& file) {
  Result<size_t> size = loader.size();
  if (!size.ok() || *size != file.size() || file.size() < 20) return false;
  Result<FreeableBuffer> part = loader.load(5, 13, kProgram);
  if (!part.ok() || part->size() != 13 || std::memcmp(part->data(), file.data() + 5, 13) != 0) return false;
  uint8_t copy[7] = {};
  if (loader.load_into(file.size() - 7, 7, kProgram, copy) != Error::Ok) return false;
  if (std::memcmp(copy, file.data() + file.size() - 7, 7) != 0) return false;
  return !loader.load(file.size() - 3, 4, kProgram).ok() && !loader.load(file.size() + 1, 0, kProgram).ok() &&
         !loader.load(1, SIZE_MAX, kProgram).ok();
}

Result<Program> load_with(int kind, const std::string& path, const std::vector<uint8_t>& file) {
  if (kind == 0) {
    Result<FileDataLoader> f = FileDataLoader::from(path.c_str());
    return f.ok() ? Program::load(&f.get()) : f.error();
  }
  if (kind == 1) {
    Result<MmapDataLoader> m = MmapDataLoader::from(path.c_str(), MmapDataLoader::MlockConfig::NoMlock);
    return m.ok() ? Program::load(&m.get()) : m.error();
  }
  BufferDataLoader b(file.data(), file.size());
  return Program::load(&b);
}

}  // namespace

RTEST(data_loaders_read_the_file_and_refuse_out_of_range) {
  const std::string path = rtest::fixture("native/add.pte");
  std::vector<uint8_t> file = rtest::read_file(path);
  Result<FileDataLoader> f = FileDataLoader::from(path.c_str());
  RCHECK(f.ok() && reads_like_the_file(*f, file));
  Result<MmapDataLoader> m = MmapDataLoader::from(path.c_str(), MmapDataLoader::MlockConfig::NoMlock);
  RCHECK(m.ok() && reads_like_the_file(*m, file));
  BufferDataLoader b(file.data(), file.size());
  RCHECK(reads_like_the_file(b, file));
}

RTEST(data_loader_factories_report_bad_arguments) {
  RCHECK(FileDataLoader::from(rtest::fixture("native/no_such.pte").c_str()).error() == Error::AccessFailed);
  RCHECK(MmapDataLoader::from(rtest::fixture("native/no_such.pte").c_str()).error() == Error::AccessFailed);
  RCHECK(FileDataLoader::from(rtest::fixture("native/add.pte").c_str(), 3).error() == Error::InvalidArgument);
  // A directory opens read-only; the loaders must refuse it, not report a size and fail later.
  RCHECK(FileDataLoader::from(rtest::fixture("native").c_str()).error() == Error::AccessFailed);
  RCHECK(MmapDataLoader::from(rtest::fixture("native").c_str()).error() == Error::AccessFailed);
}

RTEST(an_empty_file_loads_as_no_program) {
  char path[] = "/tmp/et_empty_XXXXXX";
  const int fd = ::mkstemp(path);
  RCHECK(fd >= 0);
  if (fd < 0) return;
  ::close(fd);
  for (int kind = 0; kind < 2; ++kind) {
    Result<Program> program = load_with(kind, path, {});
    RCHECK(program.error() == Error::InvalidProgram);
  }
  ::unlink(path);
}

RTEST(file_loader_honours_the_alignment) {
  Result<FileDataLoader> f = FileDataLoader::from(rtest::fixture("native/add.pte").c_str(), 256);
  RCHECK(f.ok());
  Result<FreeableBuffer> part = f->load(1, 10, kProgram);
  RCHECK(part.ok() && reinterpret_cast<uintptr_t>(part->data()) % 256 == 0);
}

RTEST(program_loads_through_each_loader_and_outlives_it) {
  const std::string path = rtest::fixture("native/add.pte");
  std::vector<uint8_t> file = rtest::read_file(path);
  Result<Program> direct = Program::load(file.data(), file.size());
  RCHECK(direct.ok());
  for (int kind = 0; kind < 3; ++kind) {
    // The loader is gone when load_with returns: the Program keeps the bytes it loaded.
    Result<Program> program = load_with(kind, path, file);
    RCHECK(program.ok() && program->num_methods() == direct->num_methods());
    RCHECK(std::strcmp(*program->get_method_name(0), *direct->get_method_name(0)) == 0);
  }
  BufferDataLoader cut(file.data(), 6);
  RCHECK(Program::load(&cut).error() == Error::InvalidProgram);
  RCHECK(Program::load(static_cast<DataLoader*>(nullptr)).error() == Error::InvalidArgument);
}
