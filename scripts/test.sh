#!/bin/sh
# The whole test suite: installs dependencies, builds (scripts/build.sh: the program, optimised,
# with warnings as errors, and the same program under ASan+UBSan) and runs the unit and
# end-to-end tests of both, the fault harness's short pass and the fuzz
# targets' short runs under CTest, three at a time (most wait out TTLs and faults; CMakeLists.txt
# counts the busy ones double, and runs the fault harness alone).
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec ctest --test-dir build --output-on-failure -j 3
