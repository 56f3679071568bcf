// Core types: tensor resize rules, EValue wrong-tag safety, registry, allocator.
#include <cstring>

#include "runtime/core/evalue.h"
#include "runtime/core/memory_allocator.h"
#include "runtime/core/operator_registry.h"
#include "test/cpp/runtime/harness.h"

using namespace executorch::runtime;

RTEST(tensor_strides_follow_dim_order) {
  SizesType sizes[3] = {2, 3, 4};
  DimOrderType order[3] = {0, 2, 1};
  StridesType strides[3];
  TensorImpl t(ScalarType::Float, 3, sizes, order, strides, nullptr, 96, TensorShapeDynamism::Static);
  RCHECK(t.numel() == 24);
  RCHECK(t.nbytes() == 96);
  RCHECK(strides[1] == 1 && strides[2] == 3 && strides[0] == 12);
  RCHECK(!Tensor(&t).is_contiguous());
}

RTEST(static_tensor_resize_accepts_only_its_sizes) {
  SizesType sizes[2] = {2, 3};
  DimOrderType order[2] = {0, 1};
  StridesType strides[2];
  TensorImpl t(ScalarType::Float, 2, sizes, order, strides, nullptr, 24, TensorShapeDynamism::Static);
  int64_t same[2] = {2, 3}, other[2] = {3, 2}, rank1[1] = {6};
  RCHECK(t.resize(Span<const int64_t>(same, 2)) == Error::Ok);
  RCHECK(t.resize(Span<const int64_t>(other, 2)) == Error::NotSupported);
  RCHECK(t.resize(Span<const int64_t>(rank1, 1)) == Error::InvalidArgument);
  RCHECK(sizes[0] == 2 && sizes[1] == 3);
}

RTEST(bounded_tensor_resizes_within_capacity) {
  SizesType sizes[2] = {4, 3};
  DimOrderType order[2] = {0, 1};
  StridesType strides[2];
  TensorImpl t(ScalarType::Float, 2, sizes, order, strides, nullptr, 48, TensorShapeDynamism::DynamicBound);
  int64_t smaller[2] = {2, 3}, larger[2] = {5, 3}, huge[2] = {1 << 30, 1 << 30}, neg[2] = {-1, 3};
  RCHECK(t.resize(Span<const int64_t>(smaller, 2)) == Error::Ok);
  RCHECK(t.numel() == 6 && strides[0] == 3);
  RCHECK(t.resize(Span<const int64_t>(larger, 2)) == Error::OutOfResources);
  RCHECK(t.resize(Span<const int64_t>(huge, 2)) != Error::Ok);
  RCHECK(t.resize(Span<const int64_t>(neg, 2)) == Error::InvalidArgument);
  int64_t empty_but_wide[2] = {0, int64_t(1) << 31};
  RCHECK(t.resize(Span<const int64_t>(empty_but_wide, 2)) == Error::InvalidArgument);
  RCHECK(t.numel() == 6);
}

RTEST(evalue_wrong_tag_access_is_harmless) {
  EValue none;
  RCHECK(none.toInt() == 0);
  RCHECK(none.toTensor().numel() == 0);
  RCHECK(none.toIntList().size() == 0);
  RCHECK(none.toTensorList().size() == 0);
  RCHECK(!none.toOptionalTensor().has_value());
  EValue i(int64_t(7));
  RCHECK(i.isScalar() && i.toScalarDouble() == 7.0 && i.toDouble() == 0.0);
}

RTEST(int_list_reads_through_boxed_values) {
  EValue items[2] = {EValue(int64_t(1)), EValue(int64_t(2))};
  EValue* boxed[2] = {&items[0], &items[1]};
  int64_t unboxed[2];
  EValue list(BoxedList<int64_t>(boxed, unboxed, 2));
  items[1] = EValue(int64_t(5));  // a kernel producing a symbolic size
  Span<const int64_t> v = list.toIntList();
  RCHECK(v.size() == 2 && v[0] == 1 && v[1] == 5);
}

static void noop(KernelRuntimeContext&, Span<EValue*>) {}

RTEST(registry_rejects_duplicates_and_splits_overloads) {
  RCHECK(register_kernel({"test::noop.default", noop}) == Error::Ok);
  RCHECK(register_kernel({"test::noop.default", noop}) == Error::RegistrationAlreadyRegistered);
  RCHECK(get_op_function("test::noop", "default") == noop);
  RCHECK(get_op_function("test::noop.default") == noop);
  RCHECK(get_op_function("test::noop", "") == nullptr);
  RCHECK(get_op_function("test::noo", "pdefault") == nullptr);
}

RTEST(allocator_aligns_and_refuses_overflow) {
  alignas(16) uint8_t buf[64];
  MemoryAllocator a(buf, sizeof(buf));
  void* p = a.allocate(3, 1);
  void* q = a.allocate(8, 16);
  RCHECK(p == buf && reinterpret_cast<uintptr_t>(q) % 16 == 0);
  RCHECK(a.allocate(64) == nullptr);
  RCHECK(a.allocate(SIZE_MAX) == nullptr);
  RCHECK(a.allocate(1, 3) == nullptr);
  RCHECK(a.allocate_list<uint64_t>(SIZE_MAX / 4) == nullptr);
}

RTEST(error_names_are_stable) {
  RCHECK(std::strcmp(error_name(Error::InvalidProgram), "InvalidProgram") == 0);
  RCHECK(std::strcmp(error_name(static_cast<Error>(0x77)), "Unknown") == 0);
}
