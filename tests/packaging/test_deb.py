"""The Debian package: cpack builds it from the build tree (LOCK_BUILD_DIR), lintian has nothing
to say about it beyond the overrides it ships, its Depends name exactly the packages of the shared
libraries its programs load, and, installed with dpkg into a scratch root (never this machine's
own /usr or dpkg database), it runs, and its manual page and completions are where man,
bash-completion, zsh and fish look for them."""

import glob
import gzip
import hashlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("LOCK_BUILD_DIR") or os.path.join(ROOT, "build")

# Tags the package overrides on purpose, each explained in packaging/lintian-overrides (the
# comments there are what lintian prints beside them).
ALLOWED_OVERRIDES = {"statically-linked-binary", "initial-upload-closes-no-bugs"}

DPKG_STATUS = "/var/lib/dpkg/status"


def run(argv, **kwargs):
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("timeout", 240)
    return subprocess.run(argv, **kwargs)


def checked(argv, **kwargs):
    r = run(argv, **kwargs)
    if r.returncode != 0:
        raise AssertionError(f"{argv} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout


def file_digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def depends_packages(field):
    """Package names in a Depends field, each with its version constraint."""
    out = {}
    for clause in filter(None, (c.strip() for c in field.split(","))):
        m = re.fullmatch(r"([a-z0-9][a-z0-9+.-]+)(?::\w+)?(?: \(([<>=]+ [^)]+)\))?", clause)
        if not m:
            raise AssertionError(f"unexpected Depends clause {clause!r}")
        out[m.group(1)] = m.group(2)
    return out


def owner_of(path):
    """The installed package that ships a library path (merged /usr or not), or None."""
    candidates = {path, os.path.realpath(path)}
    for p in list(candidates):
        if p.startswith("/usr/"):
            candidates.add(p[4:])
        else:
            candidates.add("/usr" + p)
    for p in sorted(candidates):
        r = run(["dpkg-query", "-S", p])
        if r.returncode == 0:
            return r.stdout.split(":")[0].split(",")[0].strip()
    return None


class DebPackageTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        for tool in ("cpack", "dpkg-deb", "dpkg-shlibdeps", "lintian", "file"):
            if not shutil.which(tool):
                raise unittest.SkipTest(f"{tool} is not installed (scripts/install-deps.sh)")
        cls.tmp = tempfile.mkdtemp(prefix="lock-deb-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.status_before = file_digest(DPKG_STATUS)
        # cpack first builds the preinstall target, which is quick only on a tree already built
        # (as CTest runs it). A group-writable umask: the modes in the package must not depend
        # on it.
        checked(["cpack", "--config", os.path.join(BUILD, "CPackConfig.cmake"), "-B", cls.tmp],
                cwd=BUILD, preexec_fn=lambda: os.umask(0o002), timeout=200)
        debs = glob.glob(os.path.join(cls.tmp, "*.deb"))
        if len(debs) != 1:
            raise AssertionError(f"cpack made {debs}, not one .deb")
        cls.deb = debs[0]
        cls.fields = {}
        for name in ("Package", "Version", "Architecture", "Section", "Priority", "Maintainer",
                     "Depends", "Description"):
            cls.fields[name] = checked(["dpkg-deb", "--field", cls.deb, name]).strip()
        cls.extracted = os.path.join(cls.tmp, "extracted")
        checked(["dpkg-deb", "-x", cls.deb, cls.extracted])
        cls.install()

    def packaged(self, *parts):
        return os.path.join(self.extracted, *parts)

    # --- the package as built ---------------------------------------------------------------

    def test_lintian_finds_nothing_but_the_documented_overrides(self):
        shown = run(["lintian", "--display-info", "--pedantic", "--show-overrides", self.deb])
        print(f"\nlintian {os.path.basename(self.deb)}:\n{shown.stdout}", end="")
        tags = re.findall(r"^([EWIPXO]): \S+: (\S+)", shown.stdout, re.M)
        self.assertEqual([t for t in tags if t[0] in "EW"], [], shown.stdout)
        self.assertLessEqual({tag for kind, tag in tags if kind == "O"}, ALLOWED_OVERRIDES)
        # Shown overrides count towards lintian's own verdict, so that comes from a plain run.
        verdict = run(["lintian", "--fail-on", "error,warning", self.deb])
        self.assertEqual(verdict.returncode, 0, verdict.stdout + verdict.stderr)

    def test_control_fields(self):
        version = checked(["dpkg-parsechangelog", "-l", os.path.join(ROOT, "packaging", "changelog"),
                           "-S", "Version"]).strip()
        with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
            project_version = re.search(r"project\(lock VERSION (\S+)", f.read()).group(1)
        self.assertEqual(self.fields["Package"], "lock")
        self.assertEqual(self.fields["Version"], version)
        self.assertTrue(version.startswith(project_version + "-"), version)
        self.assertEqual(self.fields["Architecture"],
                         checked(["dpkg", "--print-architecture"]).strip())
        self.assertEqual((self.fields["Section"], self.fields["Priority"]), ("utils", "optional"))
        self.assertRegex(self.fields["Maintainer"], r"^[^<>]+ <[^<>@\s]+@[^<>@\s]+>$")
        summary, _, extended = self.fields["Description"].partition("\n")
        self.assertTrue(summary and extended.strip(), self.fields["Description"])

    def test_depends_are_the_packages_of_the_libraries_loaded(self):
        """dpkg-shlibdeps ran on every dynamically linked program: Depends name the packages of
        exactly the libraries they need (directly), with a minimum version each. A statically
        linked program needs none."""
        needed = {}
        for path in glob.glob(self.packaged("**"), recursive=True):
            if os.path.isfile(path) and not os.path.islink(path) and is_elf(path):
                dynamic = checked(["readelf", "-d", path])
                for soname in re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", dynamic):
                    needed.setdefault(soname, set()).add(os.path.relpath(path, self.extracted))
        if not needed:
            self.assertEqual(self.fields["Depends"], "")
            return
        paths = {}
        for program in {p for programs in needed.values() for p in programs}:
            ldd = checked(["ldd", self.packaged(program)])
            paths.update(re.findall(r"^\s*(\S+) => (/\S+)", ldd, re.M))
            # The dynamic loader is listed by its path alone; a program needs it by name when it
            # links part of the C++ runtime in (__tls_get_addr).
            loaders = re.findall(r"^\s*(/\S+) \(0x", ldd, re.M)
            paths.update((os.path.basename(p), p) for p in loaders)
        expected = set()
        for soname, programs in needed.items():
            self.assertIn(soname, paths, f"{soname}, needed by {programs}, is not on this machine")
            package = owner_of(paths[soname])
            self.assertIsNotNone(package, f"no installed package ships {paths[soname]}")
            expected.add(package)
        depends = depends_packages(self.fields["Depends"])
        self.assertEqual(set(depends), expected, self.fields["Depends"])
        for package, constraint in depends.items():
            self.assertRegex(constraint or "", r"^>= \S+$", f"{package} has no minimum version")

    def test_files_modes_and_owners(self):
        listing = checked(["dpkg-deb", "--contents", self.deb]).splitlines()
        self.assertTrue(listing)
        for line in listing:
            mode, owner, _size, _date, _time, name = line.split(None, 5)
            self.assertEqual(owner, "root/root", line)
            self.assertTrue(name.startswith("./usr/"), line)
            path = self.packaged(name)
            if mode.startswith("d"):
                self.assertEqual(mode, "drwxr-xr-x", line)
            elif is_elf(path):
                self.assertEqual(mode, "-rwxr-xr-x", line)
                self.assertIn(", stripped", checked(["file", "-b", path]), line)
                sections = checked(["readelf", "-S", "-W", path])
                self.assertNotRegex(sections, r"\] \.(debug_\w+|symtab|comment)\s", line)
            else:
                self.assertEqual(mode, "-rw-r--r--", line)

    def assert_gzip_9n(self, path):
        """Compressed as gzip -9n does it: no file name, no time stamp, best compression."""
        with open(path, "rb") as f:
            header = f.read(10)
        self.assertEqual(header[:3], b"\x1f\x8b\x08", path)
        self.assertEqual(header[3] & 0x08, 0, f"{path} records a file name")
        self.assertEqual(header[4:8], b"\0\0\0\0", f"{path} records a time stamp")
        self.assertEqual(header[8], 2, f"{path} is not compressed with -9")

    def test_documentation_files(self):
        doc = self.packaged("usr", "share", "doc", "lock")
        changelog = os.path.join(doc, "changelog.Debian.gz")
        self.assert_gzip_9n(changelog)
        with gzip.open(changelog, "rt") as f, open(os.path.join(ROOT, "packaging", "changelog")) as g:
            self.assertEqual(f.read(), g.read())

        with open(os.path.join(doc, "copyright")) as f:
            copyright_file = f.read()
        with open(os.path.join(ROOT, "LICENSE")) as f:
            license_text = f.read()
        paragraphs = [p for p in re.split(r"\n\s*\n", copyright_file) if p.strip()]
        self.assertTrue(paragraphs[0].startswith(
            "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"))
        holder = re.search(r"^Copyright \(c\) (.+)$", license_text, re.M).group(1)
        self.assertIn(f"Files: *\nCopyright: {holder}\nLicense: Expat", copyright_file)
        expat = [p for p in paragraphs if p.startswith("License: Expat\n")]
        self.assertEqual(len(expat), 1, "no stand-alone License: Expat paragraph")
        text = "\n".join("" if line == " ." else line[1:] for line in expat[0].splitlines()[1:])
        self.assertIn(text.strip(), license_text)
        self.assertTrue(text.startswith("Permission is hereby granted"))
        # Every license named has its text in the file (or in common-licenses).
        named = set(re.findall(r"^License: (\S+)$", copyright_file, re.M))
        for name in named:
            self.assertRegex(copyright_file, rf"(?m)^License: {re.escape(name)}\n ")

        for example in glob.glob(os.path.join(ROOT, "packaging", "examples", "*")):
            with open(example) as f, open(os.path.join(doc, "examples",
                                                       os.path.basename(example))) as g:
                self.assertEqual(f.read(), g.read(), example)

    # --- the package installed into a scratch root ------------------------------------------

    @classmethod
    def install(cls):
        """dpkg -i into <tmp>/root, with a database of its own that holds, from this machine's,
        only the packages the Depends name, so that dpkg checks them as on a real install."""
        cls.root = os.path.join(cls.tmp, "root")
        admin = os.path.join(cls.root, "var", "lib", "dpkg")
        for sub in ("info", "updates", "triggers"):
            os.makedirs(os.path.join(admin, sub))
        stanzas = []
        for package in depends_packages(cls.fields["Depends"]):
            stanzas.append(checked(["dpkg-query", "--status", package]).strip() + "\n")
            qualified = checked(["dpkg-query", "-W", "-f", "${binary:Package}", package]).strip()
            open(os.path.join(admin, "info", f"{qualified}.list"), "w").close()
        with open(os.path.join(admin, "status"), "w") as f:
            f.write("\n".join(stanzas))
        cls.dpkg = ["dpkg", f"--root={cls.root}", f"--admindir={admin}",
                    f"--log={os.path.join(cls.tmp, 'dpkg.log')}"]
        if os.geteuid() != 0:
            cls.dpkg.append("--force-not-root")
        cls.installed = run([*cls.dpkg, "--install", cls.deb])

    def test_dpkg_installs_it_into_a_scratch_root(self):
        r = self.installed
        self.assertEqual((r.returncode, r.stderr), (0, ""), r.stdout)
        listed = checked([*self.dpkg, "--listfiles", "lock"]).split()
        self.assertIn("/usr/bin/lock", listed)
        # Nothing of this reached the machine's own database.
        self.assertEqual(file_digest(DPKG_STATUS), self.status_before)
        self.assertNotEqual(run(["dpkg-query", "-W", "lock"]).returncode, 0,
                            "lock is installed on this machine; cannot tell the copies apart")

    def installed_root(self):
        if self.installed.returncode != 0:
            self.fail(f"dpkg --install failed: {self.installed.stdout}{self.installed.stderr}")
        return self.root

    def test_installed_lock_runs(self):
        root = self.installed_root()
        lock = os.path.join(root, "usr", "bin", "lock")
        out = checked([lock, "-version"])
        self.assertEqual(out.split()[:2], ["lock", self.fields["Version"].rsplit("-", 1)[0]])

        state = os.path.join(self.tmp, "state")
        env = dict(os.environ, SHELL="/bin/sh")
        for var in ("LOCK_BACKEND", "LOCK_STATE_DIR", "CONSUL_HTTP_ADDR"):
            env.pop(var, None)
        r = run([lock, "-state-dir", state, "-preserve-status", "pkg/test",
                 'echo "$CONSUL_LOCK_HELD $LOCK_PREFIX"; exit 7'], env=env, timeout=60)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (7, "true pkg/test\n", ""))
        status = run([lock, "-state-dir", state, "-status", "pkg/test"], env=env, timeout=60)
        self.assertEqual(status.returncode, 3, status.stdout + status.stderr)

    def test_installed_lock_finds_its_companions(self):
        """The server backends are in companions under /usr/libexec/lock (lock-net for Consul and
        etcd, lock-zookeeper for ZooKeeper, lock-postgres for PostgreSQL), which lock looks for
        relative to itself: installed, it gets that far (and fails only to reach the server, on a
        loopback port where nothing listens). lock-postgres loads the system's libpq."""
        root = self.installed_root()
        if not glob.glob(os.path.join(root, "usr", "libexec", "lock", "*")):
            self.skipTest("the package has no companion in /usr/libexec/lock")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        for backend, companion, endpoints in (
                ("etcd", "lock-net", f"127.0.0.1:{port}"),
                ("zookeeper", "lock-zookeeper", f"127.0.0.1:{port}"),
                ("postgres", "lock-postgres", f"host=127.0.0.1 port={port} connect_timeout=2")):
            with self.subTest(backend=backend):
                r = run([os.path.join(root, "usr", "bin", "lock"), "-backend", backend, "-endpoints",
                         endpoints, "-timeout", "1s", "pkg/test", "true"], env=env, timeout=60)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertTrue(r.stderr.startswith("lock: "), r.stderr)
                self.assertNotIn(companion, r.stderr)

    def test_lock_postgres_is_shipped_and_libpq5_is_a_dependency(self):
        """lock-postgres links libpq dynamically (its TLS, Kerberos and LDAP libraries stay out of
        the other programs, and libpq's security updates reach it): the package ships it beside
        the other companions, and dpkg-shlibdeps names libpq5 in Depends, with a minimum
        version, as the other test checks for every library."""
        companion = self.packaged("usr", "libexec", "lock", "lock-postgres")
        self.assertTrue(os.path.isfile(companion) and is_elf(companion), companion)
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]",
                            checked(["readelf", "-d", companion]))
        self.assertIn("libpq.so.5", needed)
        depends = depends_packages(self.fields["Depends"])
        self.assertIn("libpq5", depends, self.fields["Depends"])
        self.assertRegex(depends["libpq5"] or "", r"^>= \S+$", self.fields["Depends"])
        # Nothing else of the package needs libpq: the static lock and the other companions
        # must not load it.
        for path in glob.glob(self.packaged("usr", "**"), recursive=True):
            if path != companion and os.path.isfile(path) and is_elf(path):
                self.assertNotIn("libpq.so.5", checked(["readelf", "-d", path]), path)

    def test_manual_page_is_where_man_looks(self):
        root = self.installed_root()
        page = os.path.join(root, "usr", "share", "man", "man1", "lock.1.gz")
        self.assert_gzip_9n(page)
        with gzip.open(page, "rt") as f, open(os.path.join(ROOT, "man", "lock.1")) as g:
            self.assertEqual(f.read(), g.read())
        if not shutil.which("man"):
            self.skipTest("man is not installed")
        env = {k: v for k, v in os.environ.items() if k != "MANPATH"}
        self.assertIn("/usr/share/man", checked(["manpath", "-q"], env=env).strip().split(":"))
        found = checked(["man", "-M", os.path.join(root, "usr", "share", "man"), "-w", "lock"])
        self.assertEqual(found.strip(), page)
        shown = run(["man", "-M", os.path.join(root, "usr", "share", "man"), "-P", "cat", "lock"],
                    env=dict(env, MANWIDTH="80", LC_ALL="C.UTF-8"))
        self.assertEqual((shown.returncode, shown.stderr), (0, ""))
        self.assertIn("run a command only while holding a lock", shown.stdout)

    def completion_env(self, root):
        home = os.path.join(self.tmp, "home")
        os.makedirs(home, exist_ok=True)
        env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"),
                   XDG_DATA_HOME=os.path.join(home, ".local", "share"),
                   XDG_CACHE_HOME=os.path.join(home, ".cache"),
                   XDG_DATA_DIRS=os.path.join(root, "usr", "share"),
                   PATH=os.path.join(root, "usr", "bin") + os.pathsep + os.environ["PATH"])
        return env

    def test_bash_completion_finds_it(self):
        """bash-completion loads completions on demand from <XDG_DATA_DIRS>/bash-completion/
        completions; pointed at the scratch root's /usr/share, it finds the package's."""
        loader = "/usr/share/bash-completion/bash_completion"
        if not os.path.exists(loader):
            self.skipTest("bash-completion is not installed")
        root = self.installed_root()
        script = f"""
source {loader}
__load_completion lock || exit 3
COMP_WORDS=(lock -ti); COMP_CWORD=1; COMP_LINE="lock -ti"; COMP_POINT=${{#COMP_LINE}}
$(complete -p lock | sed 's/.*-F \\([^ ]*\\) .*/\\1/') lock -ti lock
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
        r = run(["bash", "--norc", "--noprofile", "-c", script], env=self.completion_env(root),
                cwd=self.tmp, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("-timeout", r.stdout.split())

    def test_fish_finds_it(self):
        """fish autoloads from <XDG_DATA_DIRS>/fish/vendor_completions.d."""
        if not shutil.which("fish"):
            self.skipTest("fish is not installed")
        root = self.installed_root()
        r = run(["fish", "-c", "complete -C 'lock -ti'"], env=self.completion_env(root),
                cwd=self.tmp, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("-timeout", [line.split("\t")[0] for line in r.stdout.splitlines()])

    def test_zsh_finds_it(self):
        """zsh's fpath is built in: the package's directory must be on it, and compinit must
        register the file there for lock."""
        if not shutil.which("zsh"):
            self.skipTest("zsh is not installed")
        root = self.installed_root()
        fpath = checked(["zsh", "-f", "-c", "print -rl -- $fpath"]).splitlines()
        installed = glob.glob(os.path.join(root, "usr", "share", "zsh", "*", "_lock"))
        self.assertEqual(len(installed), 1, installed)
        directory = os.path.dirname(installed[0])
        self.assertIn("/" + os.path.relpath(directory, root), fpath)
        env = self.completion_env(root)
        r = run(["zsh", "-f", "-c", f"fpath=({directory} $fpath); autoload -Uz compinit; "
                 f"compinit -u -d {self.tmp}/zcompdump; print -r -- $_comps[lock]"],
                env=env, cwd=self.tmp, stdin=subprocess.DEVNULL)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "_lock"), r.stderr)


if __name__ == "__main__":
    unittest.main()
