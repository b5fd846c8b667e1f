"""-metrics-file as monitoring reads it: the samples of the file, and promtool's verdict on it."""

import re
import shutil
import subprocess

SAMPLE = re.compile(r'^([a-z_]+)\{((?:[a-z_]+="(?:[^"\\\n]|\\.)*",?)*)\} (\S+)$')
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\\n]|\\.)*)"')


def unquote(value):
    return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def read_metrics(path, prefix, backend):
    """The file's samples as {name: value}, lock_run_outcome's as {"lock_run_outcome:ran": 1...};
    every sample must be labelled with `prefix` and `backend`."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    samples = {}
    for line in text.splitlines():
        if line.startswith(("# HELP ", "# TYPE ")):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise AssertionError(f"not a sample line: {line!r}")
        labels = {k: unquote(v) for k, v in LABEL.findall(m.group(2))}
        if (labels.pop("prefix", None), labels.pop("backend", None)) != (prefix, backend):
            raise AssertionError(f"labelled for another prefix or backend: {line!r}")
        name = m.group(1) + "".join(f":{v}" for v in labels.values())
        samples[name] = float(m.group(3))
    return samples


def outcome(samples):
    """The one outcome the file sets to 1."""
    ones = [k.split(":")[1] for k, v in samples.items() if k.startswith("lock_run_outcome:") and v == 1]
    if len(ones) != 1:
        raise AssertionError(f"not one outcome: {samples}")
    return ones[0]


def promtool_missing():
    return None if shutil.which("promtool") else "promtool is missing (Debian's prometheus package)"


def promtool_check(path):
    """promtool's complaints about the file, or "" when it has none."""
    with open(path, "rb") as f:
        r = subprocess.run(["promtool", "check", "metrics"], stdin=f, capture_output=True, text=True,
                           timeout=60)
    return "" if r.returncode == 0 else f"exit {r.returncode}: {r.stdout}{r.stderr}"
