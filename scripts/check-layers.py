#!/usr/bin/env python3
"""Include arrows run down only: every #include "part/..." of a project file names a part
at or below the file's own (STYLE.md "Layout shows the architecture"; README's table).

The parts, lowest first (a part may include its own level and those below):
  common/base
  common/metrics, common/store, common/report, common/model
  common/net
  common/plan                   actions, effective bits, the unit table, plans
  common/quant, common/search   the numerics; the searches that are not RL
  common/export, common/rl, common/stage, common/service
  common/transport
  common/config                 the run config embeds the components' Options
  actor, evaluator, learner     the roles: never each other
  job                           the run config mapped onto the roles
  services, cli, bench, tests, deploy

Test code (files named *_test.cc, *_fuzz.cc, *_test_*.h, test_*.h) may include any
part below the roles (a test may check its part together with the parts that use it, e.g.
a session's plan exported): nothing links a test. common/testing (the test doubles and
helpers) may include any common/ part, and only test code and the top (bench, tests)
may include it.

usage: scripts/check-layers.py   (exit 1 and one line per arrow that runs up)
"""
import os
import re
import sys

LEVELS = [
    ["common/base"],
    ["common/metrics", "common/store", "common/report", "common/model"],
    ["common/net"],
    ["common/plan"],
    ["common/quant", "common/search"],
    ["common/export", "common/rl", "common/stage", "common/service"],
    ["common/transport"],
    ["common/config"],
    ["actor", "evaluator", "learner"],
    ["job"],
    ["services", "cli", "bench", "tests", "deploy"],
]
LEVEL = {part: i for i, parts in enumerate(LEVELS) for part in parts}
ROLES = {"actor", "evaluator", "learner"}
TOP = set(LEVELS[-1])



def part_of(path):
    parts = path.split("/")
    if parts[0] == "common" and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0]


def is_test_code(name):
    return re.search(r"(_test\.cc|_fuzz\.cc|_test_[a-z_]*\.h|^test_[a-z_]*\.h)$", name) is not None


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    bad = []
    for top in sorted(LEVEL):
        for dirpath, _, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith((".h", ".cc", ".inc")):
                    continue
                path = os.path.join(dirpath, name)
                src = part_of(path)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                        if not m or not os.path.exists(m.group(1)):
                            continue
                        dst = part_of(m.group(1))
                        if (dst == "common/testing" and src != dst and src not in TOP
                                and not is_test_code(name)):
                            bad.append(f"{path}:{lineno}: {src} includes {m.group(1)} "
                                       "(a test double or helper in product code)")
                            continue
                        if dst == src or dst not in LEVEL or src in TOP:
                            continue
                        if src == "common/testing" and dst.startswith("common/"):
                            continue
                        if is_test_code(name) and LEVEL[dst] < LEVEL["actor"]:
                            continue
                        up = LEVEL[dst] > LEVEL[src]
                        sideways = src in ROLES and dst in ROLES
                        if up or sideways:
                            bad.append(f"{path}:{lineno}: {src} includes {m.group(1)} "
                                       f"({'a role beside it' if sideways else 'a part above it'})")
    for line in bad:
        print(line)
    print(f"check-layers: {len(bad)} include arrows run up" if bad else
          "check-layers: every include arrow runs down")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
