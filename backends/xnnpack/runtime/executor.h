// Running a Plan: shapes of one call (from its inputs), then each op on its kernel. No allocation.
#pragma once

#include <cstddef>

#include "backends/xnnpack/runtime/plan.h"
#include "runtime/core/error.h"
#include "runtime/core/evalue.h"
#include "runtime/core/event_tracer.h"
#include "runtime/core/span.h"

namespace executorch {
namespace backends {
namespace xnnpack {

// Sets op.out's dims from its inputs' dims, checking them against the op and the output's
// upper-bound storage.
runtime::Error infer_shape(const Op& op, Plan& plan);
// Scratch bytes `op` needs for its inputs' current dims.
runtime::Error scratch_bytes(const Op& op, const Plan& plan, size_t* need);
// Runs one DelegateCall: `args` indexed by external id (inputs, then outputs).
// With a tracer, each node is a delegate event named "<kind> #<n>" (as event_names.py names it).
runtime::Error execute(Plan& plan, runtime::Span<runtime::EValue*> args, runtime::EventTracer* tracer = nullptr);

}  // namespace xnnpack
}  // namespace backends
}  // namespace executorch
