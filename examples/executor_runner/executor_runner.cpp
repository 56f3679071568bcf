// executor_runner: loads a .pte, fills the inputs (files, ones, zeros or random),
// runs a method N times and prints an output summary and timing.
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "devtools/etdump/etdump_flatcc.h"
#include "examples/executor_runner/bundled.h"
#include "examples/executor_runner/read_file.h"
#include "extension/flat_tensor/flat_tensor_data_map.h"
#include "runtime/executor/hosted_method.h"
#include "runtime/executor/program.h"
#if EXECUTORCH_HAVE_PORTABLE_KERNELS
#include "kernels/cpu/threadpool.h"
#endif

using namespace executorch::runtime;

namespace {

const char kUsage[] =
    "usage: executor_runner --model_path FILE.pte [--data_path FILE.ptd] [--method NAME] [--iterations N]\n"
    "       executor_runner --bundled FILE.bpte [--rtol R] [--atol A]\n"
    "                       [--inputs A.bin,B.bin,...] [--fill ones|zeros|random] [--seed S]\n"
    "                       [--output_dir DIR] [--num_threads N] [--max_instructions N] [--verbose] [--help]\n"
    "                       [--etdump_path F.etdp [--debug_output_path F.bin --debug_buffer_size N]]\n"
    "  --bundled     run every test case of a bundled program and report each (exit 1 on a failure);\n"
    "                tolerances as executorch.devtools.compare (default 1e-5 and 1e-5)\n"
    "  --data_path   the .ptd file holding the tensors the program keeps outside the .pte\n"
    "  --inputs      raw little-endian tensor data, one file per input, in the input's\n"
    "                dtype and dim order at its declared sizes\n"
    "  --fill        how to make inputs not given by --inputs (default: ones)\n"
    "  --output_dir  also write each tensor output as DIR/output_<i>.bin\n"
    "  --num_threads threads the kernels use (default: $EXECUTORCH_NUM_THREADS, else every\n"
    "                available CPU)\n"
    "  --max_instructions  stop a run that executes more instructions than this, as a program\n"
    "                that loops forever would (default 10000000, the runtime's; 0: no limit)\n"
    "  --etdump_path profile the load and every iteration, write the ETDump there (read it with\n"
    "                executorch.devtools.Inspector)\n"
    "  --debug_output_path, --debug_buffer_size  also record every kernel's output in a debug\n"
    "                buffer of N bytes, written to that file\n";

struct Options {
  std::string model_path;
  std::string data_path;
  std::string bundled;
  double rtol = 1e-5;
  double atol = 1e-5;
  std::string method = "forward";
  int iterations = 1;
  std::vector<std::string> inputs;
  std::string fill = "ones";
  uint32_t seed = 0;
  std::string output_dir;
  bool verbose = false;
  long num_threads = 0;  // 0: the environment's or the default
  std::string etdump_path;
  std::string debug_output_path;
  long long debug_buffer_size = 0;
  long long max_instructions = static_cast<long long>(Method::kDefaultInstructionLimit);
};

bool g_verbose = false;

int fail(const char* message) {
  std::fprintf(stderr, "executor_runner: %s\n", message);
  return 1;
}

// All of `text` as an integer in [lo, hi] (no sign tricks, no trailing characters).
bool parse_int(const std::string& text, long long lo, long long hi, long long* out) {
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-')) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// All of `text` as a finite number >= 0.
bool parse_tolerance(const std::string& text, double* out) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v < 0) return false;
  *out = v;
  return true;
}

// The machine's memory in bytes (0 when unknown): no buffer the runner allocates can be larger.
unsigned long long physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<unsigned long long>(pages) * static_cast<unsigned long long>(page) : 0;
}

// Parses argv; -1 asks for a clean exit (--help), 0 is a usage error, 1 is ready to run.
int parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return -1;
    }
    // A number flag out of range is refused naming the flag and what it takes.
    auto bad = [&](const char* takes) {
      std::fprintf(stderr, "executor_runner: %s '%s' is not %s\n", a.c_str(), v.c_str(), takes);
      return 0;
    };
    long long n = 0;
    if (a == "--model_path" && value(&v))
      o->model_path = v;
    else if (a == "--data_path" && value(&v))
      o->data_path = v;
    else if (a == "--bundled" && value(&v))
      o->bundled = v;
    else if (a == "--rtol" && value(&v)) {
      if (!parse_tolerance(v, &o->rtol)) return bad("a tolerance; give a finite number >= 0");
    } else if (a == "--atol" && value(&v)) {
      if (!parse_tolerance(v, &o->atol)) return bad("a tolerance; give a finite number >= 0");
    } else if (a == "--method" && value(&v))
      o->method = v;
    else if (a == "--iterations" && value(&v)) {
      if (!parse_int(v, 1, INT_MAX, &n)) return bad("an iteration count; give an integer from 1 to 2147483647");
      o->iterations = static_cast<int>(n);
    } else if (a == "--fill" && value(&v))
      o->fill = v;
    else if (a == "--seed" && value(&v)) {
      if (!parse_int(v, 0, UINT32_MAX, &n)) return bad("a seed; give an integer from 0 to 4294967295");
      o->seed = static_cast<uint32_t>(n);
    } else if (a == "--output_dir" && value(&v))
      o->output_dir = v;
    else if (a == "--verbose")
      o->verbose = true;
    else if (a == "--etdump_path" && value(&v))
      o->etdump_path = v;
    else if (a == "--debug_output_path" && value(&v))
      o->debug_output_path = v;
    else if (a == "--debug_buffer_size" && value(&v)) {
      if (!parse_int(v, 1, LLONG_MAX, &o->debug_buffer_size)) return bad("a byte count; give an integer > 0");
      const unsigned long long memory = physical_memory();
      if (memory > 0 && static_cast<unsigned long long>(o->debug_buffer_size) > memory) {
        std::fprintf(stderr,
                     "executor_runner: --debug_buffer_size '%s' is more than this machine's %llu bytes of "
                     "memory; give a smaller byte count\n",
                     v.c_str(), memory);
        return 0;
      }
    } else if (a == "--num_threads" && value(&v)) {
      if (!parse_int(v, 1, 256, &n)) return bad("a thread count; give an integer from 1 to 256");
      o->num_threads = static_cast<long>(n);
    } else if (a == "--max_instructions" && value(&v)) {
      if (!parse_int(v, 0, LLONG_MAX, &o->max_instructions))
        return bad("an instruction count; give an integer >= 0 (0: no limit)");
    } else if (a == "--inputs" && value(&v)) {
      for (size_t start = 0; start <= v.size();) {
        size_t comma = v.find(',', start);
        if (comma == std::string::npos) comma = v.size();
        if (comma > start) o->inputs.push_back(v.substr(start, comma - start));
        start = comma + 1;
      }
    } else {
      std::fprintf(stderr, "executor_runner: unknown or incomplete option '%s'\n%s", a.c_str(), kUsage);
      return 0;
    }
  }
  if (o->model_path.empty() == o->bundled.empty()) {
    std::fprintf(stderr, "executor_runner: give one of --model_path and --bundled\n%s", kUsage);
    return 0;
  }
  if ((o->debug_buffer_size > 0) != !o->debug_output_path.empty() ||
      (!o->debug_output_path.empty() && o->etdump_path.empty())) {
    std::fprintf(stderr,
                 "executor_runner: --debug_output_path and --debug_buffer_size go together, with --etdump_path\n");
    return 0;
  }
  if (o->fill != "ones" && o->fill != "zeros" && o->fill != "random") {
    std::fprintf(stderr, "executor_runner: --fill '%s' is not one of ones, zeros, random\n", o->fill.c_str());
    return 0;
  }
  return 1;
}

// Writes `size` bytes to `path`; a failed write leaves no file behind.
bool write_file(const std::string& path, const void* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  bool ok = std::fwrite(data, 1, size, f) == size;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) std::remove(path.c_str());
  return ok;
}

double element(const void* data, ScalarType type, int64_t i) {
  switch (type) {
    case ScalarType::Float: return static_cast<const float*>(data)[i];
    case ScalarType::Double: return static_cast<const double*>(data)[i];
    case ScalarType::Long: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case ScalarType::Int: return static_cast<const int32_t*>(data)[i];
    case ScalarType::Short: return static_cast<const int16_t*>(data)[i];
    case ScalarType::Char: return static_cast<const int8_t*>(data)[i];
    case ScalarType::Byte: return static_cast<const uint8_t*>(data)[i];
    case ScalarType::Bool: return static_cast<const uint8_t*>(data)[i] != 0;
    default: return NAN;
  }
}

// Writes `value` as one element of `type` at `p` (used to make ones).
void store_one(uint8_t* p, ScalarType type) {
  switch (type) {
    case ScalarType::Float: {
      float v = 1.f;
      std::memcpy(p, &v, 4);
      break;
    }
    case ScalarType::Double: {
      double v = 1.0;
      std::memcpy(p, &v, 8);
      break;
    }
    case ScalarType::Half: {
      uint16_t v = 0x3C00;
      std::memcpy(p, &v, 2);
      break;
    }
    case ScalarType::BFloat16: {
      uint16_t v = 0x3F80;
      std::memcpy(p, &v, 2);
      break;
    }
    default: p[0] = 1; break;  // little-endian integer / bool 1
  }
}

void fill_input(Bytes* data, ScalarType type, const std::string& how, uint32_t* state) {
  size_t es = element_size(type);
  for (size_t off = 0; off + es <= data->size; off += es) {
    uint8_t* p = data->data.get() + off;
    std::memset(p, 0, es);
    if (how == "ones") {
      store_one(p, type);
    } else if (how == "random") {
      *state = *state * 1664525u + 1013904223u;
      float r = static_cast<float>(*state >> 8) / static_cast<float>(1u << 24) * 2.f - 1.f;
      if (type == ScalarType::Float)
        std::memcpy(p, &r, 4);
      else if (type == ScalarType::Double) {
        double d = r;
        std::memcpy(p, &d, 8);
      } else if (type == ScalarType::Bool)
        p[0] = r > 0;
      else
        p[0] = static_cast<uint8_t>(*state >> 28);  // small non-negative integers
    }
  }
}

void summarize(size_t index, const EValue& v) {
  if (!v.isTensor()) {
    if (v.isInt())
      std::printf("output %zu: int %" PRId64 "\n", index, v.toInt());
    else if (v.isDouble())
      std::printf("output %zu: double %g\n", index, v.toDouble());
    else if (v.isBool())
      std::printf("output %zu: bool %s\n", index, v.toBool() ? "true" : "false");
    else
      std::printf("output %zu: %s\n", index, tag_name(v.tag()));
    return;
  }
  Tensor t = v.toTensor();
  std::printf("output %zu: %s [", index, scalar_type_name(t.scalar_type()));
  for (int64_t d = 0; d < t.dim(); ++d) std::printf(d ? ", %" PRId64 : "%" PRId64, t.size(d));
  std::printf("]");
  if (t.numel() > 0 && !std::isnan(element(t.const_data_ptr(), t.scalar_type(), 0))) {
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      double x = element(t.const_data_ptr(), t.scalar_type(), i);
      lo = std::fmin(lo, x);
      hi = std::fmax(hi, x);
      sum += x;
    }
    std::printf(" min %.6g max %.6g mean %.6g first", lo, hi, sum / static_cast<double>(t.numel()));
    for (int64_t i = 0; i < t.numel() && i < 5; ++i)
      std::printf(" %.6g", element(t.const_data_ptr(), t.scalar_type(), i));
  }
  std::printf("\n");
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

extern "C" void et_pal_emit_log(char level, const char* file, int line, const char* message, size_t length) {
  if (level == 'E' || level == 'F' || g_verbose)
    std::fprintf(stderr, "%c %s:%d] %.*s\n", level, file, line, static_cast<int>(length), message);
}

// Sizes the kernels' thread pool from --num_threads, else checks the environment's size.
static bool configure_threads(long num_threads) {
#if EXECUTORCH_HAVE_PORTABLE_KERNELS
  namespace tp = executorch::extension::threadpool;
  if (num_threads > 0) return tp::get_threadpool()->_unsafe_reset_threadpool(static_cast<uint32_t>(num_threads));
  uint32_t from_env = 0;
  if (!tp::num_threads_from_env(&from_env)) {
    std::fprintf(stderr,
                 "executor_runner: %s='%s' is not a thread count; set it to an integer from 1 to %u "
                 "or unset it\n",
                 tp::kNumThreadsEnv, std::getenv(tp::kNumThreadsEnv), tp::kMaxThreads);
    return false;
  }
  return true;
#else
  if (num_threads > 0)
    std::fprintf(stderr, "executor_runner: --num_threads needs the portable kernels, which this build lacks\n");
  return num_threads == 0;
#endif
}

int main(int argc, char** argv) {
  Options o;
  const int parsed = parse(argc, argv, &o);
  if (parsed <= 0) return parsed < 0 ? 0 : 2;
  g_verbose = o.verbose;
  if (!configure_threads(o.num_threads)) return 2;
  HostedMethod::Limits limits;
  limits.instruction_limit = static_cast<uint64_t>(o.max_instructions);
  if (!o.bundled.empty()) return run_bundled(o.bundled, o.rtol, o.atol, limits);
  Bytes file;
  if (!read_file(o.model_path, ".pte", &file)) return 1;
  auto start = std::chrono::steady_clock::now();
  Result<Program> program = Program::load(file.data.get(), file.size);
  if (!program.ok()) {
    std::fprintf(stderr, "executor_runner: %s is not a loadable program: %s\n", o.model_path.c_str(),
                 error_name(program.error()));
    return 1;
  }
  Bytes data_file;
  std::optional<executorch::extension::FlatTensorDataMap> data_map;
  if (!o.data_path.empty()) {
    if (!read_file(o.data_path, ".ptd", &data_file)) return 1;
    auto loaded = executorch::extension::FlatTensorDataMap::load(data_file.data.get(), data_file.size);
    if (!loaded.ok()) {
      std::fprintf(stderr, "executor_runner: %s is not a loadable .ptd: %s\n", o.data_path.c_str(),
                   error_name(loaded.error()));
      return 1;
    }
    data_map.emplace(std::move(*loaded));
  }
  double load_ms = ms_since(start);
  std::unique_ptr<executorch::etdump::ETDumpGen> etdump;
  std::unique_ptr<uint8_t, void (*)(void*)> debug_buffer(nullptr, std::free);
  if (!o.etdump_path.empty()) {
    etdump = std::make_unique<executorch::etdump::ETDumpGen>();
    if (o.debug_buffer_size > 0) {
      debug_buffer.reset(static_cast<uint8_t*>(std::calloc(static_cast<size_t>(o.debug_buffer_size), 1)));
      if (debug_buffer == nullptr) {
        std::fprintf(stderr,
                     "executor_runner: --debug_buffer_size '%lld': cannot allocate that many bytes; give a "
                     "smaller byte count\n",
                     o.debug_buffer_size);
        return 1;
      }
      etdump->set_debug_buffer(Span<uint8_t>(debug_buffer.get(), static_cast<size_t>(o.debug_buffer_size)));
      etdump->set_event_tracer_debug_level(EventTracerDebugLogLevel::kIntermediateOutputs);
    }
  }
  start = std::chrono::steady_clock::now();
  auto hosted =
      HostedMethod::load(*program, o.method.c_str(), limits, data_map ? &*data_map : nullptr, nullptr, etdump.get());
  if (!hosted.ok()) {
    std::fprintf(stderr, "executor_runner: cannot load method '%s': %s\n", o.method.c_str(),
                 error_name(hosted.error()));
    return 1;
  }
  double method_ms = ms_since(start);
  Method& method = (*hosted)->method();
  MethodMeta meta = method.method_meta();

  if (!o.inputs.empty() && o.inputs.size() != method.inputs_size()) {
    std::fprintf(stderr, "executor_runner: method '%s' takes %zu inputs; --inputs named %zu files\n", o.method.c_str(),
                 method.inputs_size(), o.inputs.size());
    return 1;
  }
  uint32_t state = o.seed * 2654435761u + 1;
  std::vector<Bytes> inputs(method.inputs_size());
  std::vector<std::vector<int64_t>> input_sizes(method.inputs_size());
  std::vector<ScalarType> input_types(method.inputs_size());
  std::vector<bool> is_tensor(method.inputs_size(), false);
  for (size_t i = 0; i < method.inputs_size(); ++i) {
    Result<TensorInfo> info = meta.input_tensor_info(i);
    if (!info.ok()) continue;  // scalar inputs keep the value they were exported with
    is_tensor[i] = true;
    input_types[i] = info->scalar_type;
    input_sizes[i].assign(info->sizes.begin(), info->sizes.end());
    if (!o.inputs.empty()) {
      if (!read_file(o.inputs[i], nullptr, &inputs[i])) return 1;
      continue;
    }
    size_t nbytes = element_size(info->scalar_type);
    bool fits = true;
    for (int64_t s : input_sizes[i])
      fits = fits && s >= 0 && !__builtin_mul_overflow(nbytes, static_cast<size_t>(s), &nbytes);
    if (!fits || !allocate(nbytes, &inputs[i])) {
      std::fprintf(stderr, "executor_runner: cannot allocate input %zu of method '%s' (%s bytes)\n", i,
                   o.method.c_str(), fits ? std::to_string(nbytes).c_str() : "more than memory holds");
      return 1;
    }
    fill_input(&inputs[i], info->scalar_type, o.fill, &state);
  }
  // Inputs are set before every run: planned memory of a dead input may be reused
  // for intermediates, so one run can overwrite the next run's input.
  auto set_inputs = [&]() -> bool {
    for (size_t i = 0; i < method.inputs_size(); ++i) {
      if (!is_tensor[i]) continue;
      Error e =
          method.set_input_tensor(i, input_types[i], Span<const int64_t>(input_sizes[i].data(), input_sizes[i].size()),
                                  inputs[i].data.get(), inputs[i].size);
      if (e != Error::Ok) {
        std::fprintf(stderr, "executor_runner: input %zu refused (%s): %zu bytes of %s given\n", i, error_name(e),
                     inputs[i].size, scalar_type_name(input_types[i]));
        return false;
      }
    }
    return true;
  };

  double total = 0, best = INFINITY;
  for (int it = 0; it < o.iterations; ++it) {
    if (!set_inputs()) return 1;
    start = std::chrono::steady_clock::now();
    Error e = method.execute();
    double ms = ms_since(start);
    if (e != Error::Ok) {
      std::fprintf(stderr, "executor_runner: execute failed on iteration %d: %s\n", it, error_name(e));
      return 1;
    }
    total += ms;
    best = std::fmin(best, ms);
  }
  for (size_t i = 0; i < method.outputs_size(); ++i) {
    const EValue& v = **method.get_output(i);
    summarize(i, v);
    if (!o.output_dir.empty() && v.isTensor()) {
      std::string path = o.output_dir + "/output_" + std::to_string(i) + ".bin";
      FILE* f = std::fopen(path.c_str(), "wb");
      Tensor t = v.toTensor();
      if (f == nullptr || std::fwrite(t.const_data_ptr(), 1, t.nbytes(), f) != t.nbytes()) {
        if (f) std::fclose(f);
        std::remove(path.c_str());
        std::fprintf(stderr, "executor_runner: cannot write %s\n", path.c_str());
        return 1;
      }
      std::fclose(f);
    }
  }
  std::printf("program load %.3f ms, method load %.3f ms, %d iteration(s): mean %.3f ms, min %.3f ms\n", load_ms,
              method_ms, o.iterations, total / o.iterations, best);
  if (etdump != nullptr) {
    executorch::etdump::ETDumpResult result = etdump->get_etdump_data();
    bool ok = result.buf != nullptr && write_file(o.etdump_path, result.buf, result.size);
    std::free(result.buf);
    if (!ok) return fail(("cannot write " + o.etdump_path).c_str());
    if (!o.debug_output_path.empty() &&
        !write_file(o.debug_output_path, debug_buffer.get(), static_cast<size_t>(o.debug_buffer_size)))
      return fail(("cannot write " + o.debug_output_path).c_str());
    if (etdump->dropped_values() > 0)
      std::fprintf(stderr,
                   "executor_runner: %zu values did not fit in the %lld-byte debug buffer; raise --debug_buffer_size\n",
                   etdump->dropped_values(), o.debug_buffer_size);
    std::printf("etdump: %s (%zu event blocks)\n", o.etdump_path.c_str(), etdump->get_num_blocks());
  }
  return 0;
}
