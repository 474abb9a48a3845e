"""Provider metadata for Airflow's providers manager (entry point `apache_airflow_provider`).

The connection form is declared here (``conn-fields``) rather than with Flask widgets, so the
Airflow 3 UI can render it without importing the hook.
"""

from __future__ import annotations

from typing import Any

from airflow_armada import __version__


def get_provider_info() -> dict[str, Any]:
    """What Airflow needs to list the provider, its hook, connection type, trigger and link."""
    return {
        "package-name": "airflow-armada",
        "name": "Armada",
        "description": "Run Airflow tasks as Armada jobs and gangs.",
        "versions": [__version__],
        "integrations": [{"integration-name": "Armada", "tags": ["software"]}],
        "operators": [
            {"integration-name": "Armada", "python-modules": ["airflow_armada.operators.armada"]}
        ],
        "hooks": [
            {"integration-name": "Armada", "python-modules": ["airflow_armada.hooks.armada"]}
        ],
        "triggers": [
            {"integration-name": "Armada", "python-modules": ["airflow_armada.triggers.armada"]}
        ],
        "extra-links": ["airflow_armada.links.armada.ArmadaJobLink"],
        "connection-types": [
            {
                "connection-type": "armada",
                "hook-class-name": "airflow_armada.hooks.armada.ArmadaHook",
                "hook-name": "Armada",
                "conn-fields": {
                    "tls": {
                        "label": "Use TLS",
                        "schema": {"type": ["boolean", "null"], "default": False},
                    },
                    "token": {
                        "label": "Bearer token",
                        "schema": {"type": ["string", "null"], "format": "password"},
                        "description": "Sent as 'authorization: Bearer ...'; leave Login "
                        "and Password empty when set.",
                    },
                    "ca_cert": {
                        "label": "CA certificate (PEM text or file path)",
                        "schema": {"type": ["string", "null"]},
                    },
                    "client_cert": {
                        "label": "Client certificate (PEM text or file path)",
                        "schema": {"type": ["string", "null"]},
                    },
                    "client_key": {
                        "label": "Client key (PEM text or file path)",
                        "schema": {"type": ["string", "null"], "format": "password"},
                    },
                    "timeout": {
                        "label": "Call timeout (seconds)",
                        "schema": {"type": ["number", "null"], "default": 60},
                    },
                    "logs_address": {
                        "label": "Logs (binoculars) address host:port",
                        "schema": {"type": ["string", "null"]},
                    },
                    "job_url_template": {
                        "label": "Job link URL template",
                        "schema": {
                            "type": ["string", "null"],
                            "default": "http://localhost:8080/jobs/{job_id}",
                        },
                        "description": "Placeholders: {job_id}, {queue}, {job_set_id}.",
                    },
                    "channel_options": {
                        "label": "gRPC channel options (JSON object)",
                        "schema": {"type": ["string", "null"]},
                        "description": 'e.g. {"grpc.max_receive_message_length": 67108864}',
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["schema"],
                    "relabeling": {
                        "host": "Armada server host",
                        "login": "Username (basic auth)",
                        "password": "Password (basic auth)",
                    },
                    "placeholders": {"host": "localhost", "port": "50051"},
                },
            }
        ],
    }
