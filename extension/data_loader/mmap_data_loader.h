// MmapDataLoader: maps the parts of a file that are loaded, optionally locked in RAM. The program
// then reads the file in place: truncating the file while it is in use is undefined behaviour (the
// OS raises SIGBUS on the next read of a page past the new end, even with mlock). Replace a file by
// renaming a new one over it, which a mapping of the old one survives, or use FileDataLoader.
#pragma once

#include <cstddef>

#include "runtime/core/data_loader.h"

namespace executorch {
namespace extension {

class MmapDataLoader final : public runtime::DataLoader {
 public:
  // Whether loaded pages are locked in RAM (mlock); the *IgnoreErrors form goes on when refused.
  enum class MlockConfig { NoMlock, UseMlock, UseMlockIgnoreErrors };

  // Opens `file_name`. AccessFailed (logged naming the path and the cause) when it is missing, a
  // directory, or cannot be opened or sized.
  static runtime::Result<MmapDataLoader> from(const char* file_name, MlockConfig mlock_config = MlockConfig::UseMlock);

  MmapDataLoader(MmapDataLoader&& other) noexcept;
  MmapDataLoader(const MmapDataLoader&) = delete;
  MmapDataLoader& operator=(const MmapDataLoader&) = delete;
  MmapDataLoader& operator=(MmapDataLoader&&) = delete;
  ~MmapDataLoader() override;

  runtime::Result<runtime::FreeableBuffer> load(size_t offset, size_t size,
                                                const SegmentInfo& segment_info) const override;
  runtime::Result<size_t> size() const override { return file_size_; }

 private:
  MmapDataLoader(int fd, size_t file_size, size_t page_size, MlockConfig mlock_config, char* file_name)
      : fd_(fd), file_size_(file_size), page_size_(page_size), mlock_config_(mlock_config), file_name_(file_name) {}

  int fd_;
  size_t file_size_;
  size_t page_size_;
  MlockConfig mlock_config_;
  char* file_name_;  // owned copy, for messages
};

}  // namespace extension
}  // namespace executorch
