"""ACL tokens for the double, limited to what `lock` needs: key prefixes, sessions, agent read.

The configuration file is JSON:

    {
      "tokens": {
        "<secret>": {"accessor": "<optional AccessorID>",
                     "key_prefix": {"service/web/": "write", "": "read"},
                     "session": "write", "agent": "read"}
      },
      "anonymous": {"key_prefix": {}, "session": "deny", "agent": "deny"}
    }

Levels are "deny", "read" and "write" (write implies read). As in Consul, the longest matching
key prefix decides, and whatever no rule grants is denied (default policy deny). A request
without a token uses the anonymous token; an unknown secret is refused with "ACL not found".

Denials use the wording of Consul 1.16's acl.PermissionDeniedError (acl/errors.go), e.g.
  Permission denied: token with AccessorID '<id>' lacks permission 'key:write' on "<key>"
"""

import json
import uuid

ANONYMOUS_ACCESSOR = "00000000-0000-0000-0000-000000000002"  # acl.AnonymousTokenID
_LEVELS = {"deny": 0, "read": 1, "write": 2}


class PermissionDenied(Exception):
    """Answered with 403 and the message."""


class Authorizer:
    def __init__(self, accessor, rules):
        self.accessor = accessor
        self._prefixes = {p: _LEVELS[lvl] for p, lvl in rules.get("key_prefix", {}).items()}
        self._session = _LEVELS[rules.get("session", "deny")]
        self._agent = _LEVELS[rules.get("agent", "deny")]

    def _deny(self, resource, level, name):
        if self.accessor == ANONYMOUS_ACCESSOR:
            who, tail = "anonymous token", (". The anonymous token is used implicitly when a "
                                            "request does not specify a token.")
        else:
            who, tail = f"token with AccessorID '{self.accessor}'", ""
        raise PermissionDenied(
            f"Permission denied: {who} lacks permission '{resource}:{level}' on \"{name}\"{tail}")

    def _key_level(self, key):
        matches = [p for p in self._prefixes if key.startswith(p)]
        return self._prefixes[max(matches, key=len)] if matches else 0

    def can_read_key(self, key):
        return self._key_level(key) >= 1

    def key_read(self, key):
        if self._key_level(key) < 1:
            self._deny("key", "read", key)

    def key_write(self, key):
        if self._key_level(key) < 2:
            self._deny("key", "write", key)

    def key_write_prefix(self, prefix):
        # A recursive delete also needs every more specific rule under the prefix to allow it.
        if self._key_level(prefix) < 2 or any(
                p.startswith(prefix) and lvl < 2 for p, lvl in self._prefixes.items()):
            self._deny("key", "write", prefix)

    def can_read_session(self, node):
        return self._session >= 1

    def session_write(self, node):
        if self._session < 2:
            self._deny("session", "write", node)

    def agent_read(self, node):
        if self._agent < 1:
            self._deny("agent", "read", node)


class AllowAll(Authorizer):
    """What every request gets when ACLs are disabled."""

    def __init__(self):
        super().__init__("", {"key_prefix": {"": "write"}, "session": "write", "agent": "read"})


class Acl:
    def __init__(self, path=None):
        self.enabled = path is not None
        self._tokens = {}
        self._anonymous = AllowAll()
        if self.enabled:
            with open(path) as f:
                config = json.load(f)
            for secret, rules in config.get("tokens", {}).items():
                accessor = rules.get("accessor") or str(uuid.uuid5(uuid.NAMESPACE_OID, secret))
                self._tokens[secret] = Authorizer(accessor, rules)
            self._anonymous = Authorizer(ANONYMOUS_ACCESSOR, config.get("anonymous", {}))

    def resolve(self, secret):
        if not self.enabled or not secret:
            return self._anonymous
        if secret not in self._tokens:
            raise PermissionDenied("ACL not found")
        return self._tokens[secret]
