// Runs every test case of a .bpte bundled program and reports pass/fail per case.
#pragma once

#include <string>

#include "runtime/executor/hosted_method.h"

// Returns the process exit code: 0 when every case passed, 1 on a failure or a bad file.
int run_bundled(const std::string& path, double rtol, double atol,
                const executorch::runtime::HostedMethod::Limits& limits);
