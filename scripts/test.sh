#!/bin/sh
# The whole test suite: installs dependencies, checks the code's format, builds
# (scripts/build.sh: the program, optimised, with warnings as errors, and the same program under
# ASan+UBSan) and runs the unit and end-to-end tests of both, the fault harness's short pass and
# the fuzz targets' short runs under CTest, four at a time (most wait out TTLs and faults;
# CMakeLists.txt counts the busy ones double, and runs the fault harness alone).
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# The code as .clang-format lays it out, before anything is built.
find src tests/unit -name '*.cpp' -o -name '*.hpp' | xargs clang-format-14 --dry-run --Werror
# First, the programs as a packager builds them: a plain Release build, where a warning the
# optimiser brings (GCC 12 warns of a false -Wrestrict at -O3) must stay a warning, and the build
# runs. Its behaviour is the same code's as build/'s, which the suite then tests.
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DLOCK_SANITIZE=OFF >/dev/null
cmake --build build-release -j "$(nproc)" --target lock lock-net lock-zookeeper lock-postgres
state=$(mktemp -d)
LOCK_STATE_DIR=$state build-release/lock -shell=false release/smoke true
rm -rf "$state"
scripts/build.sh
exec ctest --test-dir build --output-on-failure -j 4
