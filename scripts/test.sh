#!/bin/sh
# The whole test suite: installs dependencies, builds both variants (plain and ASan+UBSan), and
# runs the unit and end-to-end tests of each under CTest.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec ctest --test-dir build --output-on-failure -j 2
