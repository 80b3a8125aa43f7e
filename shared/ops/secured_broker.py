"""The local broker with a listener that asks for SASL (SCRAM-SHA-512) over TLS, a test CA
made when it is first started, SCRAM users created with its storage, and every request
authorized by ACLs (KRaft's StandardAuthorizer).

    statewise broker up --secured     (var/kafka-secured; SASL_SSL on 127.0.0.1:9192)

Users: ``statewise-admin`` (a super user: provisions topics, grants ACLs) and
``statewise-app`` (what ACLs grant it: ``statewise acls APP --principal
User:statewise-app``), each with a random password kept owner-only in
``credentials/<user>``. The broker's certificate, signed by the CA, names 127.0.0.1: both
client families verify the host. The plain listener (loopback) and the controller's
authenticate no one (User:ANONYMOUS) and serve the broker's own readiness probe: a
super user, so that probe works; on a shared machine, anyone on loopback could use it.
"""

from __future__ import annotations

import dataclasses
import secrets
import subprocess
from pathlib import Path

from shared.ops.broker import BrokerConfig, BrokerError, LocalBroker, new_cluster_id
from shared.settings import HOME

MECHANISM = "SCRAM-SHA-512"
ADMIN_USER, APP_USER = "statewise-admin", "statewise-app"
DEFAULT_SECURED_HOME = HOME / "var" / "kafka-secured"


@dataclasses.dataclass(frozen=True)
class SecuredBrokerConfig(BrokerConfig):
    """A :class:`BrokerConfig` with a SASL_SSL listener on ``sasl_port``; ``users``: the
    SCRAM users (name, password) made with the storage; ``super_users``: their names that
    ACLs do not bind."""

    sasl_port: int = 0
    users: tuple[tuple[str, str], ...] = ()
    super_users: tuple[str, ...] = ()

    @property
    def sasl_bootstrap_servers(self) -> str:
        return f"{self.host}:{self.sasl_port}"

    @property
    def ca_file(self) -> Path:
        return self.home / "tls" / "ca.pem"

    def server_properties(self) -> str:
        lines = dict(line.split("=", 1) for line in super().server_properties().splitlines())
        sasl = f"SASL_SSL://{self.host}:{self.sasl_port}"
        lines["listeners"] += f",{sasl}"
        lines["advertised.listeners"] += f",{sasl}"
        lines["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL"
        lines["sasl.enabled.mechanisms"] = MECHANISM
        lines[f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config"] = \
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        lines["authorizer.class.name"] = \
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        lines["super.users"] = ";".join(["User:ANONYMOUS",
                                         *(f"User:{name}" for name in self.super_users)])
        lines["listener.name.sasl_ssl.ssl.keystore.type"] = "PEM"
        lines["listener.name.sasl_ssl.ssl.keystore.location"] = str(
            self.home / "tls" / "broker-keystore.pem")
        return "".join(f"{k}={v}\n" for k, v in lines.items())


def make_test_ca(folder: Path, host: str) -> None:
    """A CA and a broker certificate it signs for ``host`` (openssl), valid 30 days; the
    broker's key and chain in one PEM file, Kafka's PEM keystore. Keys owner-only."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "30", "-subj", "/CN=statewise-test-ca")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key",
            "-out", "broker.csr", "-subj", f"/CN={host}")
    (folder / "san.ext").write_text(f"subjectAltName=IP:{host},DNS:localhost\n")
    openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "broker.pem", "-days", "30", "-extfile", "san.ext")
    (folder / "broker-keystore.pem").write_text(
        (folder / "broker.key").read_text() + (folder / "broker.pem").read_text()
        + (folder / "ca.pem").read_text())


class SecuredBroker(LocalBroker):
    """A :class:`LocalBroker` whose storage is formatted with SCRAM users, and which
    makes its test CA on its first start."""

    config: SecuredBrokerConfig

    def launch(self):
        if not self.config.ca_file.exists():
            make_test_ca(self.config.ca_file.parent, self.config.host)
        return super().launch()

    def _format_storage(self, properties: Path) -> None:
        if (self.home / "data" / "meta.properties").exists():
            return  # formatted before: its users are in its metadata
        scram = [arg for name, password in self.config.users
                 for arg in ("--add-scram", f"{MECHANISM}=[name={name},password={password}]")]
        result = subprocess.run(
            [*self._java(), "kafka.tools.StorageTool", "format",
             f"--cluster-id={self.config.cluster_id or new_cluster_id()}",
             "-c", str(properties), *scram],
            capture_output=True, text=True, check=False)
        if result.returncode != 0:
            # The tool echoes its arguments on some errors: never the passwords.
            output = result.stdout + result.stderr
            for _, password in self.config.users:
                output = output.replace(password, "***")
            raise BrokerError(f"formatting storage failed: {output}")


def local_secured_broker(home: Path = DEFAULT_SECURED_HOME, port: int = 9190,
                         controller_port: int = 9191, sasl_port: int = 9192) -> SecuredBroker:
    """``statewise broker up --secured``'s broker: its users' passwords made once and kept
    in ``<home>/credentials/<user>`` (owner-only)."""
    users = tuple((name, _password(home / "credentials" / name))
                  for name in (ADMIN_USER, APP_USER))
    return SecuredBroker(SecuredBrokerConfig(
        home=home, port=port, controller_port=controller_port, sasl_port=sasl_port,
        users=users, super_users=(ADMIN_USER,)))


def _password(path: Path) -> str:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(0o700)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(24))
    return path.read_text().strip()
