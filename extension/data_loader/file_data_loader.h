// FileDataLoader: reads parts of a file into heap memory on each load (the file stays open).
#pragma once

#include <cstddef>

#include "runtime/core/data_loader.h"

namespace executorch {
namespace extension {

class FileDataLoader final : public runtime::DataLoader {
 public:
  // Opens `file_name`; loads return memory aligned to `alignment` (a power of two).
  // InvalidArgument for a bad alignment; AccessFailed (logged naming the path and the cause) when it
  // is missing, a directory, or cannot be opened or sized.
  static runtime::Result<FileDataLoader> from(const char* file_name, size_t alignment = alignof(std::max_align_t));

  FileDataLoader(FileDataLoader&& other) noexcept;
  FileDataLoader(const FileDataLoader&) = delete;
  FileDataLoader& operator=(const FileDataLoader&) = delete;
  FileDataLoader& operator=(FileDataLoader&&) = delete;
  ~FileDataLoader() override;

  runtime::Result<runtime::FreeableBuffer> load(size_t offset, size_t size,
                                                const SegmentInfo& segment_info) const override;
  runtime::Error load_into(size_t offset, size_t size, const SegmentInfo& segment_info, void* buffer) const override;
  runtime::Result<size_t> size() const override { return file_size_; }

 private:
  FileDataLoader(int fd, size_t file_size, size_t alignment, char* file_name)
      : fd_(fd), file_size_(file_size), alignment_(alignment), file_name_(file_name) {}

  int fd_;
  size_t file_size_;
  size_t alignment_;
  char* file_name_;  // owned copy, for messages
};

}  // namespace extension
}  // namespace executorch
