"""The ``distgnn`` command: run a job on this machine, render or validate it.

- ``distgnn run JOB.yaml``: the whole job as local processes (the embedded default).
- ``distgnn render JOB.yaml``: the manifests the operator would create, as a YAML stream.
- ``distgnn validate JOB.yaml``: check a job with the CRD's own rules, naming each bad field,
  refuse what ``distgnn run`` and the workload would refuse at start-up, and warn when its
  resources cannot hold its capacity plan.
- ``distgnn plan JOB.yaml``: memory, GPU memory and disk per pod, the partition Job, bytes
  between pods and seeds/s; ``--strict`` exits 3 when the resources cannot hold them.
- ``distgnn crd``: the DistGNNJob CRD, generated from the spec models.

Importing this module imports neither torch nor kopf: the operator image has no torch and
a laptop that only runs jobs locally needs no kopf. Heavy modules load inside commands.
"""

from __future__ import annotations

import argparse
import io
import json
import signal
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from distgnn_api.capacity import GIB
from distgnn_api.capacity_check import spec_shortfalls
from distgnn_api.contract import EXIT_INTERNAL_ERROR, EXIT_OK, partition_key
from distgnn_api.spec import KIND, DistGNNJob, ImagesSpec
from distgnn_operator.job_files import CliError as CliError
from distgnn_operator.job_files import load_job as load_job
from distgnn_operator.job_files import load_jobs as load_jobs

DEFAULT_DATA_DIR = Path("distgnn-data")
DEFAULT_GPU_MEMORY_GIB = 80.0
EXIT_DOES_NOT_FIT = 3  # distgnn plan --strict: the job's resources cannot hold its plan
DEFAULT_NAMESPACE = "default"


# --------------------------------------------------------------------------- commands


def _graph_summary(job: DistGNNJob) -> str:
    """'' for a homogeneous graph; for a heterogeneous one its target type (or supervised
    edge type) and model."""
    hetero = job.spec.dataset.hetero_section
    if hetero is None:
        return ""
    link = job.spec.link_prediction
    if job.spec.is_link_prediction and link is not None:
        what = f"links of {link.edge_type}"
    else:
        what = f"target {hetero.target_node_type or 'its only labelled node type'}"
    return f"; heterogeneous graph, {what}, model {job.spec.model.arch.value}"


def _gpu_memory(args: argparse.Namespace) -> int:
    gib = float(args.gpu_memory)
    if not gib > 0:
        raise CliError(f"--gpu-memory must be above 0 GiB, got {args.gpu_memory}")
    return int(gib * GIB)


def cmd_validate(args: argparse.Namespace, out: Console) -> int:
    from distgnn_operator.local.job_plan import UnsupportedJobError, check_supported
    from distgnn_operator.local.runner import job_shape

    gpu_memory = _gpu_memory(args)
    for path in args.jobs:
        for job in load_jobs(path):
            try:
                # what `distgnn run` and the workload refuse at start-up, admitted or not
                check_supported(job.spec)
            except UnsupportedJobError as err:
                raise CliError(
                    f"{path}: {KIND} {job.metadata.name} passes the CRD's rules, but the "
                    f"workload refuses it at start-up (and so does distgnn run): {err}"
                ) from None
            out.print(
                f"{path}: {KIND} {job.metadata.name} is valid: {job_shape(job.spec)}"
                f"{_graph_summary(job)} (partition key {partition_key(job.spec)})",
                highlight=False,
            )
            for short in spec_shortfalls(job.spec, gpu_memory) or []:
                out.print(
                    f"[bold yellow]warning:[/] {path}: {KIND} {job.metadata.name}: "
                    f"{escape(short.message)} (see distgnn plan)",
                    highlight=False,
                )
    return EXIT_OK


def cmd_plan(args: argparse.Namespace, out: Console) -> int:
    from distgnn_api.capacity import build_plan
    from distgnn_api.capacity_check import check
    from distgnn_api.graph_size_sources import GraphSizeError, resolve
    from distgnn_api.traffic import seeds_per_second, traffic
    from distgnn_operator.plan_report import plan_json, print_plan

    job = load_job(args.job)
    gpu_memory = _gpu_memory(args)
    try:
        graph = resolve(
            job.spec,
            meta=args.meta,
            nodes=args.nodes,
            edges=args.edges,
            features=args.features,
            classes=args.classes,
            train_nodes=args.train_nodes,
            edge_cut=args.edge_cut,
        )
    except GraphSizeError as err:
        raise CliError(f"{args.job}: {err}") from None
    plan = build_plan(job.spec, graph, gpu_memory=gpu_memory)
    moved = traffic(job.spec, plan)
    rate = seeds_per_second(job.spec, plan)
    shortfalls = check(job.spec, plan, gpu_memory)
    if args.json:
        sys.stdout.write(json.dumps(plan_json(plan, moved, rate, shortfalls), indent=2) + "\n")
    else:
        out.print(f"{args.job}: capacity plan of {KIND} {job.metadata.name}")
        print_plan(out, job.spec, plan, moved, rate, shortfalls, gpu_memory)
    return EXIT_DOES_NOT_FIT if args.strict and shortfalls else EXIT_OK


def _render_uid(job: DistGNNJob, namespace: str, uid: str | None) -> str:
    """A stable placeholder UID: the real one is assigned by the API server."""
    return (
        uid
        or job.metadata.uid
        or str(uuid.uuid5(uuid.NAMESPACE_URL, f"distgnn.io/{namespace}/{job.metadata.name}"))
    )


class _BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings (the job config JSON) as literal blocks."""


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_BlockDumper.add_representer(str, _str_presenter)


def _with_images(job: DistGNNJob, *, cpu: str | None, gpu: str | None) -> DistGNNJob:
    """The job with ``spec.images`` overridden (e.g. images pushed to your own registry)."""
    changes = {name: image for name, image in (("cpu", cpu), ("gpu", gpu)) if image is not None}
    if not changes:
        return job
    try:
        images = ImagesSpec.model_validate({**job.spec.images.model_dump(), **changes})
    except ValidationError as err:
        flag = f"--{err.errors()[0]['loc'][0]}-image"
        raise CliError(f"{flag}: {err.errors()[0]['msg']}; give an image reference") from None
    return job.model_copy(update={"spec": job.spec.model_copy(update={"images": images})})


def cmd_render(args: argparse.Namespace, out: Console) -> int:
    from distgnn_operator.builders import JobContext, build_children

    job = _with_images(load_job(args.job), cpu=args.cpu_image, gpu=args.gpu_image)
    namespace = args.namespace or job.metadata.namespace or DEFAULT_NAMESPACE
    uid = _render_uid(job, namespace, args.uid)
    ctx = JobContext(name=job.metadata.name, namespace=namespace, uid=uid, spec=job.spec)
    children = build_children(ctx)
    header = (
        f"# The children the distgnn operator creates for {KIND} {namespace}/{job.metadata.name}\n"
        f"# with job uid {uid}. The API server assigns the real uid, and the\n"
        "# operator adds ownerReferences to the job when it creates them.\n"
    )
    sys.stdout.write(header)
    sys.stdout.write(
        yaml.dump_all(children, Dumper=_BlockDumper, sort_keys=False, explicit_start=True)
    )
    return EXIT_OK


def cmd_crd(args: argparse.Namespace, out: Console) -> int:
    from distgnn_operator.crd import render

    sys.stdout.write(render())
    return EXIT_OK


def cmd_run(args: argparse.Namespace, out: Console) -> int:
    from distgnn_operator.local.devices import WorkloadMissingError
    from distgnn_operator.local.job_plan import UnsupportedJobError
    from distgnn_operator.local.loopback import LocalModeError
    from distgnn_operator.local.runner import RunOptions, run_job

    job = load_job(args.job)
    options = RunOptions(
        data_dir=Path(args.data_dir),
        job_file=args.job,
        run_dir=Path(args.run_dir) if args.run_dir else None,
        uid=args.uid,
        gpus=args.gpus,
        grace_period_s=args.grace_period,
        preload=args.preload,
        metrics_address=args.metrics_address,
    )
    try:
        return run_job(job, options, out)
    except LocalModeError as err:
        raise CliError(f"{args.job}: cannot run locally: {err}", EXIT_INTERNAL_ERROR) from None
    except WorkloadMissingError as err:
        raise CliError(str(err), EXIT_INTERNAL_ERROR) from None
    except UnsupportedJobError as err:
        raise CliError(f"{args.job}: {err}") from None


def _gpu_memory_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gpu-memory",
        type=float,
        default=DEFAULT_GPU_MEMORY_GIB,
        metavar="GIB",
        help="memory of one GPU in GiB (default: %(default)s)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="distgnn",
        description="Distributed GNN training: run a DistGNNJob locally, render or validate it.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run a job on this machine as local processes",
        description="Run a DistGNNJob's partition step, samplers and trainers as local "
        "processes, from the operator's own pod templates.",
    )
    run.add_argument("job", metavar="JOB.yaml", help="the DistGNNJob file ('-' reads stdin)")
    run.add_argument(
        "--data-dir",
        default=str(DEFAULT_DATA_DIR),
        help="local directory that stands in for the shared volume: datasets, partitions, "
        "runs (default: %(default)s)",
    )
    run.add_argument(
        "--run-dir",
        help="directory of this run's config, logs, checkpoints and result "
        "(default: DATA_DIR/runs/UID)",
    )
    run.add_argument(
        "--uid",
        help="the job UID of this run (default: a fresh one); give an earlier run's UID to "
        "resume it from its last checkpoint",
    )
    run.add_argument(
        "--gpus",
        type=int,
        help="use at most this many local GPUs; 0 runs on CPU with gloo (default: all visible)",
    )
    run.add_argument(
        "--grace-period",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long processes get to exit after SIGTERM before SIGKILL (default: %(default)s)",
    )
    run.add_argument(
        "--preload",
        action="store_true",
        help="start the CPU processes by forking a launcher that imported torch once (seconds "
        "of CPU sooner each, on every restart too); ps then shows them under the launcher's "
        "command line and environment",
    )
    run.add_argument(
        "--metrics-address",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="interface the processes' /metrics listeners bind; 0.0.0.0 lets another machine "
        "scrape them (default: %(default)s, this machine only)",
    )
    run.set_defaults(func=cmd_run)

    render = sub.add_parser(
        "render",
        help="print the manifests the operator would create",
        description="Print the children the operator creates for a DistGNNJob, as a YAML stream.",
    )
    render.add_argument("job", metavar="JOB.yaml")
    render.add_argument("-n", "--namespace", help="namespace (default: the file's, else default)")
    render.add_argument(
        "--uid", help="UID to write in ownerReferences (default: a stable placeholder)"
    )
    for kind, pods in (("cpu", "the partition Job and pods without GPUs"), ("gpu", "GPU pods")):
        render.add_argument(
            f"--{kind}-image",
            metavar="IMAGE",
            help=f"image of {pods} (default: the job's spec.images.{kind})",
        )
    render.set_defaults(func=cmd_render)

    validate = sub.add_parser(
        "validate",
        help="check job files with the CRD's rules",
        description=(
            "Check DistGNNJob files with the same models and rules as the CRD, and refuse "
            "what distgnn run and the workload refuse at start-up."
        ),
    )
    validate.add_argument("jobs", metavar="JOB.yaml", nargs="+")
    _gpu_memory_flag(validate)
    validate.set_defaults(func=cmd_validate)

    plan = sub.add_parser(
        "plan",
        help="print a job's capacity plan: memory per pod, bytes between pods, seeds/s",
        description="Print what each pod of a DistGNNJob needs (host memory, GPU memory, the "
        "shared volume), the partition Job's peak memory and time, the bytes moved between "
        "pods per mini-batch and per epoch, and the expected seeds/s. The graph's size comes "
        "from the spec (synthetic datasets, public OGB datasets by name), a partition store's "
        "META.json (--meta) or the counts given.",
    )
    plan.add_argument("job", metavar="JOB.yaml")
    plan.add_argument("--meta", help="a partition store's META.json (or its directory)")
    plan.add_argument("--nodes", type=int, help="number of nodes")
    plan.add_argument("--edges", type=int, help="number of undirected edges")
    plan.add_argument("--features", type=int, help="node feature dimension")
    plan.add_argument("--classes", type=int, help="number of label classes")
    plan.add_argument("--train-nodes", type=int, help="training seeds per epoch")
    plan.add_argument(
        "--edge-cut", type=float, help="share of edges the partition cuts (default: as random)"
    )
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.add_argument(
        "--strict",
        action="store_true",
        help=f"exit {EXIT_DOES_NOT_FIT} when a memory request or limit, a GPU or the volume "
        "cannot hold the plan",
    )
    _gpu_memory_flag(plan)
    plan.set_defaults(func=cmd_plan)

    crd = sub.add_parser(
        "crd",
        help="print the DistGNNJob CRD",
        description="Print the DistGNNJob CustomResourceDefinition generated from the spec models.",
    )
    crd.set_defaults(func=cmd_crd)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``distgnn`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    # Progress lines must reach a pipe or a CI log as they happen, not when a buffer fills.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    # Soft wrap: a field path or a log line is never broken across lines.
    out = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        code: int = args.func(args, out)
    except CliError as error:
        err.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False)
        return error.code
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    return code


if __name__ == "__main__":
    sys.exit(main())
