"""Builders: table-driven checks of every child, and golden YAML of one reference job."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from distgnn_api import contract
from distgnn_api.contract import (
    CONFIG_MOUNT_DIR,
    DATA_MOUNT_PATH,
    DDP_PORT,
    RPC_PORT,
    SHM_MOUNT_PATH,
    Role,
    partition_key,
)
from distgnn_operator import naming
from distgnn_operator.builders import (
    JobContext,
    OperatorPeer,
    build_children,
    build_config_map,
    build_headless_service,
    build_network_policy,
    build_partition_job,
    build_pvc,
    build_statefulset,
)
from distgnn_operator.builders.locality import locality_term
from distgnn_operator.constants import (
    GPU_RESOURCE,
    LABEL_JOB,
    LABEL_PEER,
    LABEL_POD_INDEX,
    LABEL_RESTART_GENERATION,
    LABEL_ROLE,
)
from tests.operator.factories import make_spec
from tests.operator.harness import container_of, env_of

GOLDEN = Path(__file__).parent / "golden" / "children.yaml"
# Set by the builders for one role only, or by `distgnn run` only (pods bind every interface).
ROLE_ENV = {contract.ENV_TERMINATION_LOG: Role.partitioner}
LOCAL_ENV = {contract.ENV_METRICS_ADDRESS}
ALL_ENV = sorted(
    v
    for k, v in vars(contract).items()
    if k.startswith("ENV_")
    and v not in ROLE_ENV
    and v not in LOCAL_ENV
    and v not in contract.SETTINGS  # optional settings: set by hand, never by the operator
)


def ctx_of(**spec: Any) -> JobContext:
    return JobContext(name="demo", namespace="ns1", uid="uid-1", spec=make_spec(**spec))


def kinds(children: list[dict[str, Any]]) -> list[str]:
    return [f"{c['kind']}/{c['metadata']['name']}" for c in children]


ALL_CHILDREN = [
    "NetworkPolicy/demo-isolation",
    "ConfigMap/demo-config",
    "PersistentVolumeClaim/demo-data",
    "Job/demo-partition",
    "Service/demo-peers",
    "StatefulSet/demo-sampler",
    "StatefulSet/demo-trainer",
]
"""A default job's children, in the order they are created."""


@pytest.mark.parametrize(
    ("spec", "absent"),
    [
        ({}, []),
        (
            {"samplers": {"replicas": 0}, "storage": {"claimName": "shared"}},
            ["PersistentVolumeClaim/demo-data", "StatefulSet/demo-sampler"],
        ),
        ({"networkPolicy": {"enabled": False}}, ["NetworkPolicy/demo-isolation"]),
    ],
    ids=["default", "worker-mode-named-claim", "no-network-policy"],
)
def test_children_in_creation_order(spec: dict[str, Any], absent: list[str]) -> None:
    expected = [child for child in ALL_CHILDREN if child not in absent]
    assert kinds(build_children(ctx_of(**spec))) == expected


def test_reused_partition_builds_no_job() -> None:
    ctx = JobContext(name="demo", namespace="ns1", uid="u", spec=make_spec(), partition_reused=True)
    assert "Job/demo-partition" not in kinds(build_children(ctx))


@pytest.mark.parametrize(
    ("role", "builder"),
    [
        (Role.partitioner, lambda c: build_partition_job(c)),
        (Role.sampler, lambda c: build_statefulset(c, Role.sampler)),
        (Role.trainer, lambda c: build_statefulset(c, Role.trainer)),
    ],
    ids=["partition", "sampler", "trainer"],
)
def test_every_pod_gets_the_whole_env_contract(role: Role, builder: Any) -> None:
    ctx = ctx_of(trainers={"replicas": 3, "gpusPerPod": 2}, samplers={"replicas": 3})
    obj = builder(ctx)
    env = env_of(obj)
    assert sorted(env) == sorted(ALL_ENV + [v for v, r in ROLE_ENV.items() if r is role])
    assert env[contract.ENV_ROLE] == role.value
    assert env[contract.ENV_NUM_TRAINERS] == "3"
    assert env[contract.ENV_NUM_SAMPLERS] == "3"
    assert env[contract.ENV_PROCS_PER_POD] == "2"
    assert env[contract.ENV_JOB_UID] == "uid-1"
    assert env[contract.ENV_NAMESPACE] == "ns1"
    assert env[contract.ENV_DATA_DIR] == DATA_MOUNT_PATH
    assert (
        env[contract.ENV_PARTITION_DIR] == f"{DATA_MOUNT_PATH}/partitions/{partition_key(ctx.spec)}"
    )
    assert env[contract.ENV_RUN_DIR] == f"{DATA_MOUNT_PATH}/runs/uid-1"
    assert env[contract.ENV_CONFIG] == f"{CONFIG_MOUNT_DIR}/{contract.CONFIG_FILE_NAME}"
    assert env[contract.ENV_TRAINER_ADDRS] == ",".join(
        f"demo-trainer-{r}.demo-peers.ns1.svc:{RPC_PORT}" for r in range(3)
    )
    parsed = contract.parse_addrs(env[contract.ENV_SAMPLER_ADDRS], contract.ENV_SAMPLER_ADDRS)
    assert [a.host for a in parsed] == [
        contract.pod_dns_name("demo", Role.sampler, r, "ns1") for r in range(3)
    ]
    if role is Role.partitioner:
        assert env[contract.ENV_RANK] == "0"
        assert env[contract.ENV_TERMINATION_LOG] == container_of(obj)["terminationMessagePath"]
    else:
        assert env[contract.ENV_RANK] == {
            "fieldRef": {"fieldPath": f"metadata.labels['{LABEL_POD_INDEX}']"}
        }
    assert container_of(obj)["command"] == ["python", "-m", contract.role_module(role)]


AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]
        }
    }
}


@pytest.mark.parametrize(
    ("trainer_gpus", "sampler_gpus", "expect_trainer", "expect_sampler"),
    [(0, 0, None, None), (1, 0, "1", None), (4, 2, "4", "2")],
)
def test_gpu_requests_and_limits(
    trainer_gpus: int, sampler_gpus: int, expect_trainer: str | None, expect_sampler: str | None
) -> None:
    ctx = ctx_of(
        trainers={
            "gpusPerPod": trainer_gpus,
            "resources": {"requests": {"cpu": "4"}},
        },
        samplers={"gpusPerPod": sampler_gpus, "resources": {"limits": {"memory": "8Gi"}}},
    )
    for role, expected in ((Role.trainer, expect_trainer), (Role.sampler, expect_sampler)):
        c = container_of(build_statefulset(ctx, role))
        res = c["resources"]
        assert res.get("requests", {}).get(GPU_RESOURCE) == expected
        assert res.get("limits", {}).get(GPU_RESOURCE) == expected
        assert c["image"] == (ctx.spec.images.gpu if expected else ctx.spec.images.cpu)
        assert next(e["value"] for e in c["env"] if e["name"] == contract.ENV_DEVICE) == (
            "cuda" if expected else "cpu"
        )
    trainer_res = container_of(build_statefulset(ctx, Role.trainer))["resources"]
    assert trainer_res["requests"]["cpu"] == "4"
    assert (
        container_of(build_statefulset(ctx, Role.sampler))["resources"]["limits"]["memory"] == "8Gi"
    )
    assert GPU_RESOURCE not in container_of(build_partition_job(ctx))["resources"].get(
        "requests", {}
    )


@pytest.mark.parametrize(
    ("role", "ports"),
    [
        (Role.partitioner, {"metrics": 9400}),
        (Role.sampler, {"rpc": RPC_PORT, "metrics": 9400}),
        (Role.trainer, {"rpc": RPC_PORT, "ddp": DDP_PORT, "metrics": 9400}),
    ],
)
def test_named_ports(role: Role, ports: dict[str, int]) -> None:
    ctx = ctx_of()
    obj = build_partition_job(ctx) if role is Role.partitioner else build_statefulset(ctx, role)
    assert {p["name"]: p["containerPort"] for p in container_of(obj)["ports"]} == ports


@pytest.mark.parametrize("claim", [None, "shared-data"])
def test_volumes_config_and_shm(claim: str | None) -> None:
    ctx = ctx_of(storage={"claimName": claim} if claim else {})
    for obj in (build_partition_job(ctx), build_statefulset(ctx, Role.trainer)):
        pod = obj["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["data"]["persistentVolumeClaim"]["claimName"] == (claim or "demo-data")
        assert volumes["config"]["configMap"]["name"] == naming.config_map_name("demo")
        assert volumes["shm"]["emptyDir"] == {"medium": "Memory"}
        mounts = {m["name"]: m["mountPath"] for m in container_of(obj)["volumeMounts"]}
        assert mounts == {
            "data": DATA_MOUNT_PATH,
            "config": CONFIG_MOUNT_DIR,
            "shm": SHM_MOUNT_PATH,
        }


def test_scheduling_fields_reach_every_pod() -> None:
    ctx = ctx_of(
        scheduling={
            "schedulerName": "volcano",
            "priorityClassName": "high",
            "nodeSelector": {"pool": "gpu"},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "affinity": AFFINITY,
            "labels": {"team.example.com/queue": "q", LABEL_JOB: "spoofed"},
            "annotations": {"a": "b"},
        },
        serviceAccountName="trainer-sa",
        images={"pullSecrets": ["regcred"], "pullPolicy": "Always"},
    )
    for obj in (
        build_partition_job(ctx),
        build_statefulset(ctx, Role.sampler),
        build_statefulset(ctx, Role.trainer),
    ):
        tpl = obj["spec"]["template"]
        pod = tpl["spec"]
        assert pod["schedulerName"] == "volcano"
        assert pod["priorityClassName"] == "high"
        assert pod["nodeSelector"] == {"pool": "gpu"}
        assert pod["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
        # the user's affinity is kept; trainers also prefer their samplers' nodes
        assert pod["affinity"]["nodeAffinity"] == AFFINITY["nodeAffinity"]
        preferred = (
            pod["affinity"]
            .get("podAffinity", {})
            .get("preferredDuringSchedulingIgnoredDuringExecution", [])
        )
        if obj["metadata"]["name"].endswith("-trainer") and ctx.spec.samplers.replicas:
            assert preferred == [locality_term(ctx, Role.trainer)]
            selector = preferred[0]["podAffinityTerm"]["labelSelector"]["matchLabels"]
            assert selector[LABEL_ROLE] == Role.sampler.value
        else:
            assert preferred == []
        assert pod["serviceAccountName"] == "trainer-sa"
        assert "automountServiceAccountToken" not in pod
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]
        assert container_of(obj)["imagePullPolicy"] == "Always"
        assert tpl["metadata"]["labels"]["team.example.com/queue"] == "q"
        assert tpl["metadata"]["labels"][LABEL_JOB] == "demo"  # the operator's key wins
        assert tpl["metadata"]["annotations"] == {"a": "b"}
        assert obj["metadata"]["labels"]["team.example.com/queue"] == "q"


def test_statefulsets_are_parallel_ondelete_and_governed_by_the_service() -> None:
    ctx = JobContext(name="demo", namespace="ns1", uid="u", spec=make_spec(), restart_generation=3)
    svc = build_headless_service(ctx)
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    for role in (Role.sampler, Role.trainer):
        sts = build_statefulset(ctx, role)
        assert sts["spec"]["serviceName"] == svc["metadata"]["name"]
        assert sts["spec"]["podManagementPolicy"] == "Parallel"
        assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
        assert sts["spec"]["replicas"] == 2
        labels = sts["spec"]["template"]["metadata"]["labels"]
        # The service selects both roles' pods; the StatefulSet's selector only its own.
        assert all(labels[k] == v for k, v in svc["spec"]["selector"].items())
        assert all(labels[k] == v for k, v in sts["spec"]["selector"]["matchLabels"].items())
        assert sts["spec"]["selector"]["matchLabels"][LABEL_ROLE] == role.value
        assert labels[LABEL_RESTART_GENERATION] == "3"
        assert labels[LABEL_PEER] == "true"
    partition_labels = build_partition_job(ctx)["spec"]["template"]["metadata"]["labels"]
    assert LABEL_PEER not in partition_labels


def test_template_hash_follows_the_template() -> None:
    spec = make_spec()
    a = build_statefulset(JobContext("demo", "ns", "u", spec), Role.trainer)
    b = build_statefulset(JobContext("demo", "ns", "u", spec, restart_generation=1), Role.trainer)
    c = build_statefulset(JobContext("demo", "ns", "u", spec), Role.trainer)
    key = "distgnn.io/template-hash"
    assert a["metadata"]["annotations"][key] != b["metadata"]["annotations"][key]
    assert a["metadata"]["annotations"][key] == c["metadata"]["annotations"][key]


def test_statefulset_rejects_the_partition_role() -> None:
    with pytest.raises(ValueError, match="sampler or trainer"):
        build_statefulset(ctx_of(), Role.partitioner)


def test_network_policy_admits_the_job_and_only_metrics_from_outside() -> None:
    ctx = JobContext(
        name="demo",
        namespace="ns1",
        uid="u",
        spec=make_spec(
            networkPolicy={
                "monitoringNamespaceSelector": {"team": "obs"},
                "monitoringPodSelector": {"app": "prometheus"},
            }
        ),
        operator=OperatorPeer(
            namespace="distgnn-system", pod_labels={"app.kubernetes.io/name": "distgnn-operator"}
        ),
    )
    np = build_network_policy(ctx)
    assert np is not None
    spec = np["spec"]
    assert spec["podSelector"] == {"matchLabels": {LABEL_JOB: "demo"}}
    assert spec["policyTypes"] == ["Ingress"]
    internal, external = spec["ingress"]
    assert internal == {"from": [{"podSelector": {"matchLabels": {LABEL_JOB: "demo"}}}]}
    assert "ports" not in internal  # NCCL and TensorPipe pick ports at run time
    assert external["ports"] == [{"protocol": "TCP", "port": 9400}]
    assert external["from"] == [
        {
            "namespaceSelector": {"matchLabels": {"team": "obs"}},
            "podSelector": {"matchLabels": {"app": "prometheus"}},
        },
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "distgnn-system"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "distgnn-operator"}},
        },
    ]


def test_pvc_access_modes_and_claim() -> None:
    one_pod = ctx_of(samplers={"replicas": 0}, trainers={"replicas": 1})
    pvc = build_pvc(one_pod)
    assert pvc is not None
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    many = build_pvc(ctx_of(storage={"size": "5Gi", "storageClassName": "fast"}))
    assert many is not None
    assert many["spec"]["accessModes"] == ["ReadWriteMany"]
    assert many["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert many["spec"]["storageClassName"] == "fast"
    explicit = build_pvc(ctx_of(storage={"accessModes": ["ReadWriteOncePod"]}))
    assert explicit is not None
    assert explicit["spec"]["accessModes"] == ["ReadWriteOncePod"]
    assert build_pvc(ctx_of(storage={"claimName": "mine"})) is None


def test_config_map_holds_the_job_config() -> None:
    ctx = ctx_of(training={"epochs": 7})
    cfg = contract.JobConfig.model_validate_json(build_config_map(ctx)["data"]["job.json"])
    assert cfg.uid == "uid-1"
    assert cfg.partition_key == partition_key(ctx.spec)
    assert cfg.spec == ctx.spec


def test_partition_job_fails_fast_on_bad_input_and_follows_suspend() -> None:
    job = build_partition_job(ctx_of(runPolicy={"suspend": True, "backoffLimit": 5}))
    spec = job["spec"]
    assert spec["suspend"] is True
    assert spec["backoffLimit"] == 5
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    rule = spec["podFailurePolicy"]["rules"][0]
    assert rule["action"] == "FailJob"
    assert rule["onExitCodes"]["values"] == [contract.EXIT_BAD_INPUT]


def reference_context() -> JobContext:
    return JobContext(
        name="products",
        namespace="ml",
        uid="0d3c5b9e-1111-2222-3333-444455556666",
        spec=make_spec(
            trainers={
                "replicas": 2,
                "gpusPerPod": 1,
                "resources": {"requests": {"cpu": "8", "memory": "64Gi"}},
            },
            samplers={"replicas": 2, "resources": {"requests": {"cpu": "16", "memory": "128Gi"}}},
            storage={"size": "200Gi"},
        ),
        operator=OperatorPeer("distgnn-system", {"app.kubernetes.io/name": "distgnn-operator"}),
    )


def test_golden_children() -> None:
    """Every field of every child of a reference job; UPDATE_GOLDEN=1 rewrites the file."""
    text = yaml.safe_dump_all(build_children(reference_context()), sort_keys=False, width=100)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text)
    assert GOLDEN.read_text() == text, (
        "builders changed; rerun with UPDATE_GOLDEN=1 and review the diff"
    )
