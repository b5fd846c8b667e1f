"""What the second user of test_hostile_users runs: it makes what it is asked to, where it is
asked, in place of what is there, and answers with what it made (inode and type) or why it could
not, a JSON line each. Given to the interpreter with -c: the other user may not be able to read
this file where the tests live."""
import json, os, socket, stat, sys
GARBAGE = b"\x1b]0;PWNED\x07{not a record\xff" + b"\x1b[2J" * 100
os.umask(0)

def made(path):
    st = os.lstat(path)
    return [st.st_ino, stat.S_IFMT(st.st_mode)]

def make(path, kind, target):
    # A file goes (the directory it is in is ours); a directory, A's, is moved aside.
    if os.path.lexists(path):
        if stat.S_ISDIR(os.lstat(path).st_mode):
            os.rename(path, path + ".aside")
        else:
            os.unlink(path)
    if kind == "fifo":
        os.mkfifo(path, 0o666)
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(path)
    elif kind == "symlink":
        os.symlink(target, path)
    elif kind == "directory":
        os.mkdir(path, 0o777)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if kind == "private" else 0o666)
        try:
            if kind == "sparse":
                os.ftruncate(fd, 64 << 30)
            else:
                os.write(fd, GARBAGE)
        finally:
            os.close(fd)
    return made(path)

for line in sys.stdin:
    request = json.loads(line)
    try:
        if request["op"] == "mkdir":
            os.mkdir(request["path"])
            os.chown(request["path"], -1, request["group"])
            os.chmod(request["path"], request["mode"])
            reply = {"ok": True, "made": made(request["path"])}
        else:
            reply = {"ok": True, "made": make(request["path"], request["kind"], request["target"])}
    except OSError as e:
        reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    print(json.dumps(reply), flush=True)
