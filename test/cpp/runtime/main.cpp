// Runs every runtime test case (or those whose name contains argv[1]); exit 1 on failure.
#include "test/cpp/runtime/harness.h"

int main(int argc, char** argv) { return ettest::run_all(argc, argv); }
