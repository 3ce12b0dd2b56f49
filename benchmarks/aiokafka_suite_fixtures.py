"""Fixtures that point aiokafka's own functional tests at a slog broker instead of
its Docker image (``aiokafka_suite.py`` imports this module at the end of the
suite's conftest, so these replace the Docker ones). What the image sets up, slog
is given the same way:

* one broker, id 0, ``num.partitions=2``, topics auto-created;
* four listeners: PLAINTEXT, SSL (client certificates required), SASL_PLAINTEXT
  and SASL_SSL, with PLAIN and SCRAM users admin/admin, test/test, test2/test2;
* the ACL authorizer with ``allow.everyone.if.no.acl.found=true`` and admin a super
  user; the suite's ACL and SCRAM helpers run ``slog acl`` and ``slog user``
  instead of kafka-acls.sh and kafka-configs.sh in the container;
* certificates made with openssl as the suite's gen-ssl-certs.sh makes them
  (ca.crt, client.crt, client.key encrypted with the suite's password).

Kerberos (GSSAPI) has no counterpart: those tests are skipped.
"""
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import pytest

SSL_PASSWORD = "abcdefgh"  # the suite's
USERS = {"admin": "admin", "test": "test", "test2": "test2"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _slog(*args, stdin=None, env=None):
    done = subprocess.run([sys.executable, "-m", "slog.cli", *args], input=stdin,
                          capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"slog {' '.join(args)}: {done.stdout}{done.stderr}")
    return done.stdout


@dataclass
class KafkaServer:
    host: str
    port: int
    ssl_port: int
    sasl_plain_port: int
    sasl_ssl_port: int
    container: object
    data_dir: pathlib.Path = None

    @property
    def hosts(self):
        return [f"{self.host}:{self.port}"]


class SlogACLManager:
    """The suite's ACLManager, over ``slog acl`` as the super user admin."""

    def __init__(self, server):
        self._server = server
        self._active_acls = []

    def _exec(self, *args):
        env = {**os.environ, "SLOG_SASL_MECHANISM": "PLAIN", "SLOG_SASL_USERNAME": "admin",
               "SLOG_SASL_PASSWORD": USERS["admin"]}
        return _slog("acl", *args, "-b", f"127.0.0.1:{self._server.sasl_plain_port}", env=env)

    def add_acl(self, **acl_params):
        self._exec("add", *self._format_params(**acl_params))
        self._active_acls.append(acl_params)

    def remove_acl(self, **acl_params):
        self._exec("remove", *self._format_params(**acl_params))
        self._active_acls.remove(acl_params)

    def list_acl(self, principal=None):
        return self._exec("list", *(("--principal", f"User:{principal}") if principal else ()))

    @staticmethod
    def _format_params(cluster=None, topic=None, group=None, transactional_id=None,
                       allow_principal=None, deny_principal=None, allow_host=None,
                       deny_host=None, operation=None, producer=None, consumer=None):
        options = []
        if cluster:
            options.append("--cluster")
        for flag, value in (("--topic", topic), ("--group", group),
                            ("--transactional-id", transactional_id)):
            if value is not None:
                options += [flag, value]
        if allow_principal is not None:
            options += ["--allow-principal", f"User:{allow_principal}"]
        if deny_principal is not None:
            options += ["--deny-principal", f"User:{deny_principal}"]
        host = allow_host if allow_host is not None else deny_host
        if host is not None:
            options += ["--host", host]
        if operation is not None:  # kafka-acls' names: All, DESCRIBE, IdempotentWrite
            name = operation.lower() if operation.isupper() else \
                re.sub(r"(?<!^)(?=[A-Z])", "-", operation).lower()
            options += ["--operation", name]
        if producer:
            options.append("--producer")
        if consumer:
            options.append("--consumer")
        return options

    def cleanup(self):
        for acl_params in self._active_acls[:]:
            self.remove_acl(**acl_params)


class SlogKafkaConfig:
    def __init__(self, server):
        self._server = server

    def add_scram_user(self, username, password):
        _slog("user", "add", username, "--password-stdin", "--data-dir",
              str(self._server.data_dir), stdin=password + "\n")


class _Unsupported:
    def __init__(self, what):
        self._what = what

    def __getattr__(self, name):
        def skip(*args, **kwargs):
            pytest.skip(f"{self._what}.{name}: slog has no Kerberos (GSSAPI)")
        return skip


def _make_certs(folder: pathlib.Path) -> None:
    """CA, server and client certificates, as the suite's gen-ssl-certs.sh."""
    folder.mkdir(parents=True, exist_ok=True)

    def ssl(*args):
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "30", "-subj", "/CN=CA")
    for name in ("server", "client"):
        ssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.plain.key",
            "-out", f"{name}.csr", "-subj", f"/CN={'localhost' if name == 'server' else name}",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1")
        ssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "30", "-copy_extensions", "copy")
    (folder / "server.pem").write_text((folder / "server.plain.key").read_text()
                                       + (folder / "server.crt").read_text())
    ssl("pkey", "-in", "client.plain.key", "-out", "client.key", "-aes256", "-passout",
        f"pass:{SSL_PASSWORD}")


@pytest.fixture(scope="session")
def docker(request):
    yield None


@pytest.fixture(scope="session")
def kafka_image(request):
    return request.config.getoption("--docker-image")


@pytest.fixture(scope="session")
def ssl_folder():
    folder = pathlib.Path("tests/ssl_cert")
    if not (folder / "client.key").exists():
        _make_certs(folder)
    return folder


@pytest.fixture(scope="class")
def acl_manager(kafka_server):
    return SlogACLManager(kafka_server)


@pytest.fixture(scope="class")
def kafka_config(kafka_server):
    return SlogKafkaConfig(kafka_server)


@pytest.fixture(scope="class")
def kerberos_utils(kafka_server):
    return _Unsupported("kerberos_utils")


@pytest.fixture(scope="session")
def kafka_server(kafka_image, ssl_folder):
    root = pathlib.Path(tempfile.mkdtemp(prefix="slog-aiokafka-"))
    ports = {p: _free_port() for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    for user, password in USERS.items():
        _slog("user", "add", user, "--password-stdin", "--data-dir", str(root),
              stdin=password + "\n")
    certs = ssl_folder.resolve()
    overrides = {
        "num.partitions": "2",
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "ssl.keystore.location": str(certs / "server.pem"),
        "ssl.truststore.location": str(certs / "ca.crt"),
        "ssl.client.auth": "required",
        "ssl.endpoint.identification.algorithm": "",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "authorizer.class.name": "slog",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "true",
    }
    overrides.update(kv.split("=", 1) for kv in os.environ.get("SLOG_OVERRIDES", "").split(",")
                     if kv)
    _slog("broker", "start", "--id", "0", "--data-dir", str(root), "--listen",
          f"127.0.0.1:{ports['PLAINTEXT']}",
          *(a for k, v in overrides.items() for a in ("-c", f"{k}={v}")))
    try:
        yield KafkaServer("127.0.0.1", ports["PLAINTEXT"], ports["SSL"],
                          ports["SASL_PLAINTEXT"], ports["SASL_SSL"], None, root)
    finally:
        _slog("broker", "stop", "--id", "0", "--data-dir", str(root))
        if os.environ.get("SLOG_KEEP"):
            print(f"slog data dir kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
