"""Assets and ops whose whole body is one Armada job, gang or elastic pod group.

The job's identity and how it ran (job id, Armada run id, node, duration, exit code, links)
become the materialization's or output's metadata, so the Dagster UI answers "where and how
did this run" without opening Armada.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    MaterializeResult,
    OpDefinition,
    OpExecutionContext,
    Output,
    asset,
    op,
)

from armada_core.client import PodSpecLike, Role

from .job import AnyContext, execute_armada_job
from .resource import ArmadaResource

#: A pod spec, a list of them (a gang), or a function of the context returning either.
SpecSource = PodSpecLike | Sequence[PodSpecLike] | Callable[[AnyContext], Any]
#: An elastic pod group's roles (`Role`s or their mappings), or a function of the context
#: returning them.
RolesSource = Sequence[Role | Mapping[str, Any]] | Callable[[AnyContext], Any]


def _run(
    context: AnyContext,
    armada: ArmadaResource,
    pod_spec: SpecSource | None,
    roles: RolesSource | None,
    job: Mapping[str, Any],
) -> Any:
    spec = pod_spec(context) if callable(pod_spec) else pod_spec
    group = roles(context) if callable(roles) else roles
    return execute_armada_job(context, armada, spec, roles=group, **job)


def armada_asset(
    *,
    name: str | None = None,
    pod_spec: SpecSource | None = None,
    command: Sequence[str] | None = None,
    image: str = "python:3.11",
    cpu: str = "1",
    memory: str = "1Gi",
    env: Mapping[str, str] | None = None,
    replicas: int | None = None,
    roles: RolesSource | None = None,
    resource_key: str = "armada",
    job: Mapping[str, Any] | None = None,
    **asset_kwargs: Any,
) -> AssetsDefinition:
    """An asset materialized by running an Armada job (a gang with `replicas` or a list of
    pod specs; an elastic pod group with `roles`: a coordinator and 2 to 4 workers is
    `[Role("coordinator", spec), Role("worker", spec, minimum=2, maximum=4)]`). `job` holds
    further `execute_armada_job` arguments (priority, retry_policy, minimum_cardinality,
    node_uniformity_label, log_destination, ...); other keyword arguments go to `@asset`
    (deps, retry_policy, group_name, key_prefix, ...)."""
    settings = dict(
        job or {}, command=command, image=image, cpu=cpu, memory=memory, env=env, replicas=replicas
    )

    @asset(name=name, required_resource_keys={resource_key}, **asset_kwargs)
    def _armada_asset(context: AssetExecutionContext) -> MaterializeResult:
        armada: ArmadaResource = getattr(context.resources, resource_key)
        run = _run(context, armada, pod_spec, roles, settings)
        return MaterializeResult(metadata=run.metadata())

    return _armada_asset


def armada_op(
    *,
    name: str,
    pod_spec: SpecSource | None = None,
    command: Sequence[str] | None = None,
    image: str = "python:3.11",
    cpu: str = "1",
    memory: str = "1Gi",
    env: Mapping[str, str] | None = None,
    replicas: int | None = None,
    roles: RolesSource | None = None,
    resource_key: str = "armada",
    job: Mapping[str, Any] | None = None,
    **op_kwargs: Any,
) -> OpDefinition:
    """An op that runs an Armada job (or gang, or elastic pod group with `roles`) and outputs
    its result payload (the one every integration reports: outcome, summary, queue, job set,
    job ids, and per job its state, run, node, exit codes and duration); the output carries
    the same metadata as `armada_asset`'s materializations."""
    settings = dict(
        job or {}, command=command, image=image, cpu=cpu, memory=memory, env=env, replicas=replicas
    )

    @op(name=name, required_resource_keys={resource_key}, **op_kwargs)
    def _armada_op(context: OpExecutionContext) -> Output[dict]:
        armada: ArmadaResource = getattr(context.resources, resource_key)
        run = _run(context, armada, pod_spec, roles, settings)
        return Output(run.result, metadata=run.metadata())

    return _armada_op
