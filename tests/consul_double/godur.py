"""Go's time.ParseDuration and Duration.String, because Consul parses TTL, LockDelay and ?wait
with the former and prints durations into its error texts with the latter; the double has to
accept, reject and word them the same way."""

_UNITS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_MAX = (1 << 63) - 1


def _quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_duration(text):
    """Returns nanoseconds; raises ValueError with Go's own message on bad input."""
    orig, s = text, text
    invalid = ValueError("time: invalid duration " + _quote(orig))
    neg = False
    if s and s[0] in "+-":
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise invalid
    total = 0
    while s:
        if not (s[0] == "." or s[0].isdigit()):
            raise invalid
        i = 0
        while i < len(s) and s[i].isdigit():
            i += 1
        whole, s = s[:i], s[i:]
        frac = ""
        if s.startswith("."):
            j = 1
            while j < len(s) and s[j].isdigit():
                j += 1
            frac, s = s[1:j], s[j:]
            if not whole and not frac:
                raise invalid
        elif not whole:
            raise invalid
        j = 0
        while j < len(s) and not (s[j] == "." or s[j].isdigit()):
            j += 1
        if j == 0:
            raise ValueError("time: missing unit in duration " + _quote(orig))
        unit_name, s = s[:j], s[j:]
        unit = _UNITS.get(unit_name)
        if unit is None:
            raise ValueError(f"time: unknown unit {_quote(unit_name)} in duration {_quote(orig)}")
        value = int(whole or "0") * unit
        if frac:
            value += int(frac) * unit // 10 ** len(frac)
        total += value
        if total > _MAX:
            raise invalid
    return -total if neg else total


def _fraction(v, precision):
    q, r = divmod(v, 10 ** precision)
    if r == 0:
        return q, ""
    return q, "." + str(r).rjust(precision, "0").rstrip("0")


def format_duration(ns):
    """Go's Duration.String(): 10s -> "10s", 24h -> "24h0m0s", 1.5ms -> "1.5ms"."""
    if ns == 0:
        return "0s"
    sign, u = ("-" if ns < 0 else ""), abs(ns)
    if u < 1_000:
        return f"{sign}{u}ns"
    if u < 1_000_000:
        q, f = _fraction(u, 3)
        return f"{sign}{q}{f}\u00b5s"
    if u < 1_000_000_000:
        q, f = _fraction(u, 6)
        return f"{sign}{q}{f}ms"
    secs, f = _fraction(u, 9)
    out = f"{secs % 60}{f}s"
    mins = secs // 60
    if mins:
        out = f"{mins % 60}m" + out
        if mins // 60:
            out = f"{mins // 60}h" + out
    return sign + out
