// Bundled programs on the native runtime: verify the .bpte, load its program, and for each
// test case set the inputs, execute, and compare every output with the expected tensor using
// the rule of executorch.devtools.compare (|out - exp| <= atol * max|exp| + rtol * |exp|).
#include "examples/executor_runner/bundled.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "examples/executor_runner/read_file.h"
#include "runtime/executor/hosted_method.h"
#include "runtime/executor/program.h"
#include "schema/bundled_program_schema_generated.h"

using namespace executorch::runtime;
namespace bpf = bundled_program_flatbuffer;

namespace {

double as_double(const void* p, ScalarType t, size_t i) {
  switch (t) {
    case ScalarType::Float: return static_cast<const float*>(p)[i];
    case ScalarType::Double: return static_cast<const double*>(p)[i];
    case ScalarType::Long: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case ScalarType::Int: return static_cast<const int32_t*>(p)[i];
    case ScalarType::Short: return static_cast<const int16_t*>(p)[i];
    case ScalarType::Char: return static_cast<const int8_t*>(p)[i];
    case ScalarType::Byte:
    case ScalarType::Bool: return static_cast<const uint8_t*>(p)[i];
    default: return NAN;
  }
}

// Sets input `i` from a bundled value; false (with a message) when it does not fit the method.
bool set_input(Method& method, size_t i, const bpf::Value* v, std::vector<std::vector<int64_t>>* sizes) {
  Error e = Error::InvalidArgument;
  if (v->val_type() == bpf::ValueUnion::Tensor) {
    const bpf::Tensor* t = v->val_as_Tensor();
    (*sizes)[i].clear();
    for (size_t d = 0; t->sizes() != nullptr && d < t->sizes()->size(); ++d) (*sizes)[i].push_back(t->sizes()->Get(d));
    const auto* data = t->data();
    e = method.set_input_tensor(i, static_cast<ScalarType>(t->scalar_type()),
                                Span<const int64_t>((*sizes)[i].data(), (*sizes)[i].size()),
                                data ? data->data() : nullptr, data ? data->size() : 0);
  } else if (v->val_type() == bpf::ValueUnion::Int) {
    e = method.set_input(i, EValue(static_cast<int64_t>(v->val_as_Int()->int_val())));
  } else if (v->val_type() == bpf::ValueUnion::Double) {
    e = method.set_input(i, EValue(v->val_as_Double()->double_val()));
  } else if (v->val_type() == bpf::ValueUnion::Bool) {
    e = method.set_input(i, EValue(v->val_as_Bool()->bool_val()));
  }
  if (e != Error::Ok) std::printf("  input %zu refused: %s\n", i, error_name(e));
  return e == Error::Ok;
}

// Compares output `o` with the expected tensor; returns false on a mismatch and raises *worst.
bool check_output(const EValue& out, const bpf::Value* want, size_t o, double rtol, double atol, double* worst) {
  if (!out.isTensor() || want->val_type() != bpf::ValueUnion::Tensor) {
    std::printf("  output %zu: not a tensor, or the expected value is not one\n", o);
    return false;
  }
  Tensor t = out.toTensor();
  const bpf::Tensor* e = want->val_as_Tensor();
  const auto type = static_cast<ScalarType>(e->scalar_type());
  bool same = type == t.scalar_type() && e->sizes() != nullptr && e->sizes()->size() == static_cast<size_t>(t.dim());
  for (int64_t d = 0; same && d < t.dim(); ++d) same = e->sizes()->Get(static_cast<uint32_t>(d)) == t.size(d);
  for (int64_t d = 0; same && e->dim_order() && d < t.dim(); ++d)
    same = e->dim_order()->Get(static_cast<uint32_t>(d)) == t.dim_order()[d];
  if (!same || e->data() == nullptr || e->data()->size() != t.nbytes()) {
    std::printf("  output %zu: dtype, shape or layout differ from the expected tensor\n", o);
    return false;
  }
  const size_t n = static_cast<size_t>(t.numel());
  const bool exact = type != ScalarType::Float && type != ScalarType::Double;
  double scale = 0;
  for (size_t i = 0; i < n; ++i) scale = std::fmax(scale, std::fabs(as_double(e->data()->data(), type, i)));
  size_t bad = 0;
  double err = 0;
  for (size_t i = 0; i < n; ++i) {
    double want_i = as_double(e->data()->data(), type, i), got = as_double(t.const_data_ptr(), type, i);
    double diff = std::fabs(got - want_i);
    if (std::isnan(want_i) != std::isnan(got)) diff = INFINITY;
    if (std::isnan(want_i) && std::isnan(got)) diff = 0;
    err = std::fmax(err, scale > 0 ? diff / scale : (diff > 0 ? INFINITY : 0));
    if (exact ? diff != 0 : diff > atol * scale + rtol * std::fabs(want_i)) ++bad;
  }
  *worst = std::fmax(*worst, err);
  if (bad) std::printf("  output %zu: %zu of %zu values beyond tolerance\n", o, bad, n);
  return bad == 0;
}

}  // namespace

int run_bundled(const std::string& path, double rtol, double atol, const HostedMethod::Limits& limits) {
  Bytes file;
  if (!read_file(path, ".bpte", &file)) return 1;
  flatbuffers::Verifier verifier(file.data.get(), file.size);
  if (file.size < 8 || !bpf::BundledProgramBufferHasIdentifier(file.data.get()) ||
      !bpf::VerifyBundledProgramBuffer(verifier)) {
    std::fprintf(stderr,
                 "executor_runner: %s is not a well-formed .bpte (identifier BP08, verified FlatBuffer); "
                 "the file is truncated or corrupt\n",
                 path.c_str());
    return 1;
  }
  const bpf::BundledProgram* bundle = bpf::GetBundledProgram(file.data.get());
  if (bundle->program() == nullptr || bundle->method_test_suites() == nullptr) {
    std::fprintf(stderr, "executor_runner: %s has no program or no test suites\n", path.c_str());
    return 1;
  }
  Result<Program> program = Program::load(bundle->program()->data(), bundle->program()->size());
  if (!program.ok()) {
    std::fprintf(stderr, "executor_runner: the program in %s is not loadable: %s\n", path.c_str(),
                 error_name(program.error()));
    return 1;
  }
  size_t passed = 0, total = 0;
  double worst_all = 0;
  for (const bpf::BundledMethodTestSuite* suite : *bundle->method_test_suites()) {
    const char* name = suite->method_name() ? suite->method_name()->c_str() : "";
    auto hosted = HostedMethod::load(*program, name, limits);
    if (!hosted.ok()) {
      std::fprintf(stderr, "executor_runner: cannot load method '%s': %s\n", name, error_name(hosted.error()));
      return 1;
    }
    Method& method = (*hosted)->method();
    size_t index = 0;
    for (const bpf::BundledMethodTestCase* c : *suite->test_cases()) {
      ++total;
      bool ok = c->inputs() != nullptr && c->inputs()->size() == method.inputs_size();
      if (!ok)
        std::printf("  method '%s' takes %zu inputs; the case gives %u\n", name, method.inputs_size(),
                    c->inputs() ? c->inputs()->size() : 0u);
      std::vector<std::vector<int64_t>> sizes(method.inputs_size());
      for (size_t i = 0; ok && i < method.inputs_size(); ++i) ok = set_input(method, i, c->inputs()->Get(i), &sizes);
      Error e = ok ? method.execute() : Error::InvalidArgument;
      if (ok && e != Error::Ok) {
        std::printf("  execute failed: %s\n", error_name(e));
        ok = false;
      }
      double worst = 0;
      const auto* expected = c->expected_outputs();
      if (ok && expected != nullptr && expected->size() > 0) {
        ok = expected->size() == method.outputs_size();
        if (!ok)
          std::printf("  the method returned %zu outputs; the case expects %u\n", method.outputs_size(),
                      expected->size());
        for (size_t o = 0; ok && o < expected->size(); ++o) {
          Result<const EValue*> out = method.get_output(o);
          if (!out.ok()) std::printf("  output %zu cannot be read: %s\n", o, error_name(out.error()));
          ok = out.ok() && check_output(**out, expected->Get(static_cast<uint32_t>(o)), o, rtol, atol, &worst);
        }
      }
      worst_all = std::fmax(worst_all, worst);
      passed += ok;
      std::printf("%s %s[%zu]: max rel err %.3g\n", ok ? "PASS" : "FAIL", name, index++, worst);
    }
  }
  std::printf("%s: %zu/%zu test cases passed (max rel err %.3g)\n", passed == total ? "OK" : "FAIL", passed, total,
              worst_all);
  return passed == total ? 0 : 1;
}
