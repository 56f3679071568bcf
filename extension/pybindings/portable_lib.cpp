// _portable_lib: the native runtime for Python. Tensors cross as (address, bytes,
// dtype, sizes) so neither numpy nor libtorch is linked; runtime/_native.py adapts
// this module to the executorch.runtime backend protocol.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "extension/flat_tensor/flat_tensor_data_map.h"
#if EXECUTORCH_HAVE_PORTABLE_KERNELS
#include "kernels/cpu/threadpool.h"
#endif
#include "devtools/etdump/etdump_flatcc.h"
#include "runtime/core/operator_registry.h"
#include "runtime/executor/hosted_method.h"
#include "runtime/backend/interface.h"
#include "runtime/executor/program.h"

namespace py = pybind11;
using namespace executorch::runtime;

namespace {

// The last error logged by the runtime on this thread, and the first since the call began: a
// backend logs the cause, then the runtime logs what failed; exceptions carry both.
thread_local std::string g_last_error;
thread_local std::string g_first_error;
bool g_echo_logs = false;

}  // namespace

extern "C" void et_pal_emit_log(char level, const char* file, int line, const char* message, size_t length) {
  if (level == 'E' || level == 'F') {
    g_last_error.assign(message, length);
    if (g_first_error.empty()) g_first_error = g_last_error;
  }
  if (g_echo_logs) std::fprintf(stderr, "%c %s:%d] %.*s\n", level, file, line, static_cast<int>(length), message);
}

namespace {

// Carries an Error out of the bindings; Python sees NativeError(code, name, message).
struct NativeError {
  Error error;
  std::string message;
};

[[noreturn]] void raise(Error error, const std::string& what) {
  std::string message = what;
  if (!g_last_error.empty()) message += ": " + g_last_error;
  if (g_first_error != g_last_error) message += " (cause: " + g_first_error + ")";
  g_last_error.clear();
  g_first_error.clear();
  throw NativeError{error, message};
}

void check(Error error, const std::string& what) {
  if (error != Error::Ok) raise(error, what);
}

void begin() {
  g_last_error.clear();
  g_first_error.clear();
}

struct OwnedProgram {
  std::unique_ptr<uint8_t, void (*)(void*)> data{nullptr, std::free};
  size_t size = 0;
  std::optional<Program> program;
  // The .ptd: used in place when the caller's buffer (e.g. a memory map) is 16-byte aligned,
  // else copied; the buffer view keeps the caller's object alive and unresizable.
  std::unique_ptr<py::buffer_info> external_view;
  std::unique_ptr<uint8_t, void (*)(void*)> external_copy{nullptr, std::free};
  std::optional<executorch::extension::FlatTensorDataMap> external;
  // Memory id 2, shared by every method of the program (made when the first method loads).
  std::shared_ptr<SharedArena> shared;
  // With enable_etdump: the tracer every method of the program reports to, and its debug buffer.
  std::unique_ptr<executorch::etdump::ETDumpGen> etdump;
  std::vector<uint8_t> debug_buffer;
};

py::object tensor_info(Result<TensorInfo> info, Result<Tag> tag) {
  if (!tag.ok()) raise(tag.error(), "cannot read the method's inputs/outputs");
  if (*tag != Tag::Tensor) return py::make_tuple(tag_name(*tag));
  if (!info.ok()) raise(info.error(), "cannot read tensor metadata");
  std::vector<int64_t> sizes(info->sizes.begin(), info->sizes.end());
  std::vector<int> order(info->dim_order.begin(), info->dim_order.end());
  return py::make_tuple("Tensor", static_cast<int>(info->scalar_type), sizes, order, static_cast<int>(info->dynamism),
                        info->is_memory_planned);
}

py::tuple meta_tuple(const MethodMeta& meta) {
  py::list inputs, outputs, planned;
  for (size_t i = 0; i < meta.num_inputs(); ++i)
    inputs.append(tensor_info(meta.input_tensor_info(i), meta.input_tag(i)));
  for (size_t i = 0; i < meta.num_outputs(); ++i)
    outputs.append(tensor_info(meta.output_tensor_info(i), meta.output_tag(i)));
  return py::make_tuple(std::string(meta.name()), inputs, outputs);
}

class PyMethod {
 public:
  PyMethod(std::shared_ptr<OwnedProgram> program, std::unique_ptr<HostedMethod> hosted)
      : program_(std::move(program)), hosted_(std::move(hosted)) {}

  py::tuple meta() const { return meta_tuple(hosted_->method().method_meta()); }
  size_t inputs_size() const { return hosted_->method().inputs_size(); }
  size_t outputs_size() const { return hosted_->method().outputs_size(); }

  void set_input_tensor(size_t index, uintptr_t address, size_t nbytes, int dtype, const std::vector<int64_t>& sizes) {
    begin();
    check(hosted_->method().set_input_tensor(index, static_cast<ScalarType>(dtype),
                                             Span<const int64_t>(sizes.data(), sizes.size()),
                                             reinterpret_cast<const void*>(address), nbytes),
          "input " + std::to_string(index) + " was refused");
  }

  void set_input_scalar(size_t index, py::handle value) {
    begin();
    EValue v;
    Result<const EValue*> current = hosted_->method().get_input(index);
    bool wants_double = current.ok() && (*current)->isDouble();
    if (py::isinstance<py::bool_>(value))
      v = EValue(value.cast<bool>());
    else if (py::isinstance<py::int_>(value) && wants_double)
      v = EValue(value.cast<double>());
    else if (py::isinstance<py::int_>(value))
      v = EValue(value.cast<int64_t>());
    else if (py::isinstance<py::float_>(value))
      v = EValue(value.cast<double>());
    else
      throw py::type_error("input " + std::to_string(index) + " must be a tensor, int, float or bool");
    check(hosted_->method().set_input(index, v), "input " + std::to_string(index) + " was refused");
  }

  void execute() {
    begin();
    Error e;
    {
      // The GIL is released while running; the lock keeps two threads out of one method.
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(*running_);
      e = hosted_->method().execute();
    }
    check(e, "method '" + std::string(hosted_->method().method_meta().name()) + "' failed");
  }

  // ("Tensor", dtype, sizes, dim_order, nbytes) or ("Int", value) etc.
  py::tuple output(size_t index) const {
    begin();
    Result<const EValue*> out = hosted_->method().get_output(index);
    if (!out.ok()) raise(out.error(), "no output " + std::to_string(index));
    const EValue& v = **out;
    switch (v.tag()) {
      case Tag::Tensor: {
        Tensor t = v.toTensor();
        std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
        std::vector<int> order(t.dim_order().begin(), t.dim_order().end());
        return py::make_tuple("Tensor", static_cast<int>(t.scalar_type()), sizes, order, t.nbytes());
      }
      case Tag::Int: return py::make_tuple("Int", v.toInt());
      case Tag::Double: return py::make_tuple("Double", v.toDouble());
      case Tag::Bool: return py::make_tuple("Bool", v.toBool());
      case Tag::None: return py::make_tuple("None", py::none());
      case Tag::String: {
        std::string_view sv = v.toString();
        return py::make_tuple("String", py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(
                                            sv.data(), static_cast<Py_ssize_t>(sv.size()), "replace")));
      }
      default: return py::make_tuple(tag_name(v.tag()), py::none());
    }
  }

  void copy_output(size_t index, uintptr_t address, size_t nbytes) const {
    begin();
    Result<const EValue*> out = hosted_->method().get_output(index);
    if (!out.ok()) raise(out.error(), "no output " + std::to_string(index));
    if (!(*out)->isTensor()) raise(Error::InvalidArgument, "output " + std::to_string(index) + " is not a tensor");
    Tensor t = (*out)->toTensor();
    if (nbytes != t.nbytes())
      raise(Error::InvalidArgument, "output " + std::to_string(index) + " holds " + std::to_string(t.nbytes()) +
                                        " bytes, not " + std::to_string(nbytes));
    if (nbytes > 0) std::memcpy(reinterpret_cast<void*>(address), t.const_data_ptr(), nbytes);
  }

 private:
  std::shared_ptr<OwnedProgram> program_;
  std::unique_ptr<HostedMethod> hosted_;
  std::unique_ptr<std::mutex> running_ = std::make_unique<std::mutex>();
};

class PyProgram {
 public:
  // Copies `data` into 16-byte aligned, writable memory the program owns.
  // `etdump` >= 0 records an ETDump with a debug buffer of that many bytes (0: timings only).
  PyProgram(py::buffer data, bool verify, py::object external, int64_t etdump)
      : owned_(std::make_shared<OwnedProgram>()) {
    begin();
    if (etdump >= 0) {
      owned_->etdump = std::make_unique<executorch::etdump::ETDumpGen>();
      if (etdump > 0) {
        owned_->debug_buffer.assign(static_cast<size_t>(etdump), 0);
        owned_->etdump->set_debug_buffer(Span<uint8_t>(owned_->debug_buffer.data(), owned_->debug_buffer.size()));
        owned_->etdump->set_event_tracer_debug_level(EventTracerDebugLogLevel::kIntermediateOutputs);
      }
    }
    py::buffer_info info = data.request();
    size_t size = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
    owned_->data.reset(static_cast<uint8_t*>(std::aligned_alloc(16, (size + 15) / 16 * 16 + 16)));
    if (owned_->data == nullptr) throw std::bad_alloc();
    std::memcpy(owned_->data.get(), info.ptr, size);
    owned_->size = size;
    // Minimal skips the FlatBuffer verifier; only used when asked, for trusted files.
    Result<Program> program = Program::load(
        owned_->data.get(), size, verify ? Program::Verification::InternalConsistency : Program::Verification::Minimal);
    if (!program.ok()) raise(program.error(), "cannot load the program");
    owned_->program.emplace(std::move(*program));
    if (!external.is_none()) load_external(py::reinterpret_borrow<py::buffer>(external));
  }

  py::list method_names() const {
    py::list names;
    for (size_t i = 0; i < owned_->program->num_methods(); ++i) {
      Result<const char*> name = owned_->program->get_method_name(i);
      if (!name.ok()) raise(name.error(), "cannot read method names");
      PyObject* decoded = PyUnicode_DecodeUTF8(*name, static_cast<Py_ssize_t>(std::strlen(*name)), "strict");
      if (decoded == nullptr) {
        PyErr_Clear();
        raise(Error::InvalidProgram, "method " + std::to_string(i) + "'s name is not valid UTF-8");
      }
      names.append(py::reinterpret_steal<py::str>(decoded));
    }
    return names;
  }

  py::tuple method_meta(const std::string& name) const {
    begin();
    Result<MethodMeta> meta = owned_->program->method_meta(name.c_str());
    if (!meta.ok()) raise(meta.error(), "no method '" + name + "'");
    py::tuple t = meta_tuple(*meta);
    py::list planned;
    for (size_t i = 0; i < meta->num_memory_planned_buffers(); ++i) {
      Result<int64_t> size = meta->memory_planned_buffer_size(i);
      if (!size.ok()) raise(size.error(), "cannot read the memory plan");
      planned.append(*size);
    }
    return py::make_tuple(t[0], t[1], t[2], planned);
  }

  PyMethod load_method(const std::string& name) const {
    begin();
    HostedMethod::Limits limits;  // the core's instruction limit stops a program that loops forever
    if (owned_->shared == nullptr) {
      auto shared = SharedArena::make(*owned_->program, limits.max_planned_bytes);
      if (!shared.ok()) raise(shared.error(), "cannot plan the program's shared memory");
      owned_->shared = std::move(*shared);
    }
    auto hosted =
        HostedMethod::load(*owned_->program, name.c_str(), limits, owned_->external ? &*owned_->external : nullptr,
                           owned_->shared, owned_->etdump.get());
    if (!hosted.ok()) raise(hosted.error(), "cannot load method '" + name + "'");
    return PyMethod(owned_, std::move(*hosted));
  }

  bool has_etdump() const { return owned_->etdump != nullptr; }

  py::bytes etdump_data() const {
    if (owned_->etdump == nullptr) raise(Error::InvalidState, "the program was loaded without enable_etdump");
    executorch::etdump::ETDumpResult result = owned_->etdump->get_etdump_data();
    if (result.buf == nullptr) throw std::bad_alloc();
    py::bytes out(static_cast<const char*>(result.buf), result.size);
    std::free(result.buf);
    return out;
  }

  py::bytes debug_buffer() const {
    return py::bytes(reinterpret_cast<const char*>(owned_->debug_buffer.data()), owned_->debug_buffer.size());
  }

 private:
  void load_external(py::buffer buffer) {
    owned_->external_view = std::make_unique<py::buffer_info>(buffer.request());
    const py::buffer_info& info = *owned_->external_view;
    size_t size = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
    const void* bytes = info.ptr;
    if (reinterpret_cast<uintptr_t>(bytes) % 16 != 0) {
      owned_->external_copy.reset(static_cast<uint8_t*>(std::aligned_alloc(16, (size + 15) / 16 * 16 + 16)));
      if (owned_->external_copy == nullptr) throw std::bad_alloc();
      std::memcpy(owned_->external_copy.get(), bytes, size);
      bytes = owned_->external_copy.get();
      owned_->external_view.reset();
    }
    auto map = executorch::extension::FlatTensorDataMap::load(bytes, size);
    if (!map.ok()) raise(map.error(), "cannot load the data file (.ptd)");
    owned_->external.emplace(std::move(*map));
  }

  std::shared_ptr<OwnedProgram> owned_;
};

}  // namespace

PYBIND11_MODULE(_portable_lib, m) {
  m.doc() = "Native ExecuTorch runtime (portable kernels); use executorch.runtime instead.";
  // Leaked on purpose: the exception type must outlive interpreter teardown order.
  static auto* native_error = new py::exception<NativeError>(m, "NativeError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NativeError& e) {
      // args: (code, error name, message).
      // Messages can quote file content; undecodable bytes must not hide the error.
      py::str message = py::reinterpret_steal<py::str>(
          PyUnicode_DecodeUTF8(e.message.data(), static_cast<Py_ssize_t>(e.message.size()), "replace"));
      py::tuple args = py::make_tuple(static_cast<uint32_t>(e.error), error_name(e.error), message);
      PyErr_SetObject(native_error->ptr(), args.ptr());
    }
  });
  m.def(
      "set_log_echo", [](bool on) { g_echo_logs = on; },
      "Print the runtime's log lines to stderr (off by default; errors reach exceptions anyway).");
  m.def("registered_kernels", [] {
    std::vector<std::string> names;
    for (const Kernel& k : registered_kernels()) names.emplace_back(k.name);
    return names;
  });
  m.def("registered_backends", [] {
    std::vector<std::string> names;
    for (size_t i = 0; i < get_num_registered_backends(); ++i) names.emplace_back(*get_backend_name(i));
    return names;
  });
  m.def("error_name", [](uint32_t code) { return std::string(error_name(static_cast<Error>(code))); });
#if EXECUTORCH_HAVE_PORTABLE_KERNELS
  namespace tp = executorch::extension::threadpool;
  m.def(
      "_unsafe_reset_threadpool",
      [](int64_t num_threads) {
        if (num_threads < 1 || num_threads > static_cast<int64_t>(tp::kMaxThreads))
          throw py::value_error("num_threads=" + std::to_string(num_threads) + ": the kernels' thread pool takes 1.." +
                                std::to_string(tp::kMaxThreads) + " threads; pass a count in that range");
        tp::get_threadpool()->_unsafe_reset_threadpool(static_cast<uint32_t>(num_threads));
      },
      py::arg("num_threads"), py::call_guard<py::gil_scoped_release>(),
      "Resize the kernels' thread pool (waits for a running task; not from inside one).");
  m.def(
      "_threadpool_get_thread_count", [] { return tp::get_threadpool()->get_thread_count(); },
      "Threads the kernels use, counting the calling thread.");
  m.def(
      "_threadpool_env_ok",
      [] {
        uint32_t n = 0;
        return tp::num_threads_from_env(&n);
      },
      "Whether EXECUTORCH_NUM_THREADS is unset or a valid thread count.");
#else
  // Without kernels nothing runs on threads: one thread, and resizing is refused.
  m.def(
      "_unsafe_reset_threadpool",
      [](int64_t) {
        throw std::runtime_error(
            "_unsafe_reset_threadpool: this build has no portable kernels, so no "
            "thread pool; build with EXECUTORCH_BUILD_PORTABLE_KERNELS=ON");
      },
      py::arg("num_threads"));
  m.def("_threadpool_get_thread_count", [] { return size_t{1}; });
  m.def("_threadpool_env_ok", [] { return true; });
#endif

  py::class_<PyMethod>(m, "Method")
      .def("meta", &PyMethod::meta)
      .def("inputs_size", &PyMethod::inputs_size)
      .def("outputs_size", &PyMethod::outputs_size)
      .def("set_input_tensor", &PyMethod::set_input_tensor, py::arg("index"), py::arg("address"), py::arg("nbytes"),
           py::arg("dtype"), py::arg("sizes"))
      .def("set_input_scalar", &PyMethod::set_input_scalar)
      .def("execute", &PyMethod::execute)
      .def("output", &PyMethod::output)
      .def("copy_output", &PyMethod::copy_output, py::arg("index"), py::arg("address"), py::arg("nbytes"));

  py::class_<PyProgram>(m, "Program")
      .def(py::init<py::buffer, bool, py::object, int64_t>(), py::arg("data"), py::arg("verify") = true,
           py::arg("external") = py::none(), py::arg("etdump") = -1)
      .def("method_names", &PyProgram::method_names)
      .def("method_meta", &PyProgram::method_meta)
      .def("load_method", &PyProgram::load_method)
      .def("has_etdump", &PyProgram::has_etdump)
      .def("etdump_data", &PyProgram::etdump_data)
      .def("debug_buffer", &PyProgram::debug_buffer);
}
