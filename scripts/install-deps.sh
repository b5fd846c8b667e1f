#!/bin/sh
# Installs what building and testing lock needs, from Debian's packages. Run as root.
set -eu

packages="g++ cmake make pkg-config libcli11-dev nlohmann-json3-dev libfmt-dev doctest-dev
          python3 tmux util-linux procps groff-base zsh fish openssl libssl-dev libboost-dev strace"
# The etcd backend's tests run a real etcd and etcdctl lock beside lock.
packages="$packages etcd-server etcd-client"
# The ZooKeeper backend builds on the C client; its tests run a real ZooKeeper, Apache Curator's
# lock recipes (compiled with the JDK) beside lock, and kazoo to look at the tree.
packages="$packages zookeeper libzookeeper-mt-dev libcurator-recipes-java default-jdk-headless python3-kazoo"
# tests/chaos/test_partition.py puts servers and clients in network namespaces (ip netns, ss).
packages="$packages iproute2"
# The fuzz targets of tests/fuzz: libFuzzer comes with clang.
packages="$packages clang-14 libfuzzer-14-dev libclang-rt-14-dev"
# The code's format (.clang-format), which scripts/test.sh checks.
packages="$packages clang-format-14"
# The benchmark's peers (flock is in util-linux), and GNU time for their peak memory.
packages="$packages parallel time"
# -metrics-file's tests read the file as operators do: promtool (from prometheus) checks it, and
# node_exporter's textfile collector serves it.
packages="$packages prometheus prometheus-node-exporter"
# The active/standby pair's companion (packaging/examples/follow-leader) reads -status -watch -json
# with jq, as its test runs it.
packages="$packages jq"
# The N+1 example's health check (-check) asks its web server with curl, as its test runs it.
packages="$packages curl"
# Building the Debian package and checking it as tests/packaging does.
packages="$packages dpkg-dev file binutils lintian man-db bash-completion"
# The PostgreSQL backend links libpq; its tests run a real server (initdb, pg_ctl) and psql.
packages="$packages postgresql postgresql-client libpq-dev"
# Node.js runs withlock (npm's advisory-lock), the PostgreSQL backend's CLI peer in its tests and bench/.
packages="$packages nodejs"
# npm installs that peer; a Node.js that bundles its own npm (NodeSource's) conflicts with Debian's.
command -v npm >/dev/null 2>&1 || packages="$packages npm"

missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing
fi

# withlock goes to a fixed place outside the checkout, so that tests and benchmarks need no network
# and leave the work tree clean; tests/e2e/postgres_server.py looks for it there.
peers=/opt/lock-test-peers
advisory_lock=2.0.0
if ! grep -qs "\"version\": \"$advisory_lock\"" "$peers/node_modules/advisory-lock/package.json" ||
   [ ! -x "$peers/node_modules/.bin/withlock" ]; then
  mkdir -p "$peers"
  (cd "$peers" && npm install --prefix "$peers" --no-audit --no-fund --save-exact "advisory-lock@$advisory_lock")
fi
