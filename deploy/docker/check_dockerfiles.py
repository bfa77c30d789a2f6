#!/usr/bin/env python3
"""Static checks of deploy/docker/Dockerfile* (no Docker engine needed).

For each Dockerfile (build context = repository root):
- every COPY/ADD source without --from exists in the repo and is not excluded by the
  Dockerfile's .dockerignore; every COPY --from names an earlier stage;
- every repo script a RUN calls (scripts/..., deploy/...) exists and is executable;
- every `cmake --preset X` / `cmake --build --preset X` names a preset of CMakePresets.json;
- every binary of WQ_BINARIES is a target declared in a CMakeLists.txt; the ENTRYPOINT and
  the deploy/k8s container commands are among them;
- the final stage runs as a numeric non-root USER;
- the .dockerignore excludes the build directories, .git and .cache.
A self-test feeds a broken Dockerfile and expects findings.
Exit 0 = good, 1 = findings.
"""
import fnmatch
import glob
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = pathlib.Path(os.environ.get("WQ_SOURCE_DIR", HERE.parent.parent))
DOCKERFILES = ["Dockerfile", "Dockerfile.cuda"]
# Service binaries of DESIGN.md section 5 that are being written (no target yet).
MUST_IGNORE = ["build/dev/x.o", "build-deploy/x.o", ".git/HEAD", ".cache/default-model/x"]


def instructions(text):
    """-> [(line number, INSTRUCTION, arguments)] with continuations joined."""
    out, buf, start = [], "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not buf:
            start = n
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.strip().partition(" ")
        out.append((start, word.upper(), rest.strip()))
        buf = ""
    return out


def ignored(path, patterns):
    """Docker's .dockerignore semantics, enough for our patterns (no `!` exceptions)."""
    for p in patterns:
        p = p.rstrip("/")
        if fnmatch.fnmatch(path, p) or fnmatch.fnmatch(path, p + "/*"):
            return True
        if p.startswith("**/") and (fnmatch.fnmatch(path, p[3:]) or fnmatch.fnmatch(path, p[3:] + "/*")
                                    or fnmatch.fnmatch(path, "*/" + p[3:] + "/*")):
            return True
    return False


def tracked(source):
    """True if `source` (a path or glob relative to the context) names files git tracks:
    an untracked or empty directory is absent from a fresh clone."""
    if not glob.glob(str(ROOT / source)):
        return False
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", source],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return True  # no git: existence is all we can check
    return out.returncode != 0 or bool(out.stdout.strip())


def declared_targets():
    targets = set()
    for cm in ROOT.rglob("CMakeLists.txt"):
        rel = cm.relative_to(ROOT).parts
        if rel[0].startswith("build") or rel[0].startswith("."):
            continue
        text = cm.read_text()
        targets |= set(re.findall(r"wq_cc_binary\(\s*NAME\s+([\w.+-]+)", text))
        targets |= set(re.findall(r"add_executable\(\s*([\w.+-]+)", text))
        # cli/CMakeLists.txt names the binary through OUTPUT_NAME or a variable.
        targets |= set(re.findall(r"OUTPUT_NAME\s+([\w.+-]+)", text))
    return targets


def check(name, text, patterns):
    f = []
    presets = json.loads((ROOT / "CMakePresets.json").read_text())
    configure = {p["name"] for p in presets.get("configurePresets", [])}
    build = {p["name"] for p in presets.get("buildPresets", [])}
    stages, binaries, users, entry = [], None, [], None
    insts = instructions(text)
    for n, inst, args in insts:
        where = f"{name}:{n}"
        if inst == "FROM":
            m = re.search(r"\bAS\s+(\S+)", args, re.I)
            stages.append(m.group(1) if m else None)
            users = []
        elif inst in ("COPY", "ADD"):
            words = shlex.split(args)
            flags = [w for w in words if w.startswith("--")]
            paths = [w for w in words if not w.startswith("--")]
            src = paths[:-1]
            frm = [fl.split("=", 1)[1] for fl in flags if fl.startswith("--from=")]
            if frm:
                if frm[0] not in stages:
                    f.append(f"{where}: COPY --from={frm[0]} is not an earlier stage")
                continue
            for s in src:
                if not tracked(s):
                    f.append(f"{where}: COPY source {s} does not exist in the repository")
                elif ignored(s.rstrip("/"), patterns):
                    f.append(f"{where}: COPY source {s} is excluded by the .dockerignore")
        elif inst == "RUN":
            for script in re.findall(r"(?:/src/)?((?:scripts|deploy)/[\w./-]+\.(?:sh|py))", args):
                p = ROOT / script
                if not p.is_file() or not os.access(p, os.X_OK):
                    f.append(f"{where}: RUN uses {script}, which is not an executable file in the repo")
            for preset in re.findall(r"cmake\s+--preset\s+(\S+)", args):
                if preset not in configure:
                    f.append(f"{where}: configure preset {preset!r} not in CMakePresets.json")
            for preset in re.findall(r"cmake\s+--build\s+--preset\s+(\S+)", args):
                if preset not in build:
                    f.append(f"{where}: build preset {preset!r} not in CMakePresets.json")
        elif inst == "ARG" and args.startswith("WQ_BINARIES="):
            binaries = shlex.split(args.split("=", 1)[1])[0].split()
        elif inst == "USER":
            users.append(args)
        elif inst == "ENTRYPOINT":
            entry = json.loads(args)[0]
    if binaries is None:
        return f + [f"{name}: no ARG WQ_BINARIES"]
    known = declared_targets()
    for b in binaries:
        if b not in known:
            f.append(f"{name}: binary {b} is not a declared CMake target")
    if entry not in binaries:
        f.append(f"{name}: ENTRYPOINT {entry} is not one of WQ_BINARIES")
    for k8s in (ROOT / "deploy" / "k8s").rglob("*.yaml"):
        for cmd in re.findall(r"command:\s*\[\s*([\w-]+)", k8s.read_text()):
            if cmd not in binaries:
                f.append(f"{name}: {k8s.relative_to(ROOT)} runs {cmd}, not in the image")
    if not users or not re.fullmatch(r"[1-9]\d*(:[1-9]\d*)?", users[-1]):
        f.append(f"{name}: the final stage must end with a numeric non-root USER, got {users}")
    for path in MUST_IGNORE:
        if not ignored(path, patterns):
            f.append(f"{name}: .dockerignore does not exclude {path}")
    return f


def load_ignore(dockerfile):
    p = HERE / (dockerfile + ".dockerignore")
    if not p.exists():
        return None
    return [l.strip() for l in p.read_text().splitlines() if l.strip() and not l.startswith("#")]


def main():
    findings = []
    for name in DOCKERFILES:
        patterns = load_ignore(name)
        if patterns is None:
            findings.append(f"{name}: no {name}.dockerignore next to it")
            patterns = []
        found = check(name, (HERE / name).read_text(), patterns)
        print(f"{name}: {len(instructions((HERE / name).read_text()))} instructions, {len(found)} findings")
        findings += found
    broken = ("FROM debian:bookworm AS build\nCOPY no/such/dir /src\nRUN scripts/missing.sh\n"
              "RUN cmake --preset nosuch\nCOPY cmake /src/cmake\nARG WQ_BINARIES=\"windquant-nope\"\n"
              "FROM debian:bookworm-slim\nCOPY --from=nostage /x /x\nENTRYPOINT [\"windquant\"]\n")
    probe = check("self-test", broken, ["build", "cmake"])
    expected = ["no/such/dir", "scripts/missing.sh", "nosuch", "excluded", "windquant-nope",
                "nostage", "ENTRYPOINT", "USER", "build-deploy"]
    for e in expected:
        if not any(e in m for m in probe):
            findings.append(f"self-test: no finding mentioning {e!r} in {probe}")
    for m in findings:
        print("FAIL", m)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
