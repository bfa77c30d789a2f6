#!/usr/bin/env python3
"""Checks deploy/grafana against a LIVE windquant /metrics endpoint.

1. Static: uid "windquant-run", schemaVersion, the DS_PROMETHEUS datasource variable used
   by every panel and query, the `run` variable (label_values of the `run` label) that every
   windquant and process selector filters on, unique panel ids/refIds, no overlapping panels,
   the panels operators rely on (process memory/CPU and GPU panels included), the
   provisioning YAML files.
2. PromQL: every query parses (`promtool check rules` on the queries as recording rules,
   Grafana's $__rate_interval replaced by 5m).
3. Live: either starts the exporter command (a process that serves the windquant catalogue
   and prints "metrics_port=<port>" once serving) and scrapes
   http://127.0.0.1:<port>/metrics, or (--urls) scrapes the /metrics of running windquant
   processes (learner, evaluator, actors of a real run), with curl, and checks that every
   metric name used by every query exists there (in the union of the scrapes)
   (`_bucket/_sum/_count` are stripped and must belong to a histogram that exposes them),
   that every catalogue metric of common/metrics/metric_names.h is on the dashboard,
   and that every scrape lints clean with `promtool check metrics`. The exporter must exit
   0 on SIGTERM. Metrics of other exporters: the standard process metrics
   (process_resident_memory_bytes, process_cpu_seconds_total) must have their standard
   type, and must be exported as soon as an endpoint exports any process_* family (until
   the windquant processes export them this is printed as a NOTE); NVIDIA dcgm-exporter
   names (DCGM_FI_*) must be among its documented fields (not scraped here).
4. Self-test: a misspelled metric, a non-windquant metric, a misspelled dcgm-exporter
   field and a misspelled process metric must be reported.

Usage: check_dashboard.py --exporter CMD [ARGS...]
       check_dashboard.py --urls URL [URL...]
Exit 0 = good, 1 = findings or a missing tool (curl, promtool: scripts/install-deps.sh).
"""
import json
import os
import pathlib
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
SOURCE_DIR = pathlib.Path(os.environ.get("WQ_SOURCE_DIR", HERE.parent.parent))
DASHBOARD = HERE / "dashboards" / "windquant-run.json"
CATALOGUE = SOURCE_DIR / "common" / "metrics" / "metric_names.h"
DS_REF = "${DS_PROMETHEUS}"
START_TIMEOUT_S = 20
REQUIRED_TITLES = [
    "Episodes rate", "Transitions ingested rate", "PPO updates", "Policy version and lag",
    "Mean episode reward", "Lambda", "Curriculum target bit-width",
    "Best plan bit-width and perplexity", "Evaluation latency", "Evaluation queue depth",
    "Actor forward latency", "Connected actors", "Bytes on the wire", "RPC errors by code",
    "Process resident memory", "Process CPU", "GPU utilization", "GPU memory used"]
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset",
                   "bool", "and", "or", "unless", "inf", "nan", "atan2"}
GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h", "$run": ".*"}
RUN_MATCHER = 'run=~"$run"'
# The standard process collector's names and types (Prometheus client libraries).
PROCESS_METRICS = {"process_resident_memory_bytes": "gauge", "process_cpu_seconds_total": "counter",
                   "process_virtual_memory_bytes": "gauge", "process_start_time_seconds": "gauge",
                   "process_open_fds": "gauge", "process_max_fds": "gauge"}
# Fields NVIDIA dcgm-exporter exports with its default counters (default-counters.csv).
DCGM_METRICS = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_FB_USED",
                "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP",
                "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_XID_ERRORS",
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_ENC_UTIL",
                "DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"}


def missing_tool(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def metric_names(expr):
    """The metric names a PromQL expression selects (function names, label names in
    by/without/on clauses, matchers, ranges, strings and numbers removed)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', " ", expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\boffset\s+\S+", " ", e)
    e = re.sub(r"(?<![\w:])\d+(\.\d+)?([eE][+-]?\d+)?", " ", e)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        if re.match(r"\s*\(", e[m.end():]) or m.group(0).lower() in PROMQL_KEYWORDS:
            continue
        names.add(m.group(0))
    return names


def queries(dashboard):
    for p in dashboard.get("panels", []):
        for sub in [p] + p.get("panels", []):
            for t in sub.get("targets", []):
                yield sub, t


def check_static(d):
    f = []
    if d.get("uid") != "windquant-run":
        f.append(f"uid must be 'windquant-run', got {d.get('uid')!r}")
    if not 36 <= d.get("schemaVersion", 0) <= 41:
        f.append(f"schemaVersion {d.get('schemaVersion')} is not a Grafana 10/11 one")
    ds_vars = [v for v in d.get("templating", {}).get("list", []) if v.get("name") == "DS_PROMETHEUS"]
    if not ds_vars or ds_vars[0].get("type") != "datasource" or ds_vars[0].get("query") != "prometheus":
        f.append("templating must define DS_PROMETHEUS of type datasource, query prometheus")
    ids, occupied, titles = set(), {}, set()
    for p in d.get("panels", []):
        if p.get("id") in ids:
            f.append(f"duplicate panel id {p.get('id')}")
        ids.add(p.get("id"))
        g = p.get("gridPos", {})
        if g.get("x", 0) + g.get("w", 0) > 24 or g.get("w", 0) <= 0 or g.get("h", 0) <= 0:
            f.append(f"panel {p.get('title')!r}: bad gridPos {g}")
        for x in range(g.get("x", 0), g.get("x", 0) + g.get("w", 0)):
            for y in range(g.get("y", 0), g.get("y", 0) + g.get("h", 0)):
                if (x, y) in occupied:
                    f.append(f"panel {p.get('title')!r} overlaps {occupied[(x, y)]!r}")
                    break
                occupied[(x, y)] = p.get("title")
            else:
                continue
            break
        if p.get("type") == "row":
            continue
        titles.add(p.get("title"))
        if p.get("datasource") != {"type": "prometheus", "uid": DS_REF}:
            f.append(f"panel {p.get('title')!r}: datasource must be prometheus {DS_REF}")
        targets = p.get("targets", [])
        if not targets:
            f.append(f"panel {p.get('title')!r}: no queries")
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs):
            f.append(f"panel {p.get('title')!r}: duplicate refIds {refs}")
        for t in targets:
            if t.get("datasource") != {"type": "prometheus", "uid": DS_REF} or not t.get("expr"):
                f.append(f"panel {p.get('title')!r} {t.get('refId')}: needs expr and datasource {DS_REF}")
    for title in REQUIRED_TITLES:
        if title not in titles:
            f.append(f"missing panel {title!r}")
    return f + check_run_variable(d)


def check_run_variable(d):
    """The `run` variable exists, and every windquant/process selector filters on it (queries
    of other exporters join a windquant selector that does)."""
    f = []
    runs = [v for v in d.get("templating", {}).get("list", []) if v.get("name") == "run"]
    if not runs or runs[0].get("type") != "query" or \
            runs[0].get("datasource") != {"type": "prometheus", "uid": DS_REF} or \
            not re.fullmatch(r"label_values\(windquant_\w+, run\)", str(runs[0].get("query"))) or \
            runs[0].get("includeAll") is not True or runs[0].get("allValue") != ".*":
        f.append("templating must define run: a query variable on DS_PROMETHEUS, "
                 "label_values(windquant_<metric>, run), includeAll with allValue .*")
    for p, t in queries(d):
        expr = t.get("expr", "")
        selectors = re.findall(r"\b((?:windquant|process)_[a-z0-9_]+)(\{[^}]*\})?", expr)
        for name, labels in selectors:
            if RUN_MATCHER not in labels:
                f.append(f"panel {p.get('title')!r} {t.get('refId')}: {name} lacks {RUN_MATCHER}")
        if not selectors:
            f.append(f"panel {p.get('title')!r} {t.get('refId')}: no windquant selector filters on the run")
    return f


def check_provisioning():
    f = []
    try:
        import yaml
    except ImportError:
        return ["PyYAML missing: cannot check the provisioning files"]
    prov = yaml.safe_load((HERE / "provisioning" / "dashboards" / "windquant.yaml").read_text())
    providers = prov.get("providers", []) if prov.get("apiVersion") == 1 else []
    if not providers or providers[0].get("type") != "file" or not providers[0].get("options", {}).get("path"):
        f.append("provisioning/dashboards: needs apiVersion 1 and a file provider with options.path")
    ds = yaml.safe_load((HERE / "provisioning" / "datasources" / "prometheus.yaml").read_text())
    sources = ds.get("datasources", []) if ds.get("apiVersion") == 1 else []
    if not any(s.get("type") == "prometheus" and s.get("url") for s in sources):
        f.append("provisioning/datasources: needs apiVersion 1 and a prometheus datasource with a url")
    return f


def check_promql(exprs):
    """Parses every query with promtool (as recording rules)."""
    rules = []
    for i, e in enumerate(exprs):
        for var, value in GRAFANA_VARS.items():
            e = e.replace(var, value)
        rules.append({"record": f"windquant:dashboard_query_{i}", "expr": e})
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as tmp:
        json.dump({"groups": [{"name": "windquant-dashboard", "rules": rules}]}, tmp)
    try:
        out = subprocess.run(["promtool", "check", "rules", tmp.name], capture_output=True, text=True)
    finally:
        os.unlink(tmp.name)
    if out.returncode != 0:
        return [f"promtool check rules: {(out.stdout + out.stderr).strip()}"]
    return []


def start_exporter(cmd):
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], deadline - time.monotonic())
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"exporter exited ({proc.wait()}): {proc.stderr.read().strip()}")
        m = re.match(r"metrics_port=(\d+)\s*$", line)
        if m:
            return proc, int(m.group(1))
    proc.kill()
    raise RuntimeError(f"exporter printed no metrics_port= line within {START_TIMEOUT_S} s")


def parse_exposition(text):
    """-> ({family: type}, {sample name})"""
    types, samples = {}, set()
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            types[m.group(1)] = m.group(2)
        elif line and not line.startswith("#"):
            samples.add(re.split(r"[{ ]", line, 1)[0])
    return types, samples


def check_names(used, types, samples, notes=None):
    f = []
    exports_process = any(n.startswith("process_") for n in types)
    for name in sorted(used):
        if name in PROCESS_METRICS:
            if name in types and types[name] != PROCESS_METRICS[name]:
                f.append(f"{name}: exported as a {types[name]}, the standard is {PROCESS_METRICS[name]}")
            elif name not in types and exports_process:
                f.append(f"{name}: not exported, although other process_* metrics are")
            elif name not in types and notes is not None:
                notes.append(f"{name}: not exported by these endpoints yet")
            continue
        if name.startswith("DCGM_"):
            if name not in DCGM_METRICS:
                f.append(f"{name}: not a dcgm-exporter default field")
            continue
        if not name.startswith("windquant_"):
            f.append(f"{name}: not a windquant metric")
            continue
        base = name
        for suffix in HISTOGRAM_SUFFIXES:
            if name.endswith(suffix) and name[: -len(suffix)] in types:
                base = name[: -len(suffix)]
        if base not in types:
            f.append(f"{name}: not exported by the live /metrics endpoint")
        elif base != name and (types[base] != "histogram" or name not in samples):
            f.append(f"{name}: {base} is a {types[base]}, it has no {name} samples")
        elif base == name and types[base] == "histogram":
            f.append(f"{name}: a histogram is queried through _bucket/_sum/_count")
    return f


def scrape(url):
    """-> (text, findings): one /metrics scrape, linted with promtool."""
    out = subprocess.run(["curl", "-fsS", "--max-time", "10", url], capture_output=True, text=True)
    if out.returncode != 0:
        return "", [f"curl {url} failed: {out.stderr.strip()}"]
    lint = subprocess.run(["promtool", "check", "metrics"], input=out.stdout,
                          capture_output=True, text=True)
    if lint.returncode != 0 or lint.stdout or lint.stderr:
        return out.stdout, [f"promtool check metrics on {url}: {(lint.stdout + lint.stderr).strip()}"]
    return out.stdout, []


def main():
    args = sys.argv[1:]
    if len(args) < 2 or args[0] not in ("--exporter", "--urls"):
        print(__doc__)
        return 2
    for tool in ("curl", "promtool"):
        if not shutil.which(tool):
            missing_tool(f"{tool} not found (Debian packages curl, prometheus: scripts/install-deps.sh)")

    dashboard = json.loads(DASHBOARD.read_text())
    findings = check_static(dashboard) + check_provisioning()
    exprs = [t["expr"] for _, t in queries(dashboard) if t.get("expr")]
    findings += check_promql(exprs)
    used = set().union(*(metric_names(e) for e in exprs))
    catalogue = set(re.findall(r'"(windquant_[a-z0-9_]+)"', CATALOGUE.read_text()))
    stripped = {re.sub(r"_(bucket|sum|count)$", "", n) for n in used}
    findings += [f"catalogue metric {n} is not on the dashboard" for n in sorted(catalogue - stripped)]

    types, samples = {}, set()
    def add(url):
        text, problems = scrape(url)
        findings.extend(problems)
        t, s = parse_exposition(text)
        types.update(t)
        samples.update(s)

    if args[0] == "--urls":
        urls = args[1:]
        for url in urls:
            add(url)
        source = f"{len(urls)} live endpoints"
    else:
        exporter = args[1:]
        proc, port = start_exporter(exporter)
        try:
            add(f"http://127.0.0.1:{port}/metrics")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = "timeout"
        if code != 0:
            findings.append(f"exporter exit status on SIGTERM: {code}, expected 0")
        source = f"exporter {os.path.basename(exporter[0])} on port {port}"
    notes = []
    findings += check_names(used, types, samples, notes)

    # Self-test: the name check must catch typos and foreign metrics.
    probe = check_names(metric_names("rate(windquant_learner_target_bits[5m]) + up + "
                                     "DCGM_FI_DEV_GPU_UTILIZATION + process_resident_memory"),
                        types, samples)
    if len(probe) != 4:
        findings.append(f"self-test: expected 4 findings for two typos and two foreign metrics, "
                        f"got {probe}")
    probe = check_run_variable({"panels": [{"title": "p", "targets": [
        {"refId": "A", "expr": "windquant_learner_lambda + on () process_cpu_seconds_total{run=~\"$run\"}"},
        {"refId": "B", "expr": "DCGM_FI_DEV_GPU_UTIL"}]}]})
    if len(probe) != 3:
        findings.append(f"self-test: expected 3 run-variable findings, got {probe}")

    print(f"dashboard {DASHBOARD.name}: {len(exprs)} queries, {len(used)} metric names "
          f"({len(stripped)} families); {source}: {len(types)} families exported")
    for m in notes:
        print("NOTE", m)
    for m in findings:
        print("FAIL", m)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
