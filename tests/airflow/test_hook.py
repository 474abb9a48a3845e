"""The ``armada`` connection type: how connections become client settings, and the provider
metadata Airflow's providers manager reads."""

from __future__ import annotations

import json
from importlib.resources import files

import jsonschema
import pytest
from airflow.sdk import Connection

from airflow_armada.get_provider_info import get_provider_info
from airflow_armada.hooks.armada import ArmadaHook, ConnectionNotDefined, config_from_connection

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def conn(**kwargs) -> Connection:  # type: ignore[no-untyped-def]
    extra = kwargs.pop("extra", None)
    return Connection(
        conn_id="a",
        conn_type="armada",
        extra=json.dumps(extra) if extra is not None else None,
        **kwargs,
    )


def test_host_and_port() -> None:
    assert config_from_connection(conn(host="armada.example")).address == "armada.example:50051"
    assert config_from_connection(conn(host="10.0.0.1", port=6000)).address == "10.0.0.1:6000"
    config = config_from_connection(conn())
    assert config.address == "localhost:50051" and not config.tls and config.token is None


def test_basic_and_bearer_authentication() -> None:
    basic = config_from_connection(conn(host="h", login="alice", password="s3cret"))
    assert (basic.username, basic.password, basic.token) == ("alice", "s3cret", None)
    bearer = config_from_connection(conn(host="h", extra={"token": "t0k"}))
    assert (bearer.token, bearer.username) == ("t0k", None)
    password_only = config_from_connection(conn(host="h", password="t1k"))
    assert password_only.token == "t1k"


def test_tls_certificates_and_channel_options(tmp_path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text(PEM)
    config = config_from_connection(
        conn(
            host="h",
            extra={
                "tls": "true",
                "ca_cert": str(ca),
                "client_cert": PEM,
                "client_key": PEM,
                "timeout": "12",
                "logs_address": "logs:1",
                "channel_options": '{"grpc.max_receive_message_length": 1024}',
            },
        )
    )
    assert config.tls and config.root_certificates == PEM.encode()
    assert config.certificate_chain == config.private_key == PEM.encode()
    assert config.timeout == 12.0 and config.logs_address == "logs:1"
    assert config.options == (("grpc.max_receive_message_length", 1024),)
    assert config_from_connection(conn(host="https://h", port=443)).tls


def test_connection_uri() -> None:
    uri = "armada://bob:pw@armada.internal:7000/?tls=true"
    config = config_from_connection(Connection.from_uri(uri, conn_id="u"))
    assert config.address == "armada.internal:7000" and config.tls
    assert (config.username, config.password) == ("bob", "pw")


def test_provider_info_matches_airflows_schema_and_hook() -> None:
    info = get_provider_info()
    schema = json.loads(files("airflow").joinpath("provider_info.schema.json").read_text())
    jsonschema.validate(info, schema)
    [conn_type] = info["connection-types"]
    assert conn_type["connection-type"] == ArmadaHook.conn_type == "armada"
    assert conn_type["hook-class-name"] == "airflow_armada.hooks.armada.ArmadaHook"
    assert {"tls", "token", "ca_cert", "channel_options", "job_url_template"} <= set(
        conn_type["conn-fields"]
    )


@pytest.mark.usefixtures("airflow_db", "armada")
def test_connection_test_button() -> None:
    assert ArmadaHook().test_connection() == (True, "Connection successfully tested")
    assert ArmadaHook("missing")  # constructing never connects


@pytest.mark.usefixtures("airflow_db")
def test_without_a_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default connection falls back to the client's defaults; any other id fails."""
    monkeypatch.delenv("AIRFLOW_CONN_ARMADA_DEFAULT", raising=False)
    for name in ("ARMADA_URL", "ARMADA_TLS", "ARMADA_CA_CERT", "ARMADA_TOKEN", "ARMADA_USERNAME"):
        monkeypatch.delenv(name, raising=False)
    config = ArmadaHook().get_connection_config()
    assert config.address == "localhost:50051" and not config.tls and config.token is None
    with pytest.raises(ConnectionNotDefined, match="airflow connections add armada_elsewhere "):
        ArmadaHook("armada_elsewhere").get_connection_config()
