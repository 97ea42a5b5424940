"""The schemas report readers use (vendored in tests/fixtures/schemas/, see its SOURCES.md), for every test
that checks a SARIF or JUnit report."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
import xmlschema

SCHEMAS = Path(__file__).resolve().parent / "fixtures" / "schemas"


@functools.cache
def _sarif_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_text())
    return schema


def validate_sarif(doc: object) -> None:
    """Against the complete OASIS SARIF 2.1.0 schema, formats included (``uri``, ``uri-reference``)."""
    checker = jsonschema.FormatChecker()
    assert not checker.conforms("<stdin>", "uri-reference"), "no URI checker installed: the check would pass blind"
    jsonschema.validate(doc, _sarif_schema(), format_checker=checker)


@functools.cache
def junit_schema() -> xmlschema.XMLSchema:
    """The JUnit schema the Jenkins xUnit plugin validates reports with."""
    return xmlschema.XMLSchema(str(SCHEMAS / "junit-10.xsd"))
