#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace lk {

// Consul's HTTP API options. They are parsed and checked here; the Consul backend uses them.
struct ApiOptions {
  std::string http_addr, token, token_file, ca_file, ca_path, client_cert, client_key,
      tls_server_name, datacenter;
  bool stale = false;
  bool ssl = false, ssl_verify = true;  // CONSUL_HTTP_SSL, CONSUL_HTTP_SSL_VERIFY
};

struct Options {
  int limit = 1;
  std::string name;  // session name; generated from the child when empty
  int monitor_retry = 3;
  std::chrono::nanoseconds timeout{0};  // 0 waits forever
  bool shell = true;
  bool pass_stdin = false;
  bool child_exit_code = false;
  bool preserve_status = false;
  int conflict_exit_code = 1;  // -timeout passed without the lock
  int lost_exit_code = 1;      // the lock was lost
  std::chrono::nanoseconds min_hold{0};  // the hold lasts at least this long from its start
  std::string metrics_file;  // node_exporter's textfile: what became of the run (runner/metrics_file.hpp)
  bool verbose = false;
  bool ready_when_queued = false;  // -ready=wait: systemd hears READY=1 once we are in line
  std::chrono::nanoseconds kill_after = std::chrono::seconds(5);
  std::string backend;  // a name backends.hpp knows
  std::string backend_chosen_by;  // for messages: "-backend consul", "CONSUL_HTTP_ADDR is set"...
  std::string state_dir;  // as the user gave it; empty: the local backend's default
  ApiOptions api;

  // Network backends.
  std::vector<std::string> endpoints;         // etcd's URLs
  std::string zookeeper;                      // ZooKeeper's connect string, host:port,...[/chroot]
  std::string etcd_user, etcd_password;       // ETCDCTL_USER ("user" or "user:password")
  std::chrono::nanoseconds session_ttl{0};    // 0: the backend's default
  std::chrono::nanoseconds lock_delay{std::chrono::seconds(15)};
  std::optional<std::string> value;           // stored with the hold

  std::string prefix;
  std::vector<std::string> child;

  bool help = false;
  bool version = false;
  bool status = false;  // show who holds the prefix instead of running a child
  bool json = false;    // ... as JSON
  bool watch = false;   // ... now and at every change, until a stop signal or -timeout
};

// Parses the arguments after argv[0] as `consul lock` does (Go flag syntax), fills defaults from
// the environment and checks every value. Throws UsageError naming what is wrong.
Options parse_options(const std::vector<std::string>& args);

std::string usage_text();

// Every environment variable parse_options reads: the flags' own, those that select a backend,
// and those a backend reads for its defaults.
std::vector<std::string> option_variables();

}  // namespace lk
