#!/bin/sh
# Configures and builds everything into build/ (the shipped binary is build/lock).
set -eu
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOCK_WERROR=ON -DLOCK_FUZZ=ON >/dev/null
cmake --build build -j "$(nproc)" "$@"
