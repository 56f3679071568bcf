// ETDumpGen: events kept in tables while the program runs, serialized on request with the
// flatbuffers builder (tables laid out by hand against the published schema; no generated code).
#include "devtools/etdump/etdump_flatcc.h"

#include <cstdlib>
#include <cstring>

#include "flatbuffers/flatbuffers.h"
#include "runtime/platform/log.h"

namespace executorch {
namespace etdump {

using runtime::ChainID;
using runtime::DebugHandle;
using runtime::DelegateDebugIdType;
using runtime::DelegateDebugIntId;
using runtime::et_timestamp_t;
using runtime::EValue;
using runtime::EventTracerEntry;
using runtime::kUnsetChainId;
using runtime::kUnsetDelegateDebugIntId;
using runtime::LoggedEValueType;
using runtime::Span;
using runtime::Tensor;

namespace {

constexpr uint32_t kETDumpVersion = 0;
constexpr size_t kDebugAlignment = 64;

// The vtable offset of field `slot` of a table.
constexpr flatbuffers::voffset_t field(int slot) { return static_cast<flatbuffers::voffset_t>(4 + 2 * slot); }

// ValueType codes of the schema.
enum : int8_t { kNull = 0, kInt = 1, kBool = 2, kFloat = 3, kDouble = 4, kTensor = 5, kTensorList = 6 };

}  // namespace

ETDumpGen::ETDumpGen(Span<uint8_t> buffer) {
  if (buffer.data() != nullptr) {
    // A programming error, refused as the published ETDumpGen refuses a buffer it cannot use.
    ET_LOG(Error, "ETDumpGen keeps its events on the heap; construct it without a buffer");
    std::abort();
  }
  reset();
}

void ETDumpGen::reset() {
  strings_.clear();
  string_index_.clear();
  blocks_.clear();
  events_.clear();
  values_.clear();
  tensors_.clear();
  dims_.clear();
  metadata_.clear();
  debug_used_ = 0;
  dropped_values_ = 0;
  events_.reserve(1024);
}

int32_t ETDumpGen::intern(const char* s) {
  if (s == nullptr) return -1;
  auto it = string_index_.find(s);
  // The same address may hold another string later (a method loaded anew): compare the text too.
  if (it != string_index_.end() && strings_[static_cast<size_t>(it->second)] == s) return it->second;
  int32_t index = static_cast<int32_t>(strings_.size());
  strings_.emplace_back(s);
  string_index_[s] = index;
  return index;
}

void ETDumpGen::create_event_block(const char* name) { blocks_.push_back(Block{intern(name), events_.size()}); }

EventTracerEntry ETDumpGen::start_profiling(const char* name, ChainID chain_id, DebugHandle debug_handle) {
  EventTracerEntry entry;
  entry.event_id = intern(name);
  if (chain_id == kUnsetChainId) {
    entry.chain_id = chain_id_;
    entry.debug_handle = debug_handle_;
  } else {
    entry.chain_id = chain_id;
    entry.debug_handle = debug_handle;
  }
  entry.start_time = runtime::pal_current_ticks();
  return entry;
}

void ETDumpGen::end_profiling(EventTracerEntry entry) {
  et_timestamp_t end = runtime::pal_current_ticks();
  add_profile(static_cast<int32_t>(entry.event_id), -1, kUnsetDelegateDebugIntId, entry.chain_id, entry.debug_handle,
              entry.start_time, end, nullptr, 0);
}

EventTracerEntry ETDumpGen::start_profiling_delegate(const char* name, DelegateDebugIntId delegate_debug_id) {
  EventTracerEntry entry;
  if (name != nullptr) {
    entry.delegate_event_id_type = DelegateDebugIdType::kStr;
    entry.event_id = intern(name);
  } else {
    entry.delegate_event_id_type = DelegateDebugIdType::kInt;
    entry.event_id = delegate_debug_id;
  }
  entry.chain_id = chain_id_;
  entry.debug_handle = debug_handle_;
  entry.start_time = runtime::pal_current_ticks();
  return entry;
}

void ETDumpGen::end_profiling_delegate(EventTracerEntry entry, const void* metadata, size_t metadata_len) {
  et_timestamp_t end = runtime::pal_current_ticks();
  bool by_name = entry.delegate_event_id_type == DelegateDebugIdType::kStr;
  add_profile(-1, by_name ? static_cast<int32_t>(entry.event_id) : -1,
              by_name ? kUnsetDelegateDebugIntId : static_cast<DelegateDebugIntId>(entry.event_id), entry.chain_id,
              entry.debug_handle, entry.start_time, end, metadata, metadata_len);
}

void ETDumpGen::log_profiling_delegate(const char* name, DelegateDebugIntId delegate_debug_id,
                                       et_timestamp_t start_time, et_timestamp_t end_time, const void* metadata,
                                       size_t metadata_len) {
  add_profile(-1, intern(name), name != nullptr ? kUnsetDelegateDebugIntId : delegate_debug_id, chain_id_,
              debug_handle_, start_time, end_time, metadata, metadata_len);
}

void ETDumpGen::add_profile(int32_t name, int32_t delegate_str, int32_t delegate_int, ChainID chain,
                            DebugHandle instruction, uint64_t start, uint64_t end, const void* metadata,
                            size_t metadata_len) {
  if (blocks_.empty()) create_event_block("Default");
  Event e{};
  e.kind = Event::Kind::Profile;
  e.name = name;
  e.delegate_str = delegate_str;
  e.delegate_int = delegate_int;
  e.chain = chain;
  e.instruction = instruction;
  e.start = start;
  e.end = end;
  if (metadata != nullptr && metadata_len > 0) {
    e.metadata_offset = static_cast<uint32_t>(metadata_.size());
    e.metadata_len = static_cast<uint32_t>(metadata_len);
    const uint8_t* bytes = static_cast<const uint8_t*>(metadata);
    metadata_.insert(metadata_.end(), bytes, bytes + metadata_len);
  }
  events_.push_back(e);
}

void ETDumpGen::set_debug_buffer(Span<uint8_t> buffer) {
  debug_buffer_ = buffer;
  debug_used_ = 0;
}

bool ETDumpGen::add_tensor(const Tensor& t) {
  size_t nbytes = t.nbytes();
  size_t offset = (debug_used_ + kDebugAlignment - 1) / kDebugAlignment * kDebugAlignment;
  if (debug_buffer_.data() == nullptr || offset > debug_buffer_.size() || nbytes > debug_buffer_.size() - offset)
    return false;
  if (nbytes > 0) std::memcpy(debug_buffer_.data() + offset, t.const_data_ptr(), nbytes);
  debug_used_ = offset + nbytes;
  TensorRecord r{static_cast<int8_t>(t.scalar_type()), static_cast<uint32_t>(dims_.size() / 2),
                 static_cast<uint32_t>(t.dim()), static_cast<int64_t>(offset)};
  for (int64_t d = 0; d < t.dim(); ++d) {
    dims_.push_back(t.size(d));
    dims_.push_back(t.stride(d));
  }
  tensors_.push_back(r);
  return true;
}

void ETDumpGen::log_evalue(const EValue& evalue, LoggedEValueType evalue_type) {
  if (blocks_.empty()) create_event_block("Default");
  Value v{};
  v.output = evalue_type == LoggedEValueType::kProgramOutput;
  v.first_tensor = static_cast<uint32_t>(tensors_.size());
  if (evalue.isTensor()) {
    v.kind = Value::Kind::Tensor;
    if (!add_tensor(evalue.toTensor())) {
      ++dropped_values_;
      return;
    }
    v.num_tensors = 1;
  } else if (evalue.isTensorList()) {
    v.kind = Value::Kind::TensorList;
    size_t mark_tensors = tensors_.size(), mark_dims = dims_.size(), mark_used = debug_used_;
    for (const Tensor& t : evalue.toTensorList()) {
      if (!add_tensor(t)) {
        tensors_.resize(mark_tensors);
        dims_.resize(mark_dims);
        debug_used_ = mark_used;
        ++dropped_values_;
        return;
      }
    }
    v.num_tensors = static_cast<uint32_t>(tensors_.size() - mark_tensors);
  } else if (evalue.isInt()) {
    v.kind = Value::Kind::Int;
    v.i = evalue.toInt();
  } else if (evalue.isDouble()) {
    v.kind = Value::Kind::Double;
    v.d = evalue.toDouble();
  } else if (evalue.isBool()) {
    v.kind = Value::Kind::Bool;
    v.i = evalue.toBool() ? 1 : 0;
  } else {
    return;  // lists of scalars and None carry nothing a comparison uses
  }
  Event e{};
  e.kind = Event::Kind::Debug;
  e.name = -1;
  e.delegate_str = -1;
  e.delegate_int = kUnsetDelegateDebugIntId;
  e.chain = v.output ? kUnsetChainId : chain_id_;
  e.instruction = v.output ? 0 : debug_handle_;
  e.value = static_cast<uint32_t>(values_.size());
  values_.push_back(v);
  events_.push_back(e);
}

ETDumpResult ETDumpGen::get_etdump_data() {
  flatbuffers::FlatBufferBuilder b(1024 + events_.size() * 64);
  std::vector<flatbuffers::Offset<flatbuffers::String>> strings;
  strings.reserve(strings_.size());
  for (const std::string& s : strings_) strings.push_back(b.CreateString(s));
  auto str = [&](int32_t index) {
    return index >= 0 ? strings[static_cast<size_t>(index)] : flatbuffers::Offset<flatbuffers::String>();
  };
  auto tensor = [&](const TensorRecord& r) {
    std::vector<int64_t> sizes, strides;
    for (uint32_t d = 0; d < r.dim; ++d) {
      sizes.push_back(dims_[2 * (r.first_dim + d)]);
      strides.push_back(dims_[2 * (r.first_dim + d) + 1]);
    }
    auto s = b.CreateVector(sizes);
    auto st = b.CreateVector(strides);
    auto start = b.StartTable();
    b.AddElement<int8_t>(field(0), r.scalar_type, 0);
    b.AddOffset(field(1), s);
    b.AddOffset(field(2), st);
    b.AddElement<int64_t>(field(3), r.offset, 0);
    return flatbuffers::Offset<void>(b.EndTable(start));
  };
  auto one = [&](auto value, auto default_value) {  // Int, Bool, Double: a table of one scalar
    auto start = b.StartTable();
    b.AddElement(field(0), value, default_value);
    return flatbuffers::Offset<void>(b.EndTable(start));
  };
  std::vector<flatbuffers::Offset<void>> runs;
  for (size_t k = 0; k < blocks_.size(); ++k) {
    size_t first = blocks_[k].first_event;
    size_t last = k + 1 < blocks_.size() ? blocks_[k + 1].first_event : events_.size();
    std::vector<flatbuffers::Offset<void>> events;
    for (size_t i = first; i < last; ++i) {
      const Event& e = events_[i];
      flatbuffers::Offset<void> inner;
      int slot;
      if (e.kind == Event::Kind::Profile) {
        flatbuffers::Offset<flatbuffers::Vector<uint8_t>> meta;
        if (e.metadata_len > 0) meta = b.CreateVector(metadata_.data() + e.metadata_offset, e.metadata_len);
        auto start = b.StartTable();
        if (e.name >= 0) b.AddOffset(field(0), str(e.name));
        b.AddElement<int32_t>(field(1), e.chain, 0);
        b.AddElement<int32_t>(field(2), static_cast<int32_t>(e.instruction), -1);
        b.AddElement<int32_t>(field(3), e.delegate_int, -1);
        if (e.delegate_str >= 0) b.AddOffset(field(4), str(e.delegate_str));
        if (e.metadata_len > 0) b.AddOffset(field(5), meta);
        b.AddElement<uint64_t>(field(6), e.start, 0);
        b.AddElement<uint64_t>(field(7), e.end, 0);
        inner = flatbuffers::Offset<void>(b.EndTable(start));
        slot = 0;
      } else {
        const Value& v = values_[e.value];
        flatbuffers::Offset<void> payload, output;
        int8_t type = kNull;
        int payload_slot = 0;
        switch (v.kind) {
          case Value::Kind::Tensor: type = kTensor, payload_slot = 1, payload = tensor(tensors_[v.first_tensor]); break;
          case Value::Kind::TensorList: {
            std::vector<flatbuffers::Offset<void>> items;
            for (uint32_t t = 0; t < v.num_tensors; ++t) items.push_back(tensor(tensors_[v.first_tensor + t]));
            auto vec = b.CreateVector(items);
            auto start = b.StartTable();
            b.AddOffset(field(0), vec);
            type = kTensorList, payload_slot = 2, payload = flatbuffers::Offset<void>(b.EndTable(start));
            break;
          }
          case Value::Kind::Int:
            type = kInt, payload_slot = 3, payload = one(static_cast<int64_t>(v.i), int64_t(0));
            break;
          case Value::Kind::Double: type = kDouble, payload_slot = 5, payload = one(v.d, 0.0); break;
          case Value::Kind::Bool:
            type = kBool, payload_slot = 6, payload = one(static_cast<uint8_t>(v.i), uint8_t(0));
            break;
          case Value::Kind::Null: break;
        }
        if (v.output) output = one(uint8_t(1), uint8_t(0));
        auto vstart = b.StartTable();
        b.AddElement<int8_t>(field(0), type, 0);
        if (payload_slot) b.AddOffset(field(payload_slot), payload);
        if (v.output) b.AddOffset(field(7), output);
        auto value = flatbuffers::Offset<void>(b.EndTable(vstart));
        auto start = b.StartTable();
        // chain_index is unsigned in DebugEvent: -1 is written as its two's complement, as upstream does.
        b.AddElement<uint64_t>(field(0), static_cast<uint64_t>(static_cast<int64_t>(e.chain)), 0);
        b.AddElement<int32_t>(field(1), static_cast<int32_t>(e.instruction), -1);
        b.AddOffset(field(2), value);
        b.AddElement<int32_t>(field(3), e.delegate_int, -1);
        inner = flatbuffers::Offset<void>(b.EndTable(start));
        slot = 2;
      }
      auto start = b.StartTable();
      b.AddOffset(field(slot), inner);
      events.push_back(flatbuffers::Offset<void>(b.EndTable(start)));
    }
    auto events_vec = b.CreateVector(events);
    auto start = b.StartTable();
    b.AddOffset(field(0), str(blocks_[k].name));
    b.AddElement<int32_t>(field(1), -1, -1);
    b.AddOffset(field(3), events_vec);
    runs.push_back(flatbuffers::Offset<void>(b.EndTable(start)));
  }
  auto runs_vec = b.CreateVector(runs);
  auto start = b.StartTable();
  b.AddElement<uint32_t>(field(0), kETDumpVersion, 0);
  b.AddOffset(field(1), runs_vec);
  auto root = flatbuffers::Offset<void>(b.EndTable(start));
  b.FinishSizePrefixed(root, "ED00");
  ETDumpResult result;
  result.size = b.GetSize();
  result.buf = std::malloc(result.size == 0 ? 1 : result.size);
  if (result.buf == nullptr) return ETDumpResult();
  std::memcpy(result.buf, b.GetBufferPointer(), result.size);
  return result;
}

}  // namespace etdump
}  // namespace executorch
