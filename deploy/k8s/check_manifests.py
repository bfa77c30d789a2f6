#!/usr/bin/env python3
"""Renders deploy/k8s (base and every overlay) with kustomize and checks the result.

1. Every rendered object validates against the Kubernetes 1.29.0 API, strictly (an unknown
   field, a wrong type or a missing required field is an error):
   - with ../shared/k8s-schemas: its standalone-strict JSON schemas (ServiceMonitor: the
     Prometheus Operator CRD schema), with jsonschema's Draft7Validator;
   - kinds without a schema there (NetworkPolicy; every kind on a fresh clone without
     ../shared): the official v1.29.0 strict JSON schemas bundled by the PyPI package
     kubernetes-validate (scripts/requirements.txt), through its validate(doc, "1.29.0",
     strict=True);
   - custom resources of RULES_ONLY_KINDS that neither has a schema for (ServiceMonitor
     without ../shared) are checked by the structural rules only, and the output says so;
     any other kind without a schema is a finding.
2. Structural rules the schemas cannot express: learner replicas 1 + Recreate, gRPC probes
   on the serving port, StatefulSet serviceName = a headless Service, selectors match
   template labels, every ConfigMap/Secret/PVC reference resolves to a rendered (generated,
   hash-suffixed) object, the actor topology matches run.yaml, ...; and those of
   cluster_rules.py (digests, GPU scheduling, disruption budget, state volumes,
   NetworkPolicies, ServiceMonitor, overlays generated from configs/).
3. Self-test: known-bad mutations of a rendered overlay must be reported, so a rule that
   silently stopped checking fails the test.

Exit 0 = all good, 1 = findings or a missing tool (kustomize or kubectl; PyYAML,
jsonschema, kubernetes-validate: the project venv, .venv/bin/python3, has them).
Usage: check_manifests.py [--print-render OVERLAY]
       check_manifests.py --check-file FILE...   (API check only of the objects of YAML
                                                   files: one line per error, exit 1 if any)
"""
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
K8S_VERSION = "1.29.0"
K8S_VERSION_DIR = f"v{K8S_VERSION}-standalone-strict"
# Custom resources that may have no schema at all (no ../shared): their shape is left to the
# structural rules (check_monitoring here, check_service_monitors in cluster_rules.py).
RULES_ONLY_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}
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


class ApiCheck:
    """The Kubernetes 1.29.0 API check of rendered objects: the ../shared/k8s-schemas schema
    of a kind when there is one, else kubernetes-validate (strict), else (RULES_ONLY_KINDS)
    nothing but the structural rules. Findings use jsonschema's wording on both paths."""

    unknown_field = "Additional properties are not allowed"
    wrong_type = "is not of type"

    def __init__(self):
        try:
            import kubernetes_validate
            from jsonschema import Draft7Validator
        except ImportError as e:
            missing(f"{e.name} is not installed for {sys.executable} (use the project venv: "
                    f"{SOURCE_DIR / '.venv/bin/python3'}, scripts/install-deps.sh makes it)")
        self._kv = kubernetes_validate
        self._validator_class = Draft7Validator
        self._validators = {}
        self._kv_validators = {}
        self.shared = (SCHEMA_ROOT / K8S_VERSION_DIR).is_dir()
        self._used = {"shared": set(), "kubernetes-validate": set(), "none": set()}

    def describe(self):
        u = {k: ", ".join(sorted(v)) for k, v in self._used.items()}
        parts = []
        if self.shared:
            parts.append(f"JSON schemas of {SCHEMA_ROOT} ({K8S_VERSION_DIR}, crds/) with "
                         f"jsonschema Draft7 for {u['shared'] or 'no kind'}")
        else:
            parts.append(f"no {SCHEMA_ROOT / K8S_VERSION_DIR}")
        parts.append(f"kubernetes-validate {self._kv.__version__} (Kubernetes {K8S_VERSION}, "
                     f"strict) for {u['kubernetes-validate'] or 'no kind'}")
        if u["none"]:
            parts.append(f"no schema, structural rules only, for {u['none']}")
        return "; ".join(parts)

    def errors(self, doc_sets):
        """{label: [finding]} for {label: [doc]}."""
        return {label: [m for d in docs for m in self.doc_errors(d)]
                for label, docs in doc_sets.items()}

    def doc_errors(self, doc):
        """Findings 'schema Kind/name field.path: message' of one object."""
        if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict) or \
                not doc.get("apiVersion") or not doc.get("kind"):
            return [f"schema {str(doc)[:60]!r}: not a Kubernetes object (apiVersion, kind, metadata)"]
        key = (doc["apiVersion"], doc["kind"])
        path = schema_path(doc) if self.shared else None
        if path is not None and path.exists():
            self._used["shared"].add(doc["kind"])
            if path not in self._validators:
                self._validators[path] = self._validator_class(json.loads(path.read_text()))
            return [self._finding(doc, e) for e in self._validators[path].iter_errors(doc)]
        try:
            version = self._kv.validate(doc, K8S_VERSION, strict=True)
        except self._kv.ValidationError as e:
            self._used["kubernetes-validate"].add(doc["kind"])
            return self._all_kv_errors(doc, e)
        except self._kv.SchemaNotFoundError as e:
            if key in RULES_ONLY_KINDS:
                self._used["none"].add(doc["kind"])
                return []
            return [f"schema {ident(doc)}: {e.message}" + (
                f" (nor {path.relative_to(SCHEMA_ROOT)})" if path is not None else "")]
        except (self._kv.VersionNotSupportedError, self._kv.InvalidSchemaError) as e:
            missing(f"kubernetes-validate {self._kv.__version__}: {e.message}")
        if version != K8S_VERSION.rpartition(".")[0]:
            missing(f"kubernetes-validate checked {ident(doc)} against Kubernetes {version}, "
                    f"not {K8S_VERSION}")
        self._used["kubernetes-validate"].add(doc["kind"])
        return []

    def _all_kv_errors(self, doc, first):
        """Every error of doc under kubernetes-validate's schema: its validate() raises only the
        first, so the others come from the same schema files and validator as validate()
        builds them (kubernetes_validate.utils); just `first` if that ever stops working."""
        found = [self._finding(doc, first)]
        try:
            key = (doc["apiVersion"], doc["kind"])
            if key not in self._kv_validators:
                import jsonschema
                from kubernetes_validate.utils import schema_contents
                from referencing import Registry, Resource
                folder = f"kubernetes-json-schema/v{K8S_VERSION}-local-strict"
                group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", doc["apiVersion"])
                schema = schema_contents(f"{folder}/{doc['kind'].lower()}-{group_version}.json", K8S_VERSION)
                defs = schema_contents(f"{folder}/_definitions.json", K8S_VERSION)
                registry = Resource.from_contents(defs) @ (Resource.from_contents(schema) @ Registry())
                self._kv_validators[key] = jsonschema.Draft202012Validator(schema, registry=registry)
            more = [self._finding(doc, e) for e in self._kv_validators[key].iter_errors(doc)]
        except Exception:  # noqa: BLE001 (extra detail only; the verdict is validate()'s)
            return found
        return found + sorted(m for m in set(more) if m != found[0])

    @staticmethod
    def _finding(doc, e):
        return f"schema {ident(doc)} {'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"


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
# (UNKNOWN_FIELD / WRONG_TYPE: jsonschema's wording, ApiCheck.unknown_field / wrong_type).
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
    wording = {UNKNOWN_FIELD: (ApiCheck.unknown_field,), WRONG_TYPE: (ApiCheck.wrong_type,)}
    failures = []
    for name, expect, _ in MUTATIONS:
        label = f"mutation: {name}"
        found = check_target(broken_sets[label], target, schema[label])
        wants = wording.get(expect, (expect,))
        if not any(want in m for m in found for want in wants):
            failures.append(f"self-test '{name}': no finding containing {wants} (got {found})")
    return failures


def check_files(paths):
    """--check-file: the API check alone of every object of some YAML files."""
    api, failures = ApiCheck(), 0
    for path in paths:
        try:
            docs = [d for d in yaml.safe_load_all(pathlib.Path(path).read_text()) if d]
        except (OSError, yaml.YAMLError) as e:
            print(f"FAIL {path}: {e}".replace("\n", " "))
            failures += 1
            continue
        for d in docs:
            for m in api.doc_errors(d):
                print(f"FAIL {path}: {m}")
                failures += 1
    print(f"API check: {api.describe()}; {failures} findings")
    return 1 if failures else 0


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--check-file":
        return check_files(sys.argv[2:])
    if len(sys.argv) == 3 and sys.argv[1] == "--print-render":
        cmd = kustomize_command() or sys.exit("no kustomize")
        print(yaml.safe_dump_all(render(cmd, sys.argv[2]), sort_keys=False))
        return 0
    cmd = kustomize_command()
    if cmd is None:
        missing("neither `kustomize` nor `kubectl kustomize` is available")
    api = ApiCheck()
    version = subprocess.run(cmd[:1] + (["version", "--client"] if cmd[0] == "kubectl" else ["version"]),
                             capture_output=True, text=True).stdout.strip().replace("\n", ", ")
    rendered = {target: render(cmd, target) for target in TARGETS}
    self_test_target = "overlays/llama3-70b-gpu"
    broken_sets = cluster_rules.mutated(rendered[self_test_target], MUTATIONS)
    schema = api.errors({**rendered, **broken_sets})
    print(f"renderer: {' '.join(cmd)} ({version}); API check: {api.describe()}")
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
