// Smallest program using the whole runtime (load, method load, execute), for the size report.
#include "runtime/executor/method.h"
#include "runtime/executor/program.h"

using namespace executorch::runtime;

#ifdef SIZE_PROBE_EMPTY
int main() { return 0; }
#else
alignas(16) static uint8_t g_method_memory[1 << 16];
alignas(16) static uint8_t g_arena[1 << 16];

int main(int argc, char** argv) {
  // The file bytes would come from flash; argv keeps the compiler from folding it away.
  const void* data = argc > 1 ? argv[1] : nullptr;
  Result<Program> program = Program::load(data, static_cast<size_t>(argc));
  if (!program.ok()) return 1;
  MemoryAllocator allocator(g_method_memory, sizeof(g_method_memory));
  Span<uint8_t> arenas[1] = {Span<uint8_t>(g_arena, sizeof(g_arena))};
  MemoryManager mm;
  mm.method_allocator = &allocator;
  mm.planned_buffers = Span<Span<uint8_t> >(arenas, 1);
  Result<Method> method = program->load_method("forward", &mm);
  if (!method.ok()) return 2;
  return method->execute() == Error::Ok ? 0 : 3;
}
#endif
