// The .ptd data map: a well-formed file's keys, layouts and bytes; every truncation refused;
// bit flips survived.
#include <cstring>
#include <string>

#include "extension/flat_tensor/flat_tensor_data_map.h"
#include "test/cpp/runtime/harness.h"

using executorch::extension::FlatTensorDataMap;
using namespace executorch::runtime;

RTEST(data_map_reads_keys_layouts_and_bytes) {
  auto file = rtest::read_file(rtest::fixture("ptd/two_linear.ptd"));
  RCHECK(!file.empty());
  auto map = FlatTensorDataMap::load(file.data(), file.size());
  RCHECK(map.ok());
  RCHECK(map->get_num_keys().ok() && *map->get_num_keys() == 4);
  auto layout = map->get_tensor_layout("first.weight");
  RCHECK(layout.ok() && layout->scalar_type == ScalarType::Float && layout->sizes.size() == 2);
  RCHECK(layout->sizes[0] == 5 && layout->sizes[1] == 6 && layout->dim_order[0] == 0 && layout->dim_order[1] == 1);
  auto bytes = map->get_data("first.weight");
  RCHECK(bytes.ok() && bytes->size() == 5 * 6 * 4);
  RCHECK(static_cast<const uint8_t*>(bytes->data()) >= file.data() &&
         static_cast<const uint8_t*>(bytes->data()) + bytes->size() <= file.data() + file.size());
  RCHECK(map->get_data("no.such.key").error() == Error::NotFound);
  RCHECK(map->get_tensor_layout("no.such.key").error() == Error::NotFound);
  RCHECK(!map->get_key(4).ok());
}

RTEST(data_map_refuses_every_truncation) {
  auto file = rtest::read_file(rtest::fixture("ptd/two_linear.ptd"));
  for (size_t n = 0; n < file.size(); ++n) {
    std::vector<uint8_t> cut(file.begin(), file.begin() + static_cast<long>(n));
    RCHECK(!FlatTensorDataMap::load(cut.data(), cut.size()).ok());
  }
}

RTEST(data_map_survives_every_bit_flip_in_its_index) {
  auto file = rtest::read_file(rtest::fixture("ptd/two_linear.ptd"));
  for (size_t i = 0; i < 512 && i < file.size(); ++i) {
    for (int bit = 0; bit < 8; bit += 3) {
      std::vector<uint8_t> bad(file);
      bad[i] ^= static_cast<uint8_t>(1u << bit);
      auto map = FlatTensorDataMap::load(bad.data(), bad.size());
      if (!map.ok()) continue;
      auto keys = map->get_num_keys();
      for (size_t k = 0; keys.ok() && k < *keys; ++k) {
        auto key = map->get_key(k);
        if (!key.ok()) continue;
        auto layout = map->get_tensor_layout(*key);
        auto bytes = map->get_data(*key);
        if (bytes.ok()) RCHECK(static_cast<const uint8_t*>(bytes->data()) + bytes->size() <= bad.data() + bad.size());
        (void)layout;
      }
    }
  }
}
