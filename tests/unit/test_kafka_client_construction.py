"""Only shared/kafka/kafka_clients.py makes Kafka clients, read from the source: no other module
of shared/ or apps/ constructs a confluent-kafka client (however it imported the class) or
spells a client configuration's ``bootstrap.servers`` (a hand-built configuration, or
Spark options, would leave the security settings out). Nor does one hand the factory
bare ``settings.bootstrap_servers`` where it could hand it the settings: that is how
``run``, ``topics``, ``control`` and ``demo`` made admin clients without the security
settings (issue 12). Only the local broker, plain text, is named by its servers alone."""

from __future__ import annotations

import ast
from pathlib import Path

from shared.cli.new_app import create_app
from shared.settings import REPO_ROOT

FACTORY = REPO_ROOT / "shared" / "kafka" / "kafka_clients.py"
CLIENT_CLASSES = {"AdminClient", "Producer", "Consumer", "SerializingProducer",
                  "DeserializingConsumer"}
CONNECTION_KEYS = {"bootstrap.servers", "kafka.bootstrap.servers"}
# Functions that take where Kafka is (a connection, settings or bare servers) first.
TAKES_KAFKA = {"connection", "admin_client", "admin_config", "producer", "producer_config",
               "tuned_producer", "tuned_producer_config", "transactional_producer",
               "transactional_producer_config", "consumer", "consumer_config",
               "spark_options", "require_broker", "read_all", "read_finished",
               "send_values", "send_json"}
LOCAL_BROKER = REPO_ROOT / "shared" / "ops" / "broker.py"


def client_constructions(source: str) -> list[str]:
    """Calls that construct a confluent-kafka client, and configuration keys spelled out,
    each as ``line: what``."""
    tree = ast.parse(source)
    classes: dict[str, str] = {}  # local name -> client class
    modules: set[str] = set()  # local names of confluent_kafka and its submodules
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "confluent_kafka"):
            for alias in node.names:
                if alias.name in CLIENT_CLASSES:
                    classes[alias.asname or alias.name] = alias.name
                else:  # from confluent_kafka import admin
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("confluent_kafka"):
                    modules.add(alias.asname or alias.name.split(".")[0])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in classes:
                found.append(f"{node.lineno}: {classes[func.id]}(...)")
            elif isinstance(func, ast.Attribute) and func.attr in CLIENT_CLASSES and \
                    _root(func) in modules:
                found.append(f"{node.lineno}: {func.attr}(...)")
        elif isinstance(node, ast.Constant) and node.value in CONNECTION_KEYS:
            found.append(f"{node.lineno}: {node.value!r}")
    return found


def servers_alone(source: str) -> list[str]:
    """Calls that hand a function taking Kafka's whereabouts ``x.bootstrap_servers``, or a
    name the module bound to one (``bootstrap = settings.bootstrap_servers``)."""
    tree = ast.parse(source)
    bound = _names_bound_to_servers(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.id if isinstance(func, ast.Name) else \
                func.attr if isinstance(func, ast.Attribute) else None
            first = node.args[0]
            if name in TAKES_KAFKA and (_is_servers(first) or
                                        isinstance(first, ast.Name) and first.id in bound):
                found.append(f"{node.lineno}: {name}(....bootstrap_servers)")
    return found


def _is_servers(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "bootstrap_servers"


def _names_bound_to_servers(tree: ast.AST) -> set[str]:
    """Names assigned ``x.bootstrap_servers``, alone or in a tuple assignment."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = zip(target.elts, node.value.elts, strict=False) \
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) \
                    else [(target, node.value)]
                bound |= {t.id for t, v in pairs if isinstance(t, ast.Name) and _is_servers(v)}
    return bound


def _root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def checked_modules() -> list[Path]:
    return [path for folder in ("shared", "apps")
            for path in sorted((REPO_ROOT / folder).rglob("*.py")) if path != FACTORY]


def test_the_check_sees_every_way_of_making_a_client():
    assert client_constructions("from confluent_kafka import Producer\nProducer({})") == \
        ["2: Producer(...)"]
    assert client_constructions(
        "from confluent_kafka.admin import AdminClient as A\nA(config)") == \
        ["2: AdminClient(...)"]
    assert client_constructions("import confluent_kafka\nconfluent_kafka.Consumer({})") == \
        ["2: Consumer(...)"]
    assert client_constructions("import confluent_kafka.admin as ka\nka.AdminClient({})") == \
        ["2: AdminClient(...)"]
    assert client_constructions("from confluent_kafka import admin\nadmin.AdminClient({})") \
        == ["2: AdminClient(...)"]
    assert client_constructions('reader.option("kafka.bootstrap.servers", servers)') == \
        ["1: 'kafka.bootstrap.servers'"]
    assert client_constructions('config = {"bootstrap.servers": servers}') == \
        ["1: 'bootstrap.servers'"]
    # Types in annotations, the factory's own functions and prose are not constructions.
    assert client_constructions(
        "from confluent_kafka import Producer\n"
        "from shared.kafka.kafka_clients import producer\n"
        "def send(p: Producer) -> None:\n"
        "    '''Sends with a producer (bootstrap.servers from the settings).'''\n"
        "    producer(settings)\n") == []


def test_only_the_factory_makes_kafka_clients():
    modules = checked_modules()
    assert len(modules) > 60 and FACTORY.exists()  # the whole tree, not an empty glob
    found = {str(path.relative_to(REPO_ROOT)): hits for path in modules
             if (hits := client_constructions(path.read_text()))}
    assert found == {}, "build Kafka clients with shared/kafka/kafka_clients.py"


def test_the_check_sees_servers_handed_over_without_their_security_settings():
    assert servers_alone("provision(admin_client(settings.bootstrap_servers), specs)") == \
        ["1: admin_client(....bootstrap_servers)"]
    assert servers_alone("kafka_clients.consumer(self.settings.bootstrap_servers)") == \
        ["1: consumer(....bootstrap_servers)"]
    assert servers_alone("bootstrap, prefix = settings.bootstrap_servers, settings.topic_prefix"
                         "\nread_finished(bootstrap, topic)") == \
        ["2: read_finished(....bootstrap_servers)"]
    assert servers_alone("admin_client(settings)\nread_all(settings, topic)") == []


def test_settings_reach_the_factory_whole():
    found = {str(path.relative_to(REPO_ROOT)): hits for path in checked_modules()
             if path != LOCAL_BROKER and (hits := servers_alone(path.read_text()))}
    assert found == {}, "hand the factory the settings (their security settings with them)"


def test_a_generated_app_and_its_tests_take_their_clients_from_the_settings(tmp_path):
    """The app template (shared/templates/app/), as ``statewise new`` writes it: its
    package and its broker test make no client and hand the Kafka helpers the settings."""
    written = [path for path in create_app("payments", tmp_path, taken=set())
               if path.suffix == ".py"]
    assert len(written) > 8  # the package and its tests, not an empty template folder
    found = {str(path.relative_to(tmp_path)): hits for path in written
             if (hits := client_constructions(path.read_text()) +
                 servers_alone(path.read_text()))}
    assert found == {}, "the template builds clients as shared/ does: from the settings"
