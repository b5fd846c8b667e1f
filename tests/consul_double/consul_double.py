#!/usr/bin/env python3
"""A test double of Consul's HTTP API: one server agent that is its own leader, serving the KV
store, sessions with TTLs and lock-delay, blocking queries, ACL tokens, TLS and a unix socket,
with faults that tests switch on through a separate control port.

    consul_double.py --listen 127.0.0.1:0 [--unix PATH] [--tls-cert F --tls-key F
                     [--tls-client-ca F] [--https-listen ADDR]] [--acl FILE]
                     [--ttl-multiplier X] [--session-ttl-min DURATION] [--control-listen ADDR]

Once ready it prints one line per listener ("http HOST:PORT", "https HOST:PORT", "unix PATH",
"control HOST:PORT") and serves until SIGTERM, SIGINT or the end of its stdin when that is a
pipe."""

import argparse
import os
import signal
import ssl
import stat
import sys
import threading

from acl import Acl
from control import ControlServer
from godur import parse_duration
from netserver import Double, Listener
from store import Store


def _address(text):
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def _arguments(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", default="127.0.0.1:0",
                   help='plain HTTP address, or "none" (default 127.0.0.1:0)')
    p.add_argument("--unix", help="also (or only) serve on this unix socket path")
    p.add_argument("--tls-cert", help="server certificate: enables an HTTPS listener")
    p.add_argument("--tls-key", help="server private key")
    p.add_argument("--tls-client-ca", help="require client certificates signed by this CA")
    p.add_argument("--https-listen", default="127.0.0.1:0", help="HTTPS address")
    p.add_argument("--control-listen", default="127.0.0.1:0", help="control port address")
    p.add_argument("--acl", help="ACL configuration (JSON); enables ACLs, default policy deny")
    p.add_argument("--ttl-multiplier", type=float, default=1.0,
                   help="session TTLs expire after TTL times this; Consul itself uses 2")
    p.add_argument("--session-ttl-min", default="10s",
                   help="Consul's session_ttl_min: the shortest TTL a session may ask for")
    p.add_argument("--datacenter", default="dc1")
    p.add_argument("--node-name", default="consul-double")
    args = p.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        p.error("--tls-cert and --tls-key go together")
    if args.tls_client_ca and not args.tls_cert:
        p.error("--tls-client-ca needs --tls-cert")
    if args.listen == "none" and not (args.unix or args.tls_cert):
        p.error("nothing to listen on")
    return args


def _tls_context(args):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.tls_cert, args.tls_key)
    if args.tls_client_ca:
        ctx.load_verify_locations(args.tls_client_ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _stop_on_stdin_eof(stop):
    """Only a pipe's end means the parent went away; /dev/null ends at once."""
    if stat.S_ISFIFO(os.fstat(0).st_mode):
        def watch():
            while sys.stdin.buffer.read(4096):
                pass
            stop.set()
        threading.Thread(target=watch, daemon=True).start()


def main(argv=None):
    args = _arguments(argv)
    store = Store(args.node_name, args.ttl_multiplier)
    double = Double(store, Acl(args.acl), args.datacenter, args.node_name,
                    parse_duration(args.session_ttl_min))
    if args.listen != "none":
        double.listeners.append(Listener(double, "http", _address(args.listen)))
    if args.tls_cert:
        double.listeners.append(
            Listener(double, "https", _address(args.https_listen), _tls_context(args)))
    if args.unix:
        double.listeners.append(Listener(double, "unix", os.path.abspath(args.unix)))
    for listener in double.listeners:
        listener.start()
    control = ControlServer(_address(args.control_listen), double)
    control.start()

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    _stop_on_stdin_eof(stop)
    for listener in double.listeners:
        print(listener.describe())
    host, port = control.server_address[:2]
    print(f"control {host}:{port}", flush=True)

    stop.wait()
    control.stop()
    double.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
