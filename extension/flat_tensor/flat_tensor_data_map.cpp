// FlatTensorDataMap: header checks, FlatBuffer verification and bounds-checked lookups.
#include "extension/flat_tensor/flat_tensor_data_map.h"

#include <cstring>

#include "schema/flat_tensor_generated.h"

namespace executorch {
namespace extension {
namespace {

namespace ft = flat_tensor_flatbuffer;

constexpr size_t kHeaderOffset = 8;  // after the root offset and the file identifier
constexpr size_t kHeaderLength = 40;

uint64_t read_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));  // the file is little endian, as every supported host
  return v;
}

bool add_ok(uint64_t a, uint64_t b, uint64_t* out) {
  *out = a + b;
  return *out >= a;
}

}  // namespace

Result<FlatTensorDataMap> FlatTensorDataMap::load(const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  ET_CHECK_OR_RETURN(p != nullptr && size >= kHeaderOffset + kHeaderLength, InvalidExternalData,
                     "the .ptd is %zu bytes, too short for its header (%zu); the file is truncated", size,
                     kHeaderOffset + kHeaderLength);
  ET_CHECK_OR_RETURN(std::memcmp(p + 4, "FT01", 4) == 0 && std::memcmp(p + kHeaderOffset, "FH01", 4) == 0,
                     InvalidExternalData,
                     "not a .ptd file (no FT01 identifier and FH01 header); check the data file path");
  uint32_t length;
  std::memcpy(&length, p + kHeaderOffset + 4, sizeof(length));
  const uint64_t fb_offset = read_u64(p + kHeaderOffset + 8);
  const uint64_t fb_size = read_u64(p + kHeaderOffset + 16);
  const uint64_t base = read_u64(p + kHeaderOffset + 24);
  const uint64_t data_size = read_u64(p + kHeaderOffset + 32);
  uint64_t fb_end = 0, data_end = 0;
  ET_CHECK_OR_RETURN(length >= kHeaderLength && fb_offset >= kHeaderOffset + length &&
                         add_ok(fb_offset, fb_size, &fb_end) && fb_end <= size,
                     InvalidExternalData,
                     "the .ptd header (length %u) places its index at %llu..+%llu, outside the %zu-byte file; "
                     "the file is truncated or corrupt",
                     length, static_cast<unsigned long long>(fb_offset), static_cast<unsigned long long>(fb_size),
                     size);
  ET_CHECK_OR_RETURN(add_ok(base, data_size, &data_end) && data_end <= size && (data_size == 0 || base >= fb_end),
                     InvalidExternalData,
                     "the .ptd header says %llu bytes of tensor data start at %llu, outside the %zu-byte file; "
                     "the file is truncated or corrupt",
                     static_cast<unsigned long long>(data_size), static_cast<unsigned long long>(base), size);
  ET_CHECK_OR_RETURN(reinterpret_cast<uintptr_t>(p) % 16 == 0, InvalidArgument,
                     "the .ptd data must be 16-byte aligned in memory");
  flatbuffers::Verifier verifier(p, static_cast<size_t>(fb_end));
  ET_CHECK_OR_RETURN(ft::VerifyFlatTensorBuffer(verifier), InvalidExternalData,
                     "the .ptd index fails FlatBuffer verification; the file is corrupt");
  const ft::FlatTensor* root = ft::GetFlatTensor(p);
  ET_CHECK_OR_RETURN(root->segments() != nullptr && root->named_data() != nullptr, InvalidExternalData,
                     "the .ptd index has no segments or no named_data; the file is corrupt");
  return FlatTensorDataMap(p, root, base, data_size);
}

Result<const ft::NamedData*> FlatTensorDataMap::find(const char* key) const {
  const auto* entries = root_->named_data();
  for (size_t i = 0; i < entries->size(); ++i) {
    const ft::NamedData* e = entries->Get(i);
    if (e == nullptr || e->key() == nullptr || std::strcmp(e->key()->c_str(), key) != 0) continue;
    const auto* segments = root_->segments();
    ET_CHECK_OR_RETURN(e->segment_index() < segments->size(), InvalidExternalData,
                       ".ptd entry '%s' names segment %u; the file has %u", key, e->segment_index(), segments->size());
    const ft::DataSegment* s = segments->Get(e->segment_index());
    uint64_t end = 0;
    ET_CHECK_OR_RETURN(s != nullptr && add_ok(s->offset(), s->size(), &end) && end <= data_size_, InvalidExternalData,
                       ".ptd entry '%s' lies outside the file's %llu bytes of tensor data; the file is corrupt", key,
                       static_cast<unsigned long long>(data_size_));
    return e;
  }
  return Error::NotFound;
}

Result<FreeableBuffer> FlatTensorDataMap::get_data(const char* key) const {
  Result<const ft::NamedData*> e = find(key);
  if (!e.ok()) return e.error();
  const ft::DataSegment* s = root_->segments()->Get((*e)->segment_index());
  return FreeableBuffer(data_ + base_ + s->offset(), static_cast<size_t>(s->size()));
}

Result<size_t> FlatTensorDataMap::get_num_keys() const { return static_cast<size_t>(root_->named_data()->size()); }

Result<const char*> FlatTensorDataMap::get_key(size_t index) const {
  const auto* entries = root_->named_data();
  ET_CHECK_OR_RETURN(index < entries->size() && entries->Get(index)->key() != nullptr, InvalidArgument,
                     ".ptd entry %zu is out of range or has no key", index);
  return entries->Get(index)->key()->c_str();
}

Result<TensorLayout> FlatTensorDataMap::get_tensor_layout(const char* key) const {
  Result<const ft::NamedData*> e = find(key);
  if (!e.ok()) return e.error();
  const ft::TensorLayout* layout = (*e)->tensor_layout();
  if (layout == nullptr) return Error::NotSupported;
  const auto* sizes = layout->sizes();
  const auto* order = layout->dim_order();
  const size_t dim = sizes ? sizes->size() : 0;
  ET_CHECK_OR_RETURN((order ? order->size() : 0) == dim, InvalidExternalData,
                     ".ptd entry '%s' has %zu sizes but %u dim_order entries; the file is corrupt", key, dim,
                     order ? order->size() : 0u);
  const auto type = static_cast<runtime::ScalarType>(layout->scalar_type());
  ET_CHECK_OR_RETURN(runtime::is_valid_scalar_type(type), InvalidExternalData,
                     ".ptd entry '%s' has unknown scalar type %d; the file is corrupt", key,
                     static_cast<int>(layout->scalar_type()));
  return TensorLayout{type, runtime::Span<const int32_t>(dim ? sizes->data() : nullptr, dim),
                      runtime::Span<const uint8_t>(dim ? order->data() : nullptr, dim)};
}

Result<const void*> FlatTensorDataMap::get_tensor(const char* key, runtime::ScalarType type,
                                                  runtime::Span<const int32_t> sizes,
                                                  runtime::Span<const uint8_t> dim_order, size_t nbytes) const {
  Result<TensorLayout> layout = get_tensor_layout(key);
  ET_CHECK_OR_RETURN(layout.error() != Error::NotFound, NotFound,
                     "the .ptd has no tensor '%s'; pass the .ptd written with this .pte", key);
  if (layout.ok()) {
    bool same = layout->scalar_type == type && layout->sizes.size() == sizes.size();
    for (size_t i = 0; same && i < sizes.size(); ++i)
      same = layout->sizes[i] == sizes[i] && layout->dim_order[i] == dim_order[i];
    ET_CHECK_OR_RETURN(same, InvalidExternalData,
                       "tensor '%s' in the .ptd is %s with %zu dims; the program needs %s with %zu dims and the "
                       "same sizes and dim order; pass the .ptd written with this .pte",
                       key, runtime::scalar_type_name(layout->scalar_type), layout->sizes.size(),
                       runtime::scalar_type_name(type), sizes.size());
  } else if (layout.error() != Error::NotSupported) {
    return layout.error();
  }
  Result<FreeableBuffer> bytes = get_data(key);
  if (!bytes.ok()) return bytes.error();
  ET_CHECK_OR_RETURN(bytes->size() == nbytes, InvalidExternalData,
                     "tensor '%s' in the .ptd holds %zu bytes; the program needs %zu; pass the .ptd written "
                     "with this .pte",
                     key, bytes->size(), nbytes);
  return bytes->data();
}

}  // namespace extension
}  // namespace executorch
