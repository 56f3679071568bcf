// MmapDataLoader: page-aligned private mappings of the requested ranges.
#include "extension/data_loader/mmap_data_loader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "extension/data_loader/open_file.h"
#include "runtime/platform/log.h"

namespace executorch {
namespace extension {

using runtime::Error;
using runtime::FreeableBuffer;
using runtime::Result;

namespace {

// The mapping starts at a page boundary before the data; the context carries the page offset.
void unmap(void* context, void* data, size_t size) {
  const size_t lead = reinterpret_cast<uintptr_t>(context);
  ::munmap(static_cast<uint8_t*>(data) - lead, size + lead);
}

}  // namespace

Result<MmapDataLoader> MmapDataLoader::from(const char* file_name, MlockConfig mlock_config) {
  ET_CHECK_OR_RETURN(file_name != nullptr, InvalidArgument, "MmapDataLoader: file name is null");
  const long page = ::sysconf(_SC_PAGESIZE);
  ET_CHECK_OR_RETURN(page > 0, AccessFailed, "MmapDataLoader: cannot read the page size");
  const OpenedFile file = open_file(file_name);
  ET_CHECK_OR_RETURN(file.fd >= 0, AccessFailed, "MmapDataLoader: %s %s", file_name, file.problem);
  char* name = ::strdup(file_name);
  if (name == nullptr) {
    ::close(file.fd);
    return Error::MemoryAllocationFailed;
  }
  return MmapDataLoader(file.fd, file.size, static_cast<size_t>(page), mlock_config, name);
}

MmapDataLoader::MmapDataLoader(MmapDataLoader&& other) noexcept
    : fd_(other.fd_),
      file_size_(other.file_size_),
      page_size_(other.page_size_),
      mlock_config_(other.mlock_config_),
      file_name_(other.file_name_) {
  other.fd_ = -1;
  other.file_name_ = nullptr;
}

MmapDataLoader::~MmapDataLoader() {
  if (fd_ >= 0) ::close(fd_);
  std::free(file_name_);
}

Result<FreeableBuffer> MmapDataLoader::load(size_t offset, size_t size, const SegmentInfo& /*segment_info*/) const {
  ET_CHECK_OR_RETURN(fd_ >= 0, InvalidState, "MmapDataLoader: used after being moved from");
  ET_CHECK_OR_RETURN(offset <= file_size_ && size <= file_size_ - offset, InvalidArgument,
                     "MmapDataLoader: %zu bytes at offset %zu run past the %zu-byte file '%s'", size, offset,
                     file_size_, file_name_);
  if (size == 0) return FreeableBuffer(nullptr, 0);
  const size_t lead = offset % page_size_;
  // Private and writable (copy-on-write): a malformed program whose kernels write into its
  // constants then changes only this process's copy, never the file.
  void* map = ::mmap(nullptr, size + lead, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd_, static_cast<off_t>(offset - lead));
  ET_CHECK_OR_RETURN(map != MAP_FAILED, AccessFailed, "MmapDataLoader: cannot map '%s': %s", file_name_,
                     std::strerror(errno));
  uint8_t* data = static_cast<uint8_t*>(map) + lead;
  if (mlock_config_ != MlockConfig::NoMlock && ::mlock(data, size) != 0 && mlock_config_ == MlockConfig::UseMlock) {
    ::munmap(map, size + lead);
    ET_LOG(Error,
           "MmapDataLoader: cannot lock '%s' in memory (mlock refused; use "
           "MlockConfig::UseMlockIgnoreErrors or NoMlock)",
           file_name_);
    return Error::AccessFailed;
  }
  return FreeableBuffer(data, size, unmap, reinterpret_cast<void*>(static_cast<uintptr_t>(lead)));
}

}  // namespace extension
}  // namespace executorch
