#!/usr/bin/env bash
# readme.sh - every shell block of README.md (```sh) runs as written, in a
# scratch directory where build/, models/ and data/ are the repository's
# (files the commands write land there). The line before a block may mark
# it:
#   <!-- readme: make targets -->  each `make X` names a target of the Makefile
#                                  (make -n X succeeds; nothing is built)
#   <!-- readme: example, ... -->  needs a file the repository does not have,
#                                  or minutes: every `build/r1infer CMD` line is
#                                  checked instead, each of its flags listed by
#                                  `build/r1infer CMD --help`
#   <!-- readme: server -->        the first line starts `serve` in the
#                                  background; the test waits for /health,
#                                  runs the other lines, and stops the server
#                                  (port 8080 is replaced by a free one)
# Needs the default model (scripts/get-model.sh). Last line:
# "readme: P passed, F failed".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${R1_BIN:-build/r1infer}
case $BIN in /*) ;; *) BIN=$ROOT/$BIN ;; esac
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ln -s "$(dirname "$BIN")" "$T/build" # the build the binary belongs to (build-san/ for an ASan run)
for d in models data scripts tools docs tests; do ln -s "$ROOT/$d" "$T/$d"; done
cd "$T" && python3 - "$ROOT" "$T" <<'PY'
import json, os, re, shlex, socket, subprocess, sys, time, urllib.request

root, work = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(ok, name, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name}" + (f"\n     {detail.strip()[-600:]}" if detail else ""))


def blocks(text):
    """(marker, first line number, code) of every ```sh block."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            j = i - 1
            while j >= 0 and not lines[j].strip():
                j -= 1
            m = re.match(r"<!-- readme: (.*?) -->", lines[j].strip()) if j >= 0 else None
            k = i + 1
            while k < len(lines) and lines[k].strip() != "```":
                k += 1
            out.append((m.group(1) if m else "", i + 2, "\n".join(lines[i + 1:k])))
            i = k
        i += 1
    return out


def commands(code):
    """The block's command lines, continuations joined, comments dropped."""
    return [c for c in (l.split(" #")[0].strip() for l in code.replace("\\\n", " ").split("\n"))
            if c and not c.startswith("#")]


def sh(cmd, timeout=120):
    # a random-weight model prints random bytes: read them, not as UTF-8
    p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", cmd], cwd=work, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, errors="replace", timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def help_of(sub):
    return subprocess.run(["build/r1infer", sub, "--help"], cwd=work, capture_output=True, text=True).stdout


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


readme = open(os.path.join(root, "README.md")).read()
found = blocks(readme)
check(len(found) >= 10, f"README.md has shell blocks ({len(found)})")
makefile = open(os.path.join(root, "Makefile")).read()
for marker, line, code in found:
    where = f"README.md:{line}"
    if marker == "make targets":
        for c in commands(code):
            target = c.split()[1] if c.startswith("make ") and len(c.split()) > 1 else None
            check(target is not None, f"{where}: `{c}` is a make command")
            if target:
                rc, out = subprocess.run(["make", "-n", target], cwd=root, capture_output=True, text=True,
                                         timeout=60).returncode, ""
                check(rc == 0, f"{where}: `make {target}` is a target of the Makefile")
    elif marker.startswith("example"):
        for c in commands(code):
            words = shlex.split(c)
            if not words or words[0] != "build/r1infer":
                continue  # another program (a download): shown, not run
            sub = words[1]
            text = help_of(sub)
            flags = [w for w in words[2:] if re.match(r"^--?[a-zA-Z]", w)]
            missing = [f for f in flags if not re.search(r"(^|[\s,(])" + re.escape(f) + r"([\s,=)]|$)", text, re.M)]
            check(text and not missing, f"{where}: `r1infer {sub}` takes {' '.join(flags) or 'no flags'}",
                  f"not in `r1infer {sub} --help`: {missing}")
    elif marker == "server":
        cmds = commands(code)
        port = str(free_port())
        start = cmds[0].replace("8080", port).rstrip("&").strip()
        log = open(os.path.join(work, "serve.log"), "w")
        srv = subprocess.Popen(["bash", "-c", "exec " + start], cwd=work, stdout=log, stderr=subprocess.STDOUT)
        up = False
        for _ in range(300):
            try:
                up = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).status == 200
                break
            except Exception:
                if srv.poll() is not None:
                    break
                time.sleep(0.1)
        check(up, f"{where}: `{cmds[0]}` serves /health", open(os.path.join(work, "serve.log")).read())
        for c in cmds[1:]:
            rc, out = sh(c.replace("8080", port))
            ok = rc == 0
            try:
                ok = ok and len(json.loads(out)["choices"][0]["message"]["content"]) > 0
            except Exception:
                ok = False
            check(ok, f"{where}: `{c[:60]}...` answers with a message", out)
        srv.terminate()
        try:
            srv.wait(timeout=20)
        except subprocess.TimeoutExpired:
            srv.kill()
    elif marker:
        check(False, f"{where}: unknown marker '{marker}'")
    else:
        t0 = time.time()
        rc, out = sh(code)
        first = commands(code)[0]
        check(rc == 0, f"{where}: `{first[:70]}` runs ({time.time() - t0:.1f} s)", out)

print(f"readme: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
