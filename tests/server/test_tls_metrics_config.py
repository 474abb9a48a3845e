"""TLS, the metrics endpoint, and configuration parsing."""

from __future__ import annotations

import datetime
import urllib.request
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from armada_core.api import submit_pb2, submit_pb2_grpc
from armada_server.app import EmbeddedServer
from armada_server.cli import build_parser, config_from_args
from armada_server.config import ConfigError, NodeGroup, PriorityClassConfig, ServerConfig, build

from ..jobs.factories import item


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_tls(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    config = ServerConfig(port=0, http_port=None, executor="none", tls_cert=str(cert),
                          tls_key=str(key), database_url=f"sqlite:///{tmp_path / 'a.db'}")
    with EmbeddedServer(config) as server:
        port = server.server.port
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(f"localhost:{port}", creds) as channel:
            submit_pb2_grpc.QueueServiceStub(channel).CreateQueue(submit_pb2.Queue(name="q"))
        with grpc.insecure_channel(f"localhost:{port}") as channel, \
                pytest.raises(grpc.RpcError) as raised:
            submit_pb2_grpc.QueueServiceStub(channel).GetQueue(
                submit_pb2.QueueGetRequest(name="q"), timeout=5)
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE


def test_metrics_endpoint(tmp_path: Path) -> None:
    with EmbeddedServer(database_url=f"sqlite:///{tmp_path / 'a.db'}") as server:
        with grpc.insecure_channel(server.address) as channel:
            submit_pb2_grpc.QueueServiceStub(channel).CreateQueue(submit_pb2.Queue(name="q"))
            submit_pb2_grpc.SubmitStub(channel).SubmitJobs(submit_pb2.JobSubmitRequest(
                queue="q", job_set_id="s", job_request_items=[item(), item()]))
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
    assert config.priority_classes == (PriorityClassConfig("low", 0, True),
                                       PriorityClassConfig("high", 10, False))
    assert config.auth.enabled and config.auth.admin_groups == ("admins",)
    args = build_parser().parse_args(["--config", str(path), "--port", "7000",
                                      "--priority-class", "urgent=100",
                                      "--priority-class", "batch=1:preemptible",
                                      "--nodes", "1x8x64Gix2"])
    config = config_from_args(args)
    assert config.port == 7000 and config.default_priority_class == "urgent"
    assert config.submission().priority_classes == {"urgent", "batch"}
    assert config.nodes == (NodeGroup(1, "8", "64Gi", 2),)


@pytest.mark.parametrize(("argv", "message"), [
    (["--nodes", "2x4"], "expected COUNTxCPUxMEMORY[xGPUS]"),
    (["--nodes", "0x4x8Gi"], "the count must be at least 1"),
    (["--priority-class", "bad"], "expected NAME=PRIORITY[:preemptible]"),
    (["--port", "70000"], "port: 70000 is not a TCP port"),
    (["--scheduling-period", "0"], "scheduling_period: must be positive"),
])
def test_bad_command_lines(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        config_from_args(build_parser().parse_args(argv))


@pytest.mark.parametrize(("text", "message"), [
    ("colour: blue", "unknown setting 'colour'"),
    ("- a\n- b", "expected a mapping"),
    ("tls_cert: /nope.crt", "give both or neither"),
    ("default_priority_class: x", "'x' is not one of the priority classes"),
    ("executor: cloud", "'cloud' is not one of local, simulated, kubernetes, none"),
])
def test_bad_config_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        build(path)
