// The registry, shown with a backend registered as any would be: the memory backend of
// tests/unit/memory_backend, one line in src/backend/registry.cpp, its own folder, no other file.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>

#include "memory_backend/memory_options.hpp"
#include "options_support.hpp"

using lk::Options;
using lk::parse_options;
using namespace lk::test;
using namespace std::chrono_literals;

TEST_CASE("a backend's own flag selects it, and its configure reads it") {
  EnvScope env;
  Options o = with({"-memory-table", "t1"});
  CHECK(o.backend == "memory");
  CHECK(o.backend_chosen_by == "-memory-table selects it");
  CHECK(config_of<lk::MemoryOptions>(o).table == "t1");
  Options by_name = with({"-backend", "memory"});
  CHECK(config_of<lk::MemoryOptions>(by_name).table == "main");
  env.set("LOCK_MEMORY_TABLE", "t2");
  Options from_env = with({"-backend", "memory"});
  CHECK(config_of<lk::MemoryOptions>(from_env).table == "t2");
}

TEST_CASE("a backend's flag is its own: refused for another, listed in -help and the variables") {
  EnvScope env;
  CHECK(error_of({"-backend", "local", "-memory-table", "t", "p", "c"}) ==
        "-memory-table applies to the memory backend, not to -backend local");
  CHECK(error_of({"-memory-table", "t", "-state-dir", "/d", "p", "c"}) ==
        "-state-dir applies to the local backend, not to -backend memory");
  CHECK(error_of({"-backend", "nope", "p", "c"}) ==
        "unknown backend 'nope' (choose local, consul, etcd, zookeeper, postgres or memory)");
  std::string help = lk::usage_text();
  CHECK(help.find("-backend=<name>             local (default), consul, etcd, zookeeper, postgres "
                  "or memory") != std::string::npos);
  // Where its row says: after -endpoints.
  auto endpoints = help.find("  -endpoints="), table = help.find("  -memory-table=<name>");
  CHECK(endpoints != std::string::npos);
  CHECK(table > endpoints);
  CHECK(help.find("\n", endpoints) + 1 == table);
  auto names = lk::option_variables();
  CHECK(std::count(names.begin(), names.end(), "LOCK_MEMORY_TABLE") == 1);
}

TEST_CASE("its factory and status reader are the registry's") {
  EnvScope env;
  Options o = with({"-memory-table", "registry_test"});
  const lk::Registered& memory = lk::carried(o.backend, o.backend_chosen_by);
  auto backend = memory.make(*o.backend_config);
  lk::LockSpec spec{"p", 1, "test"};
  auto hold = backend->acquire(spec, lk::Deadline::never(), lk::Interrupt{}, [] {});
  lk::PrefixStatus held = memory.read_status(*o.backend_config, "p", nullptr);
  CHECK(held.limit == 1);
  REQUIRE(held.holders.size() == 1);
  CHECK(hold->child_env() ==
        lk::EnvVars{{"LOCK_FENCING_TOKEN", std::to_string(held.holders[0].token)}});
  CHECK_THROWS_AS(backend->acquire(spec, lk::Deadline::after(10ms), lk::Interrupt{}, [] {}),
                  lk::AcquireTimeout);
  hold->release();
  CHECK(memory.read_status(*o.backend_config, "p", nullptr).holders.empty());
  auto again = backend->acquire(spec, lk::Deadline::after(10ms), lk::Interrupt{}, [] {});
  CHECK(again);
  again->release();
}

namespace {

// The part of `file` (under the source tree) from the line that starts with `from` to the next
// that starts with `to`.
std::string section(const char* file, const std::string& from, const std::string& to) {
  std::ifstream in(std::string(LOCK_SOURCE_DIR) + "/" + file);
  std::stringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  auto start = all.find("\n" + from);
  REQUIRE(start != std::string::npos);
  return all.substr(start, all.find("\n" + to, start + 1) - start);
}

}  // namespace

TEST_CASE("README's and the manual page's environment sections name every variable lock reads") {
  std::set<std::string> test_only;  // the memory backend's, which ships with no lock
  for (const lk::FlagInfo* f : lk::kMemoryBackend.flags)
    if (f->env) test_only.insert(f->env);
  std::string readme = section("README.md", "## Environment", "## ");
  std::string man = section("man/lock.1", ".SH ENVIRONMENT", ".SH ");
  for (const std::string& name : lk::option_variables()) {
    if (test_only.contains(name)) continue;
    CAPTURE(name);
    CHECK(readme.find("`" + name + "`") != std::string::npos);
    CHECK(man.find(".B " + name + "\n") != std::string::npos);
  }
}
