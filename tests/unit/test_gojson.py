"""``webhook.core.gojson``: Go's ``encoding/json`` Unmarshal into a struct, each expectation what Go 1.26's
``json.Unmarshal`` gave for the same text (checked with a small Go program): keys matched exactly or
case-insensitively (bytes.EqualFold), the last of two for one field winning, nested structs merged, null and
type errors as Go has them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.core.gojson import GoJSONError, Struct, TooDeep, field_for, past_max_depth, unmarshal

R = Struct({"cpuLimit": "string", "cpuRequest": "string"})
C = Struct({"cpuRequest": "string", "cpuLimit": "string", "enableModelcar": "bool", "uidModelcar": "*int",
            "resource": R, "rp": Struct(R.fields, pointer=True), "list": "[]string"}, pointer=True)


@pytest.mark.parametrize(("text", "expected"), [
    ('{"CPUREQUEST":"2"}', {"cpuRequest": "2"}),
    ('{"cpuRequest":"1","CpuRequest":"2"}', {"cpuRequest": "2"}),
    ('{"CpuRequest":"2","cpuRequest":"1"}', {"cpuRequest": "1"}),
    ('{"cpuRequeſt":"x"}', {"cpuRequest": "x"}),  # long s folds to s
    ('{"cpuLimit":"x","cpuLimıt":"y"}', {"cpuLimit": "x"}),  # dotless i does not fold to i
    ('{"ENABLEMODELCAR":true}', {"enableModelcar": True}),
    ('{"enableModelcar":true,"enableModelcar":null}', {"enableModelcar": True}),
    ('{"resource":{"cpuRequest":"1"},"Resource":{"cpuLimit":"2"}}', {"resource": {"cpuRequest": "1", "cpuLimit": "2"}}),
    ('{"rp":{"cpuRequest":"1"},"RP":{"cpuLimit":"2"}}', {"rp": {"cpuRequest": "1", "cpuLimit": "2"}}),
    ('{"rp":{"cpuRequest":"1"},"RP":null}', {}),
    ('{"cpuRequest":"1","cpuRequest":null}', {"cpuRequest": "1"}),
    ('{"list":["a"],"LIST":null}', {}),
    ('{"cpu_request":"1"}', {}),
    ("null", None),
])
def test_go_reads_these_keys_so(text: str, expected: dict[str, object] | None) -> None:
    assert unmarshal(text, C) == expected


@pytest.mark.parametrize("text", ['{"cpuRequest":1,"cpuLimit":"2"}', '{"uidModelcar":1.5}', '{"resource":"x"}',
                                  '{"resource":{"cpuRequest":5}}', "[1]", '"s"', '{"cpuRequest":"1"} x',
                                  '{"cpuRequest": NaN}', "{not json"])
def test_what_go_refuses_is_an_error(text: str) -> None:
    with pytest.raises(GoJSONError):
        unmarshal(text, C)


@given(st.sampled_from(["cpuRequest", "cpuLimit", "enableModelcar"]), st.lists(st.booleans(), min_size=1))
def test_any_casing_of_a_field_name_fills_it(name: str, upper: list[bool]) -> None:
    cased = "".join(c.upper() if upper[i % len(upper)] else c.lower() for i, c in enumerate(name))
    assert field_for(cased, C.fields) == name
    value = True if name == "enableModelcar" else "1"
    assert unmarshal(json.dumps({cased: value}), C) == {name: value}


def test_nesting_past_go_s_max_depth_is_go_s_syntax_error_and_below_it_not_known() -> None:
    """scanner.go maxNestingDepth 10000: Go refuses the 10001st level ("exceeded max depth"); Python's parser
    stops far sooner (a RecursionError, once let out of unmarshal), so a text Go reads is TooDeep: not known,
    never refused. Strings are not nesting. The twin: a shallow text is read."""
    loose = Struct({"x": "any"})
    with pytest.raises(GoJSONError, match="exceeded max depth"):
        unmarshal('{"x":' + "[" * 10000 + "]" * 10000 + "}", loose)  # the object is the first level
    with pytest.raises(GoJSONError, match="exceeded max depth"):
        unmarshal("[" * 200000, loose)  # unclosed: Go's scanner stops at the depth first
    with pytest.raises(TooDeep):
        unmarshal('{"x":' + "[" * 9999 + "]" * 9999 + "}", loose)
    with pytest.raises(TooDeep):
        unmarshal('{"x":' + "[" * 9999, loose)  # invalid for Go too, but Python cannot tell
    assert past_max_depth('"' + "[" * 20000 + '"') is None
    assert past_max_depth('["\\"' + "[" * 20000 + '"]') is None
    assert unmarshal('{"x":' + "[" * 20 + "]" * 20 + "}", loose) == {"x": json.loads("[" * 20 + "]" * 20)}
