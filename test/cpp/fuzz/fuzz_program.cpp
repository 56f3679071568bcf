// libFuzzer entry: any byte string goes through program load, method load and execute, and
// through the .ptd data map (header, index verification, every key's layout and data).
#include <vector>

#include "extension/flat_tensor/flat_tensor_data_map.h"
#include "test/cpp/runtime/exercise.h"

namespace {

void exercise_data_map(const uint8_t* data, size_t size) {
  std::vector<uint8_t> file(data, data + size);  // operator new's alignment, as the loader needs
  auto map = executorch::extension::FlatTensorDataMap::load(file.data(), file.size());
  if (!map.ok()) return;
  auto keys = map->get_num_keys();
  for (size_t i = 0; keys.ok() && i < *keys; ++i) {
    auto key = map->get_key(i);
    if (!key.ok()) continue;
    auto layout = map->get_tensor_layout(*key);
    auto bytes = map->get_data(*key);
    volatile uint8_t sink = 0;
    if (layout.ok())
      for (size_t d = 0; d < layout->sizes.size(); ++d)
        sink = sink + static_cast<uint8_t>(layout->sizes[d] + layout->dim_order[d]);
    if (bytes.ok() && bytes->size() > 0)
      sink = sink + static_cast<const uint8_t*>(bytes->data())[0] +
             static_cast<const uint8_t*>(bytes->data())[bytes->size() - 1];
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rtest::exercise(data, size);
  exercise_data_map(data, size);
  return 0;
}

// Runtime logs would drown the fuzzer's own output.
extern "C" void et_pal_emit_log(char, const char*, int, const char*, size_t) {}
