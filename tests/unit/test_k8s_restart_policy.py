"""The SparkApplication's restart policy (issue 43): the Spark operator's v1beta2 schema
says which policies exist and that none has a rule per exit code, so the driver's exit 78
(a restart cannot fix it) or 2 (a bad setting) would be resubmitted under OnFailure like
any failure: the manifests say Never unless OnFailure is asked for."""

from __future__ import annotations

import json

from shared.app.loader import registered_apps
from shared.ops.k8s.render import DEFAULT_OUT
from shared.ops.k8s.settings import K8sSettings
from shared.ops.k8s.spark_app import spark_application
from shared.settings import from_env

FRAUD = registered_apps()["fraud"]
SCHEMA = json.loads((DEFAULT_OUT / "schemas" / "sparkapplication-v1beta2.json").read_text())


def test_the_operators_restart_policy_has_no_rule_per_exit_code():
    policy = SCHEMA["properties"]["spec"]["properties"]["restartPolicy"]["properties"]
    assert set(policy) == {"type", "onFailureRetries", "onFailureRetryInterval",
                           "onSubmissionFailureRetries", "onSubmissionFailureRetryInterval"}
    assert policy["type"]["enum"] == ["Never", "Always", "OnFailure"]


def test_a_failed_driver_is_not_resubmitted_by_default():
    manifest = spark_application(FRAUD, from_env(K8sSettings, {}))
    assert manifest["spec"]["restartPolicy"] == {"type": "Never"}


def test_on_failure_is_there_when_asked_for_with_its_limits():
    settings = from_env(K8sSettings, {"STATEWISE_K8S_RESTART_POLICY": "OnFailure",
                                      "STATEWISE_K8S_RESTART_RETRIES": "2"})
    policy = spark_application(FRAUD, settings)["spec"]["restartPolicy"]
    assert policy["type"] == "OnFailure" and policy["onFailureRetries"] == 2
