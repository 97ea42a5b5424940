"""Configuration: defaults, every key, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.core.config import Config, ConfigError, NumaPolicy, parse_config
from webhook.manifests.configfile import load_config


def test_full_config(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("""
policy:
  fractionalCPUContainers: [istio-proxy]
  podLevelResources: allow
  smtAlignment: 2
  numa: {scope: pod, cpus: 32, memory: 240Gi, devices: {nvidia.com/gpu: 4}}
mutation: {setLimitsFromRequests: false, cpuRounding: up}
exemptions: {namespaces: [ops], usernames: ["system:admin"], runtimeClassNames: [kata]}
""")
    cfg = load_config(path)
    assert cfg.policy.fractional_cpu_containers == {"istio-proxy"}
    assert cfg.policy.smt_alignment == 2
    assert isinstance(cfg.policy.numa, NumaPolicy) and cfg.policy.numa.cpus == 32_000
    assert cfg.policy.numa.devices == {"nvidia.com/gpu": 4000}
    assert cfg.mutation.cpu_rounding == "up" and not cfg.mutation.set_limits_from_requests
    assert cfg.exemptions.runtime_class_names == {"kata"}


def test_empty_file_is_defaults(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("")
    assert load_config(path) == Config()
    assert load_config(None) == Config()


@pytest.mark.parametrize(("raw", "key"), [
    ({"polcy": {}}, "polcy"),
    ({"policy": {"smtAlignment": 0}}, "policy.smtAlignment"),
    ({"policy": {"smtAlignment": True}}, "policy.smtAlignment"),
    ({"policy": {"podLevelResources": "maybe"}}, "policy.podLevelResources"),
    ({"policy": {"fractionalCPUContainers": "istio-proxy"}}, "policy.fractionalCPUContainers"),
    ({"policy": {"numa": {"scope": "socket", "cpus": 4}}}, "policy.numa.scope"),
    ({"policy": {"numa": {"cpus": "lots"}}}, "policy.numa.cpus"),
    ({"policy": {"numa": {"cpus": 4, "gpus": 1}}}, "policy.numa.gpus"),
    ({"policy": {"numa": {}}}, "policy.numa"),
    ({"mutation": {"cpuRounding": "down"}}, "mutation.cpuRounding"),
    ({"mutation": {"setLimitsFromRequests": "yes"}}, "mutation.setLimitsFromRequests"),
    ({"exemptions": {"users": []}}, "exemptions.users"),
    ({"exemptions": {"namespaces": [1]}}, "exemptions.namespaces"),
    (["policy"], "configuration"),
])
def test_bad_values_name_the_key(raw: object, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert str(err.value).startswith(key)


def test_unreadable_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("policy: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_one_schema_covers_every_field_and_default() -> None:
    """SCHEMA is the one place of keys and defaults: every field of the configuration records is one of its
    keys, its document of defaults parses to the defaults, and the policies' parameters are its keys."""
    from dataclasses import fields

    from webhook.core.config import SCHEMA, Exemptions, MutationPolicy, NumaPolicy, Policy
    from webhook.core.settings import Section, snake

    for key, record in (("policy", Policy), ("mutation", MutationPolicy), ("exemptions", Exemptions),
                        ("policy.numa", NumaPolicy)):
        section = SCHEMA.find(key)
        assert isinstance(section, Section)
        assert [f.name for f in fields(record)] == [snake(c.name) for c in section.children], key
    assert parse_config(SCHEMA.document()) == Config()
    params = SCHEMA.params(Config())
    assert set(params) == {k for k, s in SCHEMA.settings() if s.param}
    assert not any(k.startswith("policy.numa") for k in params)


def test_the_chart_and_doc_forms_of_the_schema_live_outside_the_core() -> None:
    """The core reads and checks a configuration; its Helm, JSON Schema and Markdown forms are output formats
    (webhook.policies.schema). The JSON Schema accepts the document of defaults and refuses what parse refuses."""
    import jsonschema

    from webhook.core import settings
    from webhook.core.config import SCHEMA
    from webhook.policies import schema

    for kind in (settings.Kind, settings.Names, settings.Flag, settings.Count, settings.Section):
        assert not {"helm", "json_schema", "described", "rows"} & set(vars(kind)), kind
    validator = jsonschema.Draft7Validator(schema.json_schema(SCHEMA))
    assert not list(validator.iter_errors(SCHEMA.document()))
    assert list(validator.iter_errors({"policy": {"smtAlignment": 0}}))
    with pytest.raises(ConfigError):
        parse_config({"policy": {"smtAlignment": 0}})
    shown = {key: values for key, values, _, _ in schema.rows(SCHEMA)}
    assert shown["policy.smtAlignment"] == "whole number >= 1"


def test_the_config_file_is_read_as_manifests_are(tmp_path: Path) -> None:
    """--config was read with PyYAML while manifests get kubectl's go-yaml v2 reading: ``n`` is false to go-yaml
    v2 (and so in a manifest) but the string "n" to PyYAML, which refused it as not true or false."""
    path = tmp_path / "config.yaml"
    path.write_text("mutation:\n  setLimitsFromRequests: n\npolicy:\n  smtAlignment: 2\n  smtAlignment: 4\n")
    config = load_config(path)
    assert config.mutation.set_limits_from_requests is False
    assert config.policy.smt_alignment == 4  # a repeated key: the last value, as go-yaml v2 (not strict) keeps


def test_a_config_file_of_two_documents_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("policy: {smtAlignment: 2}\n---\npolicy: {smtAlignment: 4}\n")
    with pytest.raises(ConfigError, match="2 YAML documents; a configuration file holds one"):
        load_config(path)
