"""`ArmadaCredentials`: where the Armada server is and how to authenticate to it.

Secrets are `SecretStr` so the Prefect UI and API never show them; the block turns into an
`armada_core.client.ConnectionConfig`, so every integration connects the same way.
"""

from __future__ import annotations

from typing import Any

from prefect.blocks.abstract import CredentialsBlock
from pydantic import Field, HttpUrl, SecretStr

from armada_core.client import ArmadaClient, AsyncArmadaClient, ConnectionConfig


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


class ArmadaCredentials(CredentialsBlock):
    """Connection settings for an Armada server (ours or upstream): address, TLS and one of
    bearer token or basic authentication.

    Example:
        ```python
        from prefect_armada import ArmadaCredentials

        ArmadaCredentials(address="armada.example.com:443", tls=True,
                          token="...").save("prod")
        with ArmadaCredentials.load("prod").get_client() as client:
            client.get_queues()
        ```
    """

    _block_type_name = "Armada Credentials"
    _block_type_slug = "armada-credentials"
    _description = "Address, TLS settings and credentials of an Armada server."
    _documentation_url = HttpUrl(
        "https://github.com/armada-py/armada-py/tree/main/integrations/prefect"
    )

    address: str = Field(default="localhost:50051", description="The gRPC address, host:port.")
    tls: bool = Field(default=False, description="Speak TLS to the server.")
    root_certificates: SecretStr | None = Field(
        default=None, description="PEM CA bundle to verify the server (implies TLS)."
    )
    private_key: SecretStr | None = Field(
        default=None, description="PEM client key, for mutual TLS."
    )
    certificate_chain: SecretStr | None = Field(
        default=None, description="PEM client certificate chain, for mutual TLS."
    )
    token: SecretStr | None = Field(
        default=None, description="Bearer token (static token or OpenID Connect JWT)."
    )
    username: str | None = Field(default=None, description="Basic authentication user.")
    password: SecretStr | None = Field(default=None, description="Basic authentication password.")
    logs_address: str | None = Field(
        default=None, description="Where binoculars (job logs) runs, if not at `address`."
    )
    timeout: float | None = Field(
        default=60.0, description="Deadline of unary calls in seconds (None: no deadline)."
    )
    job_url_template: str | None = Field(
        default=None,
        description="Link to a job in a web UI, e.g. 'https://lookout.example.com/"
        "?job_id={job_id}'; {job_id}, {queue} and {job_set_id} are filled in. "
        "When set, each run gets a link artifact per job.",
    )

    def connection_config(self) -> ConnectionConfig:
        """The same settings as armada_core's ConnectionConfig, secrets revealed."""

        def pem(value: SecretStr | None) -> bytes | None:
            text = _secret(value)
            return text.encode() if text else None

        return ConnectionConfig(
            address=self.address,
            tls=self.tls or self.root_certificates is not None,
            root_certificates=pem(self.root_certificates),
            private_key=pem(self.private_key),
            certificate_chain=pem(self.certificate_chain),
            token=_secret(self.token),
            username=self.username,
            password=_secret(self.password),
            logs_address=self.logs_address,
            timeout=self.timeout,
        )

    def get_client(self, *args: Any, **kwargs: Any) -> ArmadaClient:
        """A blocking client; use it as a context manager so the channel is closed."""
        return ArmadaClient(config=self.connection_config())

    def get_async_client(self) -> AsyncArmadaClient:
        """An asyncio client; create it inside the event loop that uses it."""
        return AsyncArmadaClient(config=self.connection_config())

    def job_url(self, queue: str, job_set_id: str, job_id: str) -> str | None:
        """The job's web UI link, if `job_url_template` is set."""
        if not self.job_url_template:
            return None
        return self.job_url_template.format(queue=queue, job_set_id=job_set_id, job_id=job_id)
