"""TLS, the metrics endpoint, and configuration parsing."""

from __future__ import annotations

import datetime
import subprocess
import sys
import urllib.request
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from armada_core.api import submit_pb2, submit_pb2_grpc
from armada_server import executor_cli
from armada_server.app import EmbeddedServer
from armada_server.cli import build_parser, config_from_args
from armada_server.config import (
    ConfigError,
    NodeGroup,
    PriorityClassConfig,
    ServerConfig,
    TaintConfig,
    build,
    parse_nodes,
)
from armada_server.executors.nodes import virtual_nodes

from ..jobs.factories import item


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_tls(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    config = ServerConfig(
        port=0,
        http_port=None,
        executor="none",
        tls_cert=str(cert),
        tls_key=str(key),
        database_url=f"sqlite:///{tmp_path / 'a.db'}",
    )
    with EmbeddedServer(config) as server:
        port = server.server.port
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(f"localhost:{port}", creds) as channel:
            submit_pb2_grpc.QueueServiceStub(channel).CreateQueue(submit_pb2.Queue(name="q"))
        with (
            grpc.insecure_channel(f"localhost:{port}") as channel,
            pytest.raises(grpc.RpcError) as raised,
        ):
            submit_pb2_grpc.QueueServiceStub(channel).GetQueue(
                submit_pb2.QueueGetRequest(name="q"), timeout=5
            )
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE


def test_metrics_endpoint(tmp_path: Path) -> None:
    with EmbeddedServer(database_url=f"sqlite:///{tmp_path / 'a.db'}") as server:
        with grpc.insecure_channel(server.address) as channel:
            submit_pb2_grpc.QueueServiceStub(channel).CreateQueue(submit_pb2.Queue(name="q"))
            submit_pb2_grpc.SubmitStub(channel).SubmitJobs(
                submit_pb2.JobSubmitRequest(
                    queue="q", job_set_id="s", job_request_items=[item(), item()]
                )
            )
        port = server.server.metrics.port
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    lines = text.decode().splitlines()
    assert 'armada_jobs{queue="q",state="queued"} 2.0' in lines
    assert 'armada_jobs_submitted_total{queue="q"} 2.0' in lines
    assert any(line.startswith("armada_event_stream_lag_seconds_bucket") for line in lines)


def test_config_file_and_command_line(tmp_path: Path) -> None:
    path = tmp_path / "server.yaml"
    path.write_text("""
port: 6000
database-url: sqlite:///x.db
nodes: [2x4x8Gi, {count: 1, cpu: "8", memory: 64Gi, gpus: 2}]
priority_classes:
  - {name: low, priority: 0, preemptible: true}
  - high=10
default_priority_class: low
auth:
  basic: {users: {alice: {password: pw, groups: [admins]}}}
  admin_groups: [admins]
""")
    config = build(path)
    assert config.port == 6000 and config.database_url == "sqlite:///x.db"
    assert config.nodes == (NodeGroup(2, "4", "8Gi"), NodeGroup(1, "8", "64Gi", 2))
    assert config.priority_classes == (
        PriorityClassConfig("low", 0, True),
        PriorityClassConfig("high", 10, False),
    )
    assert config.auth.enabled and config.auth.admin_groups == ("admins",)
    args = build_parser().parse_args(
        [
            "--config",
            str(path),
            "--port",
            "7000",
            "--priority-class",
            "urgent=100",
            "--priority-class",
            "batch=1:preemptible",
            "--nodes",
            "1x8x64Gix2",
        ]
    )
    config = config_from_args(args)
    assert config.port == 7000 and config.default_priority_class == "urgent"
    assert config.submission().priority_classes == {"urgent", "batch"}
    assert config.nodes == (NodeGroup(1, "8", "64Gi", 2),)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "2x4"], "expected COUNTxCPUxMEMORY[xGPUS]"),
        (["--nodes", "0x4x8Gi"], "the count must be at least 1"),
        (["--priority-class", "bad"], "expected NAME=PRIORITY[:preemptible]"),
        (["--port", "70000"], "port: 70000 is not a TCP port"),
        (["--scheduling-period", "0"], "scheduling_period: must be positive"),
    ],
)
def test_bad_command_lines(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        config_from_args(build_parser().parse_args(argv))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("colour: blue", "unknown setting 'colour'"),
        ("- a\n- b", "expected a mapping"),
        ("tls_cert: /nope.crt", "give both or neither"),
        ("default_priority_class: x", "'x' is not one of the priority classes"),
        ("executor: cloud", "'cloud' is not one of local, simulated, kubernetes, none"),
    ],
)
def test_bad_config_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        build(path)


# --- node groups: the short form and the mapping form, on the command line and in the file --

RACK = "topology/rack"
GPU_TAINT = TaintConfig("nvidia.com/gpu", "", "NoSchedule")


@pytest.mark.parametrize(
    ("text", "group"),
    [
        ("2x4x8Gi", NodeGroup(2, "4", "8Gi")),
        ("1x500mx512Mix2", NodeGroup(1, "500m", "512Mi", 2)),
        ('{count: 2, cpu: "16", memory: 64Gi}', NodeGroup(2, "16", "64Gi")),
        ("{count: 1, cpu: 8, memory: 64Gi, gpus: 2}", NodeGroup(1, "8", "64Gi", 2)),
        ("{count: 3, cpu: 0.5, memory: 1Gi, gpus: 0}", NodeGroup(3, "0.5", "1Gi")),
        (
            '{count: 2, cpu: "16", memory: 64Gi, gpus: 8, labels: {topology/rack: r1}, '
            "taints: [{key: nvidia.com/gpu, effect: NoSchedule}]}",
            NodeGroup(2, "16", "64Gi", 8, {RACK: "r1"}, (GPU_TAINT,)),
        ),
        (
            "{count: 1, cpu: 1, memory: 1Gi, labels: {topology/block: b1, topology/rack: r2}}",
            NodeGroup(1, "1", "1Gi", labels={"topology/block": "b1", RACK: "r2"}),
        ),
        (
            '{count: 1, cpu: 1, memory: 1Gi, taints: [{key: gpu, value: "true", '
            "effect: NoExecute}, {key: spot, effect: PreferNoSchedule}, {key: bare}]}",
            NodeGroup(
                1,
                "1",
                "1Gi",
                taints=(
                    TaintConfig("gpu", "true", "NoExecute"),
                    TaintConfig("spot", "", "PreferNoSchedule"),
                    TaintConfig("bare", "", "NoSchedule"),
                ),
            ),
        ),
        ("  {count: 1, cpu: 1, memory: 1Gi, labels: {}, taints: []}", NodeGroup(1, "1", "1Gi")),
    ],
)
def test_node_groups_from_the_command_line(text: str, group: NodeGroup) -> None:
    assert parse_nodes(text) == group
    args = build_parser().parse_args(["--nodes", text])
    assert config_from_args(args).nodes == (group,)


def test_labels_and_taints_reach_the_virtual_nodes(tmp_path: Path) -> None:
    flag = (
        '{count: 2, cpu: "16", memory: 64Gi, gpus: 8, labels: {topology/rack: r1}, '
        'taints: [{key: nvidia.com/gpu, value: "yes", effect: NoExecute}]}'
    )
    path = tmp_path / "server.yaml"
    path.write_text(
        "nodes:\n  - 1x2x4Gi\n  - {count: 1, cpu: 4, memory: 8Gi, "
        "labels: {topology/rack: r2}, taints: [{key: spot}]}\n"
    )
    from_flag = virtual_nodes([parse_nodes(flag)], "e")
    from_file = virtual_nodes(build(path).nodes, "f")
    assert [n.name for n in from_flag] == ["e-0", "e-1"]
    for node in from_flag:
        assert dict(node.labels) == {"kubernetes.io/hostname": node.name, RACK: "r1"}
        assert dict(node.allocatable) == {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "8"}
        assert [(t.key, t.value, t.effect) for t in node.taints] == [
            ("nvidia.com/gpu", "yes", "NoExecute")
        ]
    plain, labelled = from_file
    assert dict(plain.labels) == {"kubernetes.io/hostname": "f-0"} and not plain.taints
    assert dict(labelled.labels) == {"kubernetes.io/hostname": "f-1", RACK: "r2"}
    assert [(t.key, t.value, t.effect) for t in labelled.taints] == [("spot", "", "NoSchedule")]


BAD_GROUPS = [
    ("{cpu: 1, memory: 1Gi}", "count: is required"),
    ("{count: two, cpu: 1, memory: 1Gi}", "count: must be a whole number at least 1, got 'two'"),
    ('{count: "2", cpu: 1, memory: 1Gi}', "count: must be a whole number at least 1, got '2'"),
    ("{count: 1.5, cpu: 1, memory: 1Gi}", "count: must be a whole number at least 1, got 1.5"),
    ("{count: 0, cpu: 1, memory: 1Gi}", "count: must be a whole number at least 1, got 0"),
    ("{count: true, cpu: 1, memory: 1Gi}", "count: must be a whole number at least 1, got True"),
    ("{count: 1, memory: 1Gi}", "cpu: is required"),
    ("{count: 1, cpu: 1}", "memory: is required"),
    ("{count: 1, cpu: lots, memory: 1Gi}", "cpu: invalid quantity 'lots'"),
    ("{count: 1, cpu: -1, memory: 1Gi}", "cpu: negative quantity -1"),
    ("{count: 1, cpu: [1], memory: 1Gi}", "cpu: must be a quantity such as 4 or 500m, got [1]"),
    ("{count: 1, cpu: 1, memory: 8GB}", "memory: invalid quantity '8GB'"),
    ("{count: 1, cpu: 1, memory: 1Gi, gpus: -1}", "gpus: must be a whole number at least 0"),
    ("{count: 1, cpu: 1, memory: 1Gi, gpus: many}", "gpus: must be a whole number at least 0"),
    (
        "{count: 1, cpu: 1, memory: 1Gi, gpu: 2}",
        "gpu: unknown field (known: count, cpu, memory, gpus, labels, taints)",
    ),
    (
        "{count: 1, cpu: 1, memory: 1Gi, labels: [rack]}",
        "labels: must be a mapping of label names to values",
    ),
    (
        "{count: 1, cpu: 1, memory: 1Gi, labels: {rack: 1}}",
        "labels.rack: must be a string (quote it), got 1",
    ),
    (
        '{count: 1, cpu: 1, memory: 1Gi, labels: {"": r1}}',
        "labels: label names must be non-empty strings, got ''",
    ),
    (
        "{count: 1, cpu: 1, memory: 1Gi, taints: {key: gpu}}",
        "taints: must be a list of {key, value, effect} mappings",
    ),
    (
        "{count: 1, cpu: 1, memory: 1Gi, taints: [gpu]}",
        "taints[0]: must be a mapping with key, value and effect, got 'gpu'",
    ),
    (
        "{count: 1, cpu: 1, memory: 1Gi, taints: [{value: x}]}",
        "taints[0].key: must be a non-empty string, got None",
    ),
    (
        "{count: 1, cpu: 1, memory: 1Gi, taints: [{key: a}, {key: b, effect: NoRun}]}",
        "taints[1].effect: must be one of NoSchedule, PreferNoSchedule, NoExecute, got 'NoRun'",
    ),
    (
        "{count: 1, cpu: 1, memory: 1Gi, taints: [{key: a, value: true}]}",
        "taints[0].value: must be a string (quote it), got True",
    ),
    (
        "{count: 1, cpu: 1, memory: 1Gi, taints: [{key: a, operator: Exists}]}",
        "taints[0].operator: unknown field (known: key, value, effect)",
    ),
]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        *BAD_GROUPS,
        ("{count: 1, cpu: 1", "not a valid YAML mapping: expected ',' or '}'"),
        ("2x4", "expected COUNTxCPUxMEMORY[xGPUS], e.g. 2x4x8Gi, or a mapping"),
        ("0x4x8Gi", "the count must be at least 1"),
    ],
)
def test_bad_node_groups_on_the_command_line(
    text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both commands say which flag and which field is wrong, and start nothing."""
    with pytest.raises(ConfigError) as raised:
        config_from_args(build_parser().parse_args(["--nodes", "1x1x1Gi", "--nodes", text]))
    assert str(raised.value).startswith(f"--nodes {text!r}: ")
    assert message in str(raised.value)
    assert (
        executor_cli.main(
            ["--id", "e", "--kind", "simulated", "--server", "127.0.0.1:1", "--nodes", text]
        )
        == 2
    )
    assert f"armada-executor: --nodes {text!r}: " in capsys.readouterr().err


@pytest.mark.parametrize(("text", "message"), BAD_GROUPS)
def test_bad_node_groups_in_the_config_file(tmp_path: Path, text: str, message: str) -> None:
    """The same mistakes in the file name the entry and the field."""
    path = tmp_path / "server.yaml"
    path.write_text(f"nodes:\n  - 1x1x1Gi\n  - {text}\n")
    with pytest.raises(ConfigError) as raised:
        build(path)
    assert str(raised.value).startswith(f"{path}: nodes[1].")
    assert f"nodes[1].{message}" in str(raised.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nodes: 2x4x8Gi", "nodes: must be a list of node groups"),
        ("nodes: [7]", "nodes[0]: must be a mapping with count, cpu and memory"),
        ("nodes: [1x1x1Gi, 2x4]", "nodes[1] '2x4': expected COUNTxCPUxMEMORY[xGPUS]"),
        (
            "nodes: ['{count: 0, cpu: 1, memory: 1Gi}']",
            "nodes[0] '{count: 0, cpu: 1, memory: 1Gi}': count: must be a whole number at least 1",
        ),
    ],
)
def test_bad_node_lists_in_the_config_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "server.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        build(path)
    assert message in str(raised.value)


def test_the_executor_loads_no_storage() -> None:
    """An executor process reads a configuration and talks gRPC: loading the server's storage
    (SQLAlchemy, migrations) would only slow every executor's start."""
    code = (
        "import sys, armada_server.executor_cli\n"
        "print(sorted(m for m in sys.modules"
        " if m.startswith(('armada_server.storage', 'sqlalchemy', 'alembic'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
