"""The control port: tests steer the double's faults and read what it saw through here, so the
API port is the only one that misbehaves.

    GET    /status                 {"up", "raft_index", "ttl_paused"}
    POST   /fault/5xx              {"seconds", "status"=500, "body"="No cluster leader",
                                    "headers"={}}
    POST   /fault/reply            a canned, endless or withheld answer to chosen requests
                                   (see netserver.ReplyRule for the fields)
    POST   /fault/index            {"mode", "seconds"}: blocking queries answer at once with the
                                   index the mode makes (netserver.INDEX_MODES)
    POST   /fault/partition        {"seconds"}
    POST   /fault/drop             drop every open API connection now
    POST   /fault/restart          {"down_seconds"}; answers once the API is down
    POST   /fault/heal             end every fault now (a partition as it would end itself)
    POST   /wait/up                {"timeout"}; answers {"up"} once the API is up or at timeout
    POST   /ttl/pause, /ttl/resume
    POST   /check                  {"id", "status"}: registers or updates an agent check; a
                                   critical one invalidates the sessions tied to it
    GET    /requests               {"count", "requests": [{seq, at, listener, connection,
                                                           method, path, query, headers}]}
                                   (at: time.monotonic() when it arrived; connection: a number,
                                   the same for the requests of one connection)
    DELETE /requests               forget them
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# A server agent without a leader answers every RPC with structs.ErrNoLeader.
NO_LEADER = "No cluster leader"


class ControlHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _reply(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _dispatch(self):
        double = self.server.double
        length = int(self.headers.get("Content-Length") or 0)
        args = json.loads(self.rfile.read(length) or b"{}")
        route = (self.command, self.path)
        if route == ("GET", "/status"):
            return self._reply(200, {"up": double.is_up(), "raft_index": double.store.raft_index,
                                     "ttl_paused": double.store.reaping_paused})
        if route == ("POST", "/fault/5xx"):
            double.faults.fail(float(args["seconds"]), int(args.get("status", 500)),
                               args.get("body", NO_LEADER), args.get("headers"))
        elif route == ("POST", "/fault/reply"):
            double.faults.add_rule(args)
        elif route == ("POST", "/fault/index"):
            try:
                double.faults.set_index_mode(args["mode"], float(args["seconds"]))
            except ValueError as e:
                return self._reply(400, {"error": str(e)})
        elif route == ("POST", "/fault/partition"):
            double.partition(float(args["seconds"]))
        elif route == ("POST", "/fault/drop"):
            double.drop_connections()
        elif route == ("POST", "/fault/restart"):
            double.restart(float(args["down_seconds"]))
        elif route == ("POST", "/fault/heal"):
            double.heal()
        elif route == ("POST", "/wait/up"):
            return self._reply(200, {"up": double.wait_up(float(args.get("timeout", 15)))})
        elif route == ("POST", "/ttl/pause"):
            double.store.pause_reaping(True)
        elif route == ("POST", "/ttl/resume"):
            double.store.pause_reaping(False)
        elif route == ("POST", "/check"):
            double.store.set_check(args["id"], args["status"])
        elif route == ("GET", "/requests"):
            seen = double.requests()
            return self._reply(200, {"count": len(seen), "requests": seen})
        elif route == ("DELETE", "/requests"):
            double.clear_requests()
        else:
            return self._reply(404, {"error": f"no control {self.command} {self.path}"})
        return self._reply(200, {"ok": True})

    do_GET = do_POST = do_DELETE = _dispatch


class ControlServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, double):
        super().__init__(address, ControlHandler)
        self.double = double
        # A short poll interval keeps stopping the double quick.
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self.shutdown()
        self.server_close()
