// The event-tracer calls a delegate backend makes (upstream's header name); they live in event_tracer.h.
#pragma once

#include "runtime/core/event_tracer.h"
