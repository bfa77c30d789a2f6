"""Rules of check_manifests.py for running on a shared GPU cluster, and the objects' helpers.

What the JSON schemas cannot say about scheduling, disruption, storage, network and
monitoring (each rule's finding names the object and what is wrong):
- images are pinned by digest;
- GPU pods select GPU nodes (nvidia.com/gpu.present), tolerate the nvidia.com/gpu taint and
  require enough GPU memory (nvidia.com/gpu.memory); actors spread over nodes;
- one PodDisruptionBudget lets at most one actor go at a time and selects nothing else;
- output.dir and quant.cache_dir of every role are on a PersistentVolumeClaim (the weights
  volume ReadOnlyMany, state ReadWriteOnce), every volume mount resolves;
- NetworkPolicies cover every pod and open exactly the ports of the Services that select it,
  each rule to named sources only (there is no NetworkPolicy JSON schema in
  ../shared/k8s-schemas: its shape is checked by kubernetes-validate's Kubernetes 1.29
  schemas, see check_manifests.py);
- a ServiceMonitor carries a `release` label and copies the pods' windquant.io/run into
  `run`;
- a generated overlay (generate_overlays.py) is current, and deploys its config of configs/
  unchanged with stages x replicas actor pods.
"""
import copy
import re

import yaml

import generate_overlays

# Role -> (binary, gRPC port). Metrics are on 9464 everywhere.
ROLES = {"learner": ("windquant-learner", 50051), "evaluator": ("windquant-evaluator", 50052),
         "actor": ("windquant-actor", 50053)}
METRICS_PORT = 9464
RUN_LABEL = "windquant.io/run"
RUN_SOURCE = "__meta_kubernetes_pod_label_windquant_io_run"
DIGEST = re.compile(r"^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$")
GPU_NODE_LABEL = "nvidia.com/gpu.present"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
WEIGHTS_CLAIM = "windquant-weights"


def ident(doc):
    return f"{doc['kind']}/{doc['metadata'].get('name')}"


def pod_spec(doc):
    return doc["spec"]["template"]["spec"]


def template_labels(doc):
    return doc["spec"]["template"]["metadata"].get("labels", {})


def role_of(doc):
    return template_labels(doc).get("app.kubernetes.io/component")


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def find(docs, kind, component=None, name=None):
    for d in docs:
        if d["kind"] == kind and (component is None or role_of(d) == component) and \
                (name is None or d["metadata"]["name"] == name):
            return d
    raise KeyError(kind)


def check_cluster(docs, target, cfg):
    """Findings of the rules above for one rendered target with run config `cfg`."""
    f = []
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    workloads = by_kind.get("Deployment", []) + by_kind.get("StatefulSet", [])
    for w in workloads:
        check_scheduling(f, w)
        check_storage(f, w, cfg, by_kind)
    check_disruption(f, workloads, by_kind.get("PodDisruptionBudget", []))
    check_network(f, workloads, by_kind.get("Service", []), by_kind.get("NetworkPolicy", []))
    check_service_monitors(f, workloads, by_kind.get("ServiceMonitor", []))
    check_generated(f, target, by_kind, cfg)
    return f


def check_scheduling(f, w):
    """Digests; GPU node selection, toleration and memory; actors spread over nodes."""
    pod = pod_spec(w)
    for c in pod.get("containers", []) + pod.get("initContainers", []):
        if not DIGEST.match(c.get("image", "")):
            f.append(f"{ident(w)} container {c['name']}: image {c.get('image')!r} is not pinned "
                     "by digest (name@sha256:<64 hex>)")
    gpu = any("nvidia.com/gpu" in c.get("resources", {}).get("limits", {})
              for c in pod.get("containers", []))
    if gpu:
        if pod.get("nodeSelector", {}).get(GPU_NODE_LABEL) != "true":
            f.append(f'{ident(w)}: a GPU pod needs nodeSelector {GPU_NODE_LABEL}: "true"')
        if not any(t.get("key") == "nvidia.com/gpu" and t.get("effect") == "NoSchedule" and
                   t.get("operator") == "Exists" for t in pod.get("tolerations", [])):
            f.append(f"{ident(w)}: a GPU pod needs a toleration of the nvidia.com/gpu NoSchedule taint")
        terms = pod.get("affinity", {}).get("nodeAffinity", {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
        if not terms or not all(any(e.get("key") == GPU_MEMORY_LABEL and e.get("operator") == "Gt"
                                    for e in t.get("matchExpressions", [])) for t in terms):
            f.append(f"{ident(w)}: a GPU pod must require {GPU_MEMORY_LABEL} Gt its stage's need")
    if role_of(w) == "actor":
        spread = [t for t in pod.get("topologySpreadConstraints", [])
                  if t.get("topologyKey") == "kubernetes.io/hostname" and
                  selects(t.get("labelSelector", {}).get("matchLabels"), template_labels(w)) and
                  t.get("labelSelector", {}).get("matchLabels", {}).get(
                      "app.kubernetes.io/component") == "actor"]
        if not spread:
            f.append(f"{ident(w)}: needs topologySpreadConstraints over kubernetes.io/hostname "
                     "selecting the actor pods")


def check_disruption(f, workloads, budgets):
    """Exactly one budget covers the actors, allows one disruption, and selects no other pod."""
    covering = []
    for b in budgets:
        sel = b["spec"].get("selector", {}).get("matchLabels")
        picked = [w for w in workloads if selects(sel, template_labels(w))]
        if any(role_of(w) != "actor" for w in picked) or not picked:
            f.append(f"{ident(b)}: selects {[ident(w) for w in picked]}, expected the actors only "
                     "(a budget on a one-pod Deployment blocks every drain of its node)")
        elif b["spec"].get("maxUnavailable") != 1 or "minAvailable" in b["spec"]:
            f.append(f"{ident(b)}: maxUnavailable must be 1 (one replica's pipeline at a time)")
        covering += picked
    if any(role_of(w) == "actor" for w in workloads) and \
            sum(role_of(w) == "actor" for w in covering) != 1:
        f.append("exactly one PodDisruptionBudget must select the actor pods")


def check_storage(f, w, cfg, by_kind):
    """output.dir and quant.cache_dir live on claims; every mount resolves."""
    pod = pod_spec(w)
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    templates = {t["metadata"]["name"]: t for t in w["spec"].get("volumeClaimTemplates", [])}
    claims = {c["metadata"]["name"]: c for c in by_kind.get("PersistentVolumeClaim", [])}
    paths = {"quant.cache_dir": cfg.get("quant", {}).get("cache_dir", "")}
    if role_of(w) != "actor":
        paths["output.dir"] = cfg.get("output", {}).get("dir", "")
    for c in pod.get("containers", []):
        cid = f"{ident(w)} container {c['name']}"
        mounts = c.get("volumeMounts", [])
        for m in mounts:
            if m["name"] not in volumes and m["name"] not in templates:
                f.append(f"{cid}: volumeMount {m['name']!r} has no volume or volumeClaimTemplate")
        for key, path in paths.items():
            under = [m for m in mounts if path == m["mountPath"] or
                     path.startswith(m["mountPath"].rstrip("/") + "/")]
            if not path.startswith("/") or not under:
                f.append(f"{cid}: {key} {path!r} is not under a mounted volume")
                continue
            m = max(under, key=lambda m: len(m["mountPath"]))
            claim = volumes.get(m["name"], {}).get("persistentVolumeClaim", {}).get("claimName")
            if m["name"] in templates or (claim in claims and not m.get("readOnly")):
                continue
            f.append(f"{cid}: {key} {path} is on volume {m['name']!r}, not a writable "
                     "PersistentVolumeClaim: it is lost with the pod")
    for t in templates.values():
        if t["spec"].get("accessModes") != ["ReadWriteOnce"]:
            f.append(f"{ident(w)}: volumeClaimTemplate {t['metadata']['name']} must be ReadWriteOnce")
    for name, claim in claims.items():
        want = ["ReadOnlyMany"] if name == WEIGHTS_CLAIM else ["ReadWriteOnce"]
        if claim["spec"].get("accessModes") != want:
            f.append(f"{ident(claim)}: accessModes must be {want}")


def service_ports(w, services):
    """{(port, protocol)} of the container ports that Services selecting `w`'s pods target."""
    by_name = {p.get("name"): p for c in pod_spec(w)["containers"] for p in c.get("ports", [])}
    out = set()
    for s in services:
        if selects(s["spec"].get("selector"), template_labels(w)):
            for p in s["spec"].get("ports", []):
                target = by_name.get(p.get("targetPort"), {}).get("containerPort", p.get("targetPort"))
                out.add((target, p.get("protocol", "TCP")))
    return out


def check_network(f, workloads, services, policies):
    """Every pod is covered; each policy opens exactly its pods' Service ports, to named peers."""
    for w in workloads:
        if not any(selects(p["spec"].get("podSelector", {}).get("matchLabels"), template_labels(w))
                   for p in policies):
            f.append(f"{ident(w)}: no NetworkPolicy selects its pods, all ingress is open")
    for p in policies:
        pid, spec = ident(p), p["spec"]
        if p["apiVersion"] != "networking.k8s.io/v1":
            f.append(f"{pid}: apiVersion must be networking.k8s.io/v1")
        if "Ingress" not in spec.get("policyTypes", []):
            f.append(f"{pid}: policyTypes must include Ingress")
        picked = [w for w in workloads
                  if selects(spec.get("podSelector", {}).get("matchLabels"), template_labels(w))]
        if not picked:
            f.append(f"{pid}: selects no windquant pod")
            continue
        opened = set()
        for i, rule in enumerate(spec.get("ingress", [])):
            if not rule.get("from") or not rule.get("ports"):
                f.append(f"{pid}: ingress rule {i} must name its sources (from) and ports")
            opened |= {(x.get("port"), x.get("protocol", "TCP")) for x in rule.get("ports", [])}
        wanted = set().union(*(service_ports(w, services) for w in picked))
        for port in sorted(opened - wanted, key=str):
            f.append(f"{pid}: opens {port[0]}/{port[1]}, not a Service port of its pods")
        for port in sorted(wanted - opened, key=str):
            f.append(f"{pid}: does not open Service port {port[0]}/{port[1]} of its pods")


def check_service_monitors(f, workloads, monitors):
    """Prometheus Operator selection label and the `run` label."""
    for sm in monitors:
        if not sm["metadata"].get("labels", {}).get("release"):
            f.append(f"{ident(sm)}: needs a `release` label (kube-prometheus-stack selects on it)")
        for ep in sm["spec"].get("endpoints", []):
            if not any(r.get("sourceLabels") == [RUN_SOURCE] and r.get("targetLabel") == "run"
                       for r in ep.get("relabelings", [])):
                f.append(f"{ident(sm)}: endpoint {ep.get('port')!r} must relabel {RUN_SOURCE} to run")
    if monitors:
        for w in workloads:
            if not template_labels(w).get(RUN_LABEL):
                f.append(f"{ident(w)}: pods need the {RUN_LABEL} label (the dashboard's run)")


def check_generated(f, target, by_kind, cfg):
    """A generated overlay is current and deploys its config unchanged."""
    overlay = target.split("/")[-1]
    if not target.startswith("overlays/") or overlay not in generate_overlays.OVERLAYS:
        return
    config = generate_overlays.OVERLAYS[overlay]
    want = generate_overlays.expected_files(overlay)[f"{target}/run.yaml"]
    f.extend(f"deploy/k8s/{p} is stale: run deploy/k8s/generate_overlays.py"
             for p in generate_overlays.stale_files() if p.startswith(target + "/"))
    maps = [c for c in by_kind.get("ConfigMap", []) if c["metadata"]["name"].startswith("windquant-run-")]
    if not maps or maps[0]["data"].get("run.yaml") != want:
        f.append(f"the rendered run.yaml is not {config} (generate_overlays.py)")
    stages, replicas = generate_overlays.topology(want)
    svc = cfg.get("service", {})
    if (svc.get("stages"), svc.get("replicas")) != (stages, replicas):
        f.append(f"run.yaml stages x replicas {svc.get('stages')} x {svc.get('replicas')} != "
                 f"{stages} x {replicas} of {config}")
    for sts in by_kind.get("StatefulSet", []):
        if sts["spec"].get("replicas") != stages * replicas:
            f.append(f"{ident(sts)}: replicas {sts['spec'].get('replicas')} != stages x replicas "
                     f"{stages} x {replicas} of {config}")


def _set_run_yaml(docs, text):
    for d in docs:
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("windquant-run-"):
            d["data"]["run.yaml"] = text


def _eight_stages(docs):
    for d in docs:
        if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("windquant-run-"):
            cfg = yaml.safe_load(d["data"]["run.yaml"])
            cfg["service"]["stages"] = 8
            _set_run_yaml(docs, yaml.safe_dump(cfg))


def _np(docs, name="windquant-learner"):
    return find(docs, "NetworkPolicy", name=name)["spec"]


# (name, expected text in a finding, mutation of a rendered GPU overlay); "unknown field"
# means the API check's wording (check_manifests.py).
MUTATIONS = [
    ("image by tag", "digest", lambda ds: pod_spec(find(ds, "StatefulSet"))["containers"][0].__setitem__(
        "image", "registry.example.com/windquant/windquant-cuda:0.1.0")),
    ("no GPU toleration", "toleration",
     lambda ds: pod_spec(find(ds, "StatefulSet")).__setitem__("tolerations", [])),
    ("no GPU node selector", GPU_NODE_LABEL,
     lambda ds: pod_spec(find(ds, "Deployment", "evaluator")).pop("nodeSelector")),
    ("no GPU memory affinity", GPU_MEMORY_LABEL,
     lambda ds: pod_spec(find(ds, "StatefulSet")).pop("affinity")),
    ("no topology spread", "topologySpreadConstraints",
     lambda ds: pod_spec(find(ds, "StatefulSet")).pop("topologySpreadConstraints")),
    ("budget on the learner", "actors only",
     lambda ds: find(ds, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"].__setitem__(
         "app.kubernetes.io/component", "learner")),
    ("budget of 3", "maxUnavailable",
     lambda ds: find(ds, "PodDisruptionBudget")["spec"].__setitem__("maxUnavailable", 3)),
    ("learner state on emptyDir", "not a writable PersistentVolumeClaim",
     lambda ds: [v.update({"emptyDir": {}}) or v.pop("persistentVolumeClaim")
                 for v in pod_spec(find(ds, "Deployment", "learner"))["volumes"] if v["name"] == "work"]),
    ("writable weights", "accessModes",
     lambda ds: find(ds, "PersistentVolumeClaim", name=WEIGHTS_CLAIM)["spec"].__setitem__(
         "accessModes", ["ReadWriteMany"])),
    ("extra open port", "not a Service port",
     lambda ds: _np(ds)["ingress"][0]["ports"].append({"port": 22, "protocol": "TCP"})),
    ("missing Service port", "does not open Service port",
     lambda ds: _np(ds, "windquant-actors")["ingress"].pop(0)),
    ("rule open to all", "must name its sources",
     lambda ds: _np(ds)["ingress"][1].pop("from")),
    ("no NetworkPolicy", "all ingress is open",
     lambda ds: ds.remove(find(ds, "NetworkPolicy", name="windquant-evaluator"))),
    ("NetworkPolicy unknown field", "unknown field",
     lambda ds: _np(ds).__setitem__("ingresz", [])),
    ("ServiceMonitor without release", "release",
     lambda ds: find(ds, "ServiceMonitor")["metadata"]["labels"].pop("release")),
    ("ServiceMonitor without run", "relabel",
     lambda ds: find(ds, "ServiceMonitor")["spec"]["endpoints"][0].pop("relabelings")),
    ("run.yaml differs from its config", "configs/llama3-70b.yaml", _eight_stages),
]


def mutated(docs, mutations):
    """{"mutation: NAME": broken copy of docs} for every mutation."""
    out = {}
    for name, _, mutate in mutations:
        broken = copy.deepcopy(docs)
        mutate(broken)
        out[f"mutation: {name}"] = broken
    return out
