#!/bin/sh
# The whole test suite: installs dependencies, builds both variants (plain and ASan+UBSan), and
# runs the unit and end-to-end tests of each under CTest. A packager's plain Release build
# (optimised, warnings not errors) is built and runs the unit and end-to-end tests first, so that
# it cannot break unseen. The scale test (ten thousand holders, some seven minutes) runs once, on
# build/'s binary, the one the benches measure.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DLOCK_SANITIZE=OFF >/dev/null
cmake --build build-release -j "$(nproc)"
ctest --test-dir build-release --output-on-failure -j 2 -R '^(unit|e2e\.)' -E '^e2e\.test_scale$' \
  --no-tests=error
scripts/build.sh
exec ctest --test-dir build --output-on-failure -j 2
