#!/usr/bin/env python3
"""Renders deploy/k8s (base and every overlay) with kustomize and checks the result.

1. Every rendered object validates against the Kubernetes 1.29.0 API:
   - with ../shared/k8s-schemas: its standalone-strict JSON schemas (ServiceMonitor: the
     Prometheus Operator CRD schema), with jsonschema's Draft7Validator;
   - without it (a fresh clone): the TypeScript types of the same API version, generated
     from the official OpenAPI definitions (npm kubernetes-types 1.29.0; ServiceMonitor:
     @kubernetes-models/prometheus-operator), checked by the TypeScript compiler with
     strict object-literal checks: an unknown field, a wrong type or a missing required
     field is an error (deploy/k8s/typecheck/, installed with `npm ci` into the build tree).
   Kinds the shared schemas lack (NetworkPolicy) are checked with the TypeScript types.
2. Structural rules the schemas cannot express: learner replicas 1 + Recreate, gRPC probes
   on the serving port, StatefulSet serviceName = a headless Service, selectors match
   template labels, every ConfigMap/Secret/PVC reference resolves to a rendered (generated,
   hash-suffixed) object, the actor topology matches run.yaml, ...; and those of
   cluster_rules.py (digests, GPU scheduling, disruption budget, state volumes,
   NetworkPolicies, ServiceMonitor, overlays generated from configs/).
3. Self-test: known-bad mutations of a rendered overlay must be reported, so a rule that
   silently stopped checking fails the test.

Exit 0 = all good, 1 = findings or a missing tool (kustomize or kubectl; PyYAML; jsonschema
with the shared schemas, node + npm without them). Needs PyYAML + jsonschema (pyenv python3).
Usage: check_manifests.py [--print-render OVERLAY]
"""
import copy
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from cluster_rules import (METRICS_PORT, ROLES, find, ident, pod_spec, role_of, selects)
import cluster_rules

HERE = pathlib.Path(__file__).resolve().parent
SOURCE_DIR = pathlib.Path(os.environ.get("WQ_SOURCE_DIR", HERE.parent.parent))


def shared_dir():
    """../shared as common/testing/test_paths.h defines it (through the build's
    wq-test-paths), or beside the source tree when run by hand without a build."""
    tool = pathlib.Path(os.environ.get("WQ_BINARY_DIR", "")) / "common/testing/wq-test-paths"
    if os.environ.get("WQ_BINARY_DIR") and tool.exists():
        out = subprocess.run([str(tool)], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("WQ_SHARED_DIR="):
                value = line.split("=", 1)[1].strip("'")
                return pathlib.Path(value) if value else None
    default = SOURCE_DIR.parent / "shared"
    return default if default.is_dir() else None


SHARED_DIR = shared_dir()
SCHEMA_ROOT = (SHARED_DIR or SOURCE_DIR.parent / "shared") / "k8s-schemas"
K8S_VERSION_DIR = "v1.29.0-standalone-strict"
TARGETS = ["base", "overlays/cpu-small", "overlays/llama3-8b-gpu", "overlays/llama3-70b-gpu"]
CONFIG_PATH = "/etc/windquant/run.yaml"
POD_INDEX_FIELD = "metadata.labels['apps.kubernetes.io/pod-index']"
GENERATED = re.compile(r"^(windquant-run|windquant-store)-[a-z0-9]{10}$")


def missing(message):
    print(f"FAIL: {message}")
    sys.exit(1)


try:
    import yaml
except ImportError:
    missing("PyYAML is not installed for " + sys.executable)


def kustomize_command():
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        probe = subprocess.run(["kubectl", "kustomize", "--help"], capture_output=True)
        if probe.returncode == 0:
            return ["kubectl", "kustomize"]
    return None


def render(cmd, target):
    out = subprocess.run(cmd + [str(HERE / target)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{target}: kustomize failed: {out.stderr.strip()}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def schema_path(doc):
    group, _, version = doc["apiVersion"].rpartition("/")
    kind = doc["kind"].lower()
    if group.endswith("coreos.com"):
        return SCHEMA_ROOT / "crds" / group / f"{kind}_{version}.json"
    name = "-".join(filter(None, [kind, group.split(".")[0], version])) + ".json"
    return SCHEMA_ROOT / K8S_VERSION_DIR / name


class JsonSchemaBackend:
    """The standalone-strict JSON schemas of ../shared/k8s-schemas."""

    name = "JSON schemas"
    unknown_field = "Additional properties"
    wrong_type = "is not of type"

    def __init__(self):
        try:
            from jsonschema import Draft7Validator
        except ImportError:
            missing(f"jsonschema is not installed for {sys.executable} (use the pyenv python3)")
        self._validator_class = Draft7Validator
        self._validators = {}
        self._fallback = None

    def describe(self):
        return str(SCHEMA_ROOT / K8S_VERSION_DIR) + (
            f"; kinds without a schema there: {self._fallback.describe()}" if self._fallback else "")

    def errors(self, doc_sets):
        """{label: [finding]} for {label: [doc]}. The kinds ../shared has no schema for
        (NetworkPolicy) go to the TypeScript API types of the same Kubernetes version."""
        found = {label: [f"schema {ident(d)} {e}" for d in docs if schema_path(d).exists()
                         for e in self._doc_errors(d)] for label, docs in doc_sets.items()}
        rest = {label: [d for d in docs if not schema_path(d).exists()]
                for label, docs in doc_sets.items()}
        if any(rest.values()):
            self._fallback = self._fallback or TypeScriptBackend()
            for label, more in self._fallback.errors(rest).items():
                found[label] += more
        return found

    def _doc_errors(self, doc):
        path = schema_path(doc)
        if not path.exists():
            return [f"no schema {path.relative_to(SCHEMA_ROOT)} for {doc['apiVersion']} {doc['kind']}"]
        if path not in self._validators:
            self._validators[path] = self._validator_class(json.loads(path.read_text()))
        return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
                for e in self._validators[path].iter_errors(doc)]


class TypeScriptBackend:
    """Kubernetes 1.29.0 API types from npm (deploy/k8s/typecheck), checked by tsc.

    Every object becomes `export const oN: <its API type> = <its JSON>;` on a line of its
    own; tsc's object-literal checks report unknown fields (TS2353), wrong types (TS2322)
    and missing required fields (TS2741), each on the object's line."""

    name = "TypeScript API types"
    unknown_field = "does not exist in type"
    wrong_type = "is not assignable to type"
    PACKAGE = HERE / "typecheck"

    def __init__(self):
        for tool in ("node", "npm"):
            if not shutil.which(tool):
                missing(f"{tool} not found (Debian package nodejs: scripts/install-deps.sh)")
        binary_dir = pathlib.Path(os.environ.get("WQ_BINARY_DIR", "/tmp"))
        self.dir = binary_dir / "k8s-typecheck"
        self.dir.mkdir(parents=True, exist_ok=True)
        for f in ("package.json", "package-lock.json"):
            shutil.copyfile(self.PACKAGE / f, self.dir / f)
        tsc = self.dir / "node_modules" / "typescript" / "bin" / "tsc"
        if not tsc.exists():
            out = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                                 cwd=self.dir, capture_output=True, text=True)
            if out.returncode != 0 or not tsc.exists():
                missing(f"npm ci in {self.dir} failed: {out.stderr.strip()}")
        self.tsc = tsc

    def describe(self):
        version = json.loads((self.dir / "node_modules/kubernetes-types/package.json").read_text())
        return f"npm kubernetes-types {version['version']} + tsc in {self.dir}"

    @staticmethod
    def _type_of(doc):
        group, _, version = doc["apiVersion"].rpartition("/")
        kind = doc["kind"]
        if group.endswith("coreos.com"):
            return f'import("@kubernetes-models/prometheus-operator/{group}/{version}/{kind}").I{kind}'
        return f'import("kubernetes-types/{group.split(".")[0] if group else "core"}/{version}").{kind}'

    @staticmethod
    def _as_api_types(doc):
        """A copy with resource quantities as strings. The API types declare Quantity a
        string; the API itself (and its OpenAPI: x-kubernetes-int-or-string) also takes an
        integer such as `nvidia.com/gpu: 1`, so both forms are checked as what they mean."""
        doc = copy.deepcopy(doc)

        def walk(x):
            if isinstance(x, dict):
                for key, value in x.items():
                    if key in ("limits", "requests") and isinstance(value, dict):
                        x[key] = {k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
                                  else v for k, v in value.items()}
                    else:
                        walk(value)
            elif isinstance(x, list):
                for v in x:
                    walk(v)
        walk(doc)
        return doc

    def errors(self, doc_sets):
        files, labels = [], {}
        for i, (label, docs) in enumerate(doc_sets.items()):
            path = self.dir / f"check_{i}.ts"
            path.write_text("".join(
                f"export const o{n}: {self._type_of(d)} = {json.dumps(self._as_api_types(d))};\n"
                for n, d in enumerate(docs)))
            files.append(str(path))
            labels[path.name] = (label, docs)
        out = subprocess.run(["node", str(self.tsc), "--noEmit", "--strict", "--skipLibCheck",
                              "--module", "commonjs", "--moduleResolution", "node", "--target",
                              "es2020", *files], cwd=self.dir, capture_output=True, text=True)
        findings = {label: [] for label in doc_sets}
        for line in out.stdout.splitlines():
            m = re.match(r"^(check_\d+\.ts)\((\d+),\d+\): error (TS\d+: .*)$", line)
            if not m:
                continue
            label, docs = labels[m.group(1)]
            findings[label].append(f"schema {ident(docs[int(m.group(2)) - 1])} {m.group(3)}")
        if out.returncode not in (0, 2) or (out.returncode == 2 and not any(findings.values())):
            missing(f"tsc failed: {out.stdout.strip()} {out.stderr.strip()}")
        return findings


def run_config(docs):
    """The run.yaml of the rendered windquant-run ConfigMap (None if absent)."""
    for d in docs:
        if d["kind"] == "ConfigMap" and GENERATED.match(d["metadata"]["name"]) and \
                d["metadata"]["name"].startswith("windquant-run-"):
            return yaml.safe_load(d["data"]["run.yaml"])
    return None


def check_rules(docs, target):
    """Returns the structural findings of one rendered target."""
    f = []
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    workloads = by_kind.get("Deployment", []) + by_kind.get("StatefulSet", [])
    services = by_kind.get("Service", [])
    cfg = run_config(docs)
    if cfg is None:
        return ["no generated windquant-run-<hash> ConfigMap with run.yaml"]

    roles = sorted(filter(None, (role_of(w) for w in workloads)))
    if roles != ["actor", "evaluator", "learner"]:
        f.append(f"expected one learner, evaluator and actor workload, got {roles}")
    for w in workloads:
        check_workload(f, w, services, cfg, names, by_kind)
    check_services(f, services, workloads, cfg)
    check_monitoring(f, by_kind, services, target)
    return f + cluster_rules.check_cluster(docs, target, cfg)


def check_workload(f, w, services, cfg, names, by_kind):
    """Rules of one Deployment or StatefulSet, its pod and its containers."""
    wid, role = ident(w), role_of(w)
    spec, pod = w["spec"], pod_spec(w)
    tmpl_labels = spec["template"]["metadata"].get("labels", {})
    if not selects(spec["selector"].get("matchLabels"), tmpl_labels):
        f.append(f"{wid}: selector.matchLabels do not match the template labels")
    if role not in ROLES:
        f.append(f"{wid}: unknown component label {role!r}")
        return
    if role == "learner":
        if w["kind"] != "Deployment" or spec.get("replicas") != 1:
            f.append(f"{wid}: the learner must be a Deployment with replicas 1")
        if spec.get("strategy", {}).get("type") != "Recreate":
            f.append(f"{wid}: the learner must use strategy Recreate")
    if role == "actor":
        if w["kind"] != "StatefulSet":
            f.append(f"{wid}: actors must be a StatefulSet")
        if spec.get("podManagementPolicy") != "Parallel":
            f.append(f"{wid}: podManagementPolicy must be Parallel")
        headless = [s for s in services if s["metadata"]["name"] == spec.get("serviceName")]
        if not headless or headless[0]["spec"].get("clusterIP") != "None":
            f.append(f"{wid}: serviceName {spec.get('serviceName')!r} is not a headless Service")
        elif not selects(headless[0]["spec"].get("selector"), tmpl_labels):
            f.append(f"{wid}: headless Service does not select the actor pods")
        check_topology(f, w, cfg)

    # Pod-level rules.
    sc = pod.get("securityContext", {})
    if sc.get("runAsNonRoot") is not True or not sc.get("runAsUser"):
        f.append(f"{wid}: pod securityContext must set runAsNonRoot and a runAsUser")
    grace = pod.get("terminationGracePeriodSeconds", 30)
    deadline_s = cfg.get("service", {}).get("rpc_deadline_ms", 30000) / 1000
    if grace < deadline_s + 10:
        f.append(f"{wid}: terminationGracePeriodSeconds {grace} < rpc deadline {deadline_s} s + 10")
    ann = spec["template"]["metadata"].get("annotations", {})
    if ann.get("prometheus.io/scrape") != "true" or ann.get("prometheus.io/path") != "/metrics" \
            or ann.get("prometheus.io/port") != str(METRICS_PORT):
        f.append(f"{wid}: prometheus.io/scrape|port|path annotations missing or wrong")
    check_references(f, wid, pod, names, by_kind)

    containers = pod.get("containers", [])
    if len(containers) != 1:
        f.append(f"{wid}: expected one container")
    for c in containers:
        check_container(f, f"{wid} container {c['name']}", c, pod, role, cfg)


def check_container(f, cid, c, pod, role, cfg):
    """Rules of one container of a `role` workload."""
    binary, grpc_port = ROLES[role]
    if c.get("command") != [binary] or c.get("args") != ["--config", CONFIG_PATH]:
        f.append(f"{cid}: command must be `{binary} --config {CONFIG_PATH}`")
    ports = {p["containerPort"]: p.get("name") for p in c.get("ports", [])}
    if ports.get(grpc_port) != "grpc" or ports.get(METRICS_PORT) != "metrics":
        f.append(f"{cid}: ports must be grpc {grpc_port} and metrics {METRICS_PORT}")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe)
        if not p or set(p) & {"httpGet", "tcpSocket", "exec"} or \
                p.get("grpc", {}).get("port") != grpc_port:
            f.append(f"{cid}: {probe} must be a grpc probe on port {grpc_port}")
    res = c.get("resources", {})
    for part in ("requests", "limits"):
        if not {"cpu", "memory"} <= set(res.get(part, {})):
            f.append(f"{cid}: resources.{part} must set cpu and memory")
    csc = c.get("securityContext", {})
    if csc.get("allowPrivilegeEscalation") is not False or \
            "ALL" not in csc.get("capabilities", {}).get("drop", []):
        f.append(f"{cid}: must drop ALL capabilities and disallow privilege escalation")
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    cm = mounts.get(os.path.dirname(CONFIG_PATH))
    if not cm or "configMap" not in vols.get(cm["name"], {}):
        f.append(f"{cid}: the run ConfigMap is not mounted at {os.path.dirname(CONFIG_PATH)}")
    gpus = res.get("limits", {}).get("nvidia.com/gpu")
    if cfg["model"].get("device") == "cuda" and role in ("actor", "evaluator"):
        if str(gpus) != "1" or str(res.get("requests", {}).get("nvidia.com/gpu")) != "1":
            f.append(f"{cid}: model.device cuda needs nvidia.com/gpu: 1 (requests and limits)")
        if "cuda" not in c.get("image", ""):
            f.append(f"{cid}: a GPU container must use the CUDA image, got {c.get('image')}")
    elif gpus is not None and cfg["model"].get("device") != "cuda":
        f.append(f"{cid}: requests a GPU but model.device is not cuda")
    if role == "actor":
        env = {e["name"]: e for e in c.get("env", [])}
        ref = env.get("WQ_POD_ORDINAL", {}).get("valueFrom", {}).get("fieldRef", {})
        if ref.get("fieldPath") != POD_INDEX_FIELD:
            f.append(f"{cid}: WQ_POD_ORDINAL must come from {POD_INDEX_FIELD}")


def check_services(f, services, workloads, cfg):
    """Each Service selects one workload by its port names; run.yaml's addresses name them."""
    for s in services:
        sid = ident(s)
        targets = [w for w in workloads
                   if selects(s["spec"].get("selector"), w["spec"]["template"]["metadata"].get("labels", {}))]
        if len(targets) != 1:
            f.append(f"{sid}: selects {len(targets)} workloads, expected 1")
            continue
        port_names = {p.get("name") for c in pod_spec(targets[0])["containers"] for p in c.get("ports", [])}
        for p in s["spec"].get("ports", []):
            if p.get("targetPort") not in port_names:
                f.append(f"{sid}: targetPort {p.get('targetPort')!r} is not a container port name")

    for host_key, role in (("learner_address", "learner"), ("evaluator_address", "evaluator")):
        addr = cfg.get("service", {}).get(host_key, "")
        want = [f"{s['metadata']['name']}:{ROLES[role][1]}" for s in services
                if s["spec"].get("selector", {}).get("app.kubernetes.io/component") == role]
        if addr not in want:
            f.append(f"run.yaml service.{host_key} {addr!r} is not one of {want}")


def check_monitoring(f, by_kind, services, target):
    """ServiceMonitors scrape the three Services."""
    for sm in by_kind.get("ServiceMonitor", []):
        selected = [s for s in services if selects(sm["spec"]["selector"].get("matchLabels"),
                                                   s["metadata"].get("labels", {}))]
        if len(selected) != 3:
            f.append(f"{ident(sm)}: selects {len(selected)} Services, expected 3")
        for ep in sm["spec"].get("endpoints", []):
            for s in selected:
                if ep.get("port") not in {p.get("name") for p in s["spec"]["ports"]}:
                    f.append(f"{ident(sm)}: port {ep.get('port')!r} is not a port of {ident(s)}")
    if target.endswith("gpu") and not by_kind.get("ServiceMonitor"):
        f.append("the GPU overlay must ship a ServiceMonitor")


def check_references(f, wid, pod, names, by_kind):
    """Every ConfigMap/Secret/PVC a pod refers to is rendered (and generated)."""
    refs = []
    for v in pod.get("volumes", []):
        if "configMap" in v:
            refs.append(("ConfigMap", v["configMap"]["name"]))
        if "secret" in v:
            refs.append(("Secret", v["secret"]["secretName"]))
        if "persistentVolumeClaim" in v:
            refs.append(("PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"]))
    for c in pod.get("containers", []) + pod.get("initContainers", []):
        for e in c.get("envFrom", []):
            if "configMapRef" in e:
                refs.append(("ConfigMap", e["configMapRef"]["name"]))
            if "secretRef" in e:
                refs.append(("Secret", e["secretRef"]["name"]))
        for e in c.get("env", []):
            vf = e.get("valueFrom", {})
            if "configMapKeyRef" in vf:
                refs.append(("ConfigMap", vf["configMapKeyRef"]["name"]))
            if "secretKeyRef" in vf:
                refs.append(("Secret", vf["secretKeyRef"]["name"]))
    if pod.get("serviceAccountName"):
        refs.append(("ServiceAccount", pod["serviceAccountName"]))
    for kind, name in refs:
        if (kind, name) not in names:
            f.append(f"{wid}: {kind} {name!r} is not rendered")
        elif kind in ("ConfigMap", "Secret") and not GENERATED.match(name):
            f.append(f"{wid}: {kind} {name!r} is not a generated (hash-suffixed) name")
    if not any(k == "Secret" for k, _ in refs):
        f.append(f"{wid}: does not use the store Secret")


def check_topology(f, sts, cfg):
    """StatefulSet size and actor DNS names agree with run.yaml's service section."""
    svc = cfg.get("service", {})
    stages, replicas = svc.get("stages", 1), svc.get("replicas", 1)
    wid = ident(sts)
    if sts["spec"].get("replicas") != stages * replicas:
        f.append(f"{wid}: replicas {sts['spec'].get('replicas')} != stages*replicas "
                 f"{stages}*{replicas} of run.yaml")
    if svc.get("stage", -1) != -1 or svc.get("replica", -1) != -1:
        f.append("run.yaml: service.stage/replica must be -1 (from the pod ordinal)")
    addresses = svc.get("actor_addresses", [])
    want = [f"{sts['metadata']['name']}-{r * stages + s}.{sts['spec']['serviceName']}:{ROLES['actor'][1]}"
            for s in range(stages) for r in range(replicas)]
    if addresses != want:
        f.append(f"run.yaml: service.actor_addresses {addresses} != stage-major pod DNS names {want}")


def check_target(docs, target, schema_findings):
    return schema_findings + [f"rule {m}" for m in check_rules(docs, target)]


# Each mutation breaks one thing; check_target must report a finding containing `expect`
# (UNKNOWN_FIELD / WRONG_TYPE: the schema backend's own wording).
UNKNOWN_FIELD, WRONG_TYPE = object(), object()
MUTATIONS = [
    ("unknown field", UNKNOWN_FIELD,
     lambda ds: find(ds, "Deployment", "learner")["spec"].__setitem__("replicaz", 1)),
    ("learner replicas 2", "replicas 1",
     lambda ds: find(ds, "Deployment", "learner")["spec"].__setitem__("replicas", 2)),
    ("rolling learner", "Recreate",
     lambda ds: find(ds, "Deployment", "learner")["spec"].__setitem__("strategy", {"type": "RollingUpdate"})),
    ("http probe", "grpc probe",
     lambda ds: pod_spec(find(ds, "StatefulSet"))["containers"][0].__setitem__(
         "readinessProbe", {"httpGet": {"path": "/healthz", "port": 9464}})),
    ("wrong serviceName", "headless",
     lambda ds: find(ds, "StatefulSet")["spec"].__setitem__("serviceName", "actors")),
    ("selector mismatch", "matchLabels",
     lambda ds: find(ds, "Deployment", "evaluator")["spec"]["selector"]["matchLabels"].__setitem__(
         "app.kubernetes.io/component", "x")),
    ("dangling ConfigMap", "not rendered",
     lambda ds: pod_spec(find(ds, "Deployment", "learner"))["volumes"][0]["configMap"].__setitem__(
         "name", "windquant-run-0000000000")),
    ("unhashed Secret", "not rendered",
     lambda ds: pod_spec(find(ds, "StatefulSet"))["containers"][0]["envFrom"][0]["secretRef"].__setitem__(
         "name", "windquant-store")),
    ("topology", "stages*replicas",
     lambda ds: find(ds, "StatefulSet")["spec"].__setitem__("replicas", 3)),
    ("bad quantity type", WRONG_TYPE,
     lambda ds: find(ds, "StatefulSet")["spec"].__setitem__("replicas", "two")),
    ("unknown container field", UNKNOWN_FIELD,
     lambda ds: pod_spec(find(ds, "StatefulSet"))["containers"][0].__setitem__("portz", [])),
]


MUTATIONS += [(name, UNKNOWN_FIELD if expect == "unknown field" else expect, mutate)
              for name, expect, mutate in cluster_rules.MUTATIONS]


def self_test(broken_sets, schema, target):
    wording = {UNKNOWN_FIELD: (JsonSchemaBackend.unknown_field, TypeScriptBackend.unknown_field),
               WRONG_TYPE: (JsonSchemaBackend.wrong_type, TypeScriptBackend.wrong_type)}
    failures = []
    for name, expect, _ in MUTATIONS:
        label = f"mutation: {name}"
        found = check_target(broken_sets[label], target, schema[label])
        wants = wording.get(expect, (expect,))
        if not any(want in m for m in found for want in wants):
            failures.append(f"self-test '{name}': no finding containing {wants} (got {found})")
    return failures


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--print-render":
        cmd = kustomize_command() or sys.exit("no kustomize")
        print(yaml.safe_dump_all(render(cmd, sys.argv[2]), sort_keys=False))
        return 0
    cmd = kustomize_command()
    if cmd is None:
        missing("neither `kustomize` nor `kubectl kustomize` is available")
    backend = JsonSchemaBackend() if (SCHEMA_ROOT / K8S_VERSION_DIR).is_dir() else TypeScriptBackend()
    version = subprocess.run(cmd[:1] + (["version", "--client"] if cmd[0] == "kubectl" else ["version"]),
                             capture_output=True, text=True).stdout.strip().replace("\n", ", ")
    rendered = {target: render(cmd, target) for target in TARGETS}
    self_test_target = "overlays/llama3-70b-gpu"
    broken_sets = cluster_rules.mutated(rendered[self_test_target], MUTATIONS)
    schema = backend.errors({**rendered, **broken_sets})  # one tsc run for all of them
    print(f"renderer: {' '.join(cmd)} ({version}); API check: {backend.name}, {backend.describe()}")
    failures = []
    for target, docs in rendered.items():
        findings = check_target(docs, target, schema[target])
        kinds = sorted(f"{d['kind']}" for d in docs)
        print(f"{target}: {len(docs)} objects ({', '.join(kinds)}), {len(findings)} findings")
        failures += [f"{target}: {m}" for m in findings]
    failures += [f"{self_test_target}: {m}"
                 for m in self_test(broken_sets, schema, self_test_target)]
    for m in failures:
        print("FAIL", m)
    print(f"self-test: {len(MUTATIONS)} mutations")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
