"""Files are read as ``kubectl apply -f`` reads them (docs/contract.md#commands-and-exit-codes): apimachinery's stream
splitting, go-yaml v2's scalar resolution (``resolve.go``), sigs.k8s.io/yaml's JSON conversion. One example
per corner, each citing the upstream rule; hypothesis for the open-ended parts."""

from __future__ import annotations

import json
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.manifests.documents import Document, ReadError, read_text_documents
from webhook.manifests.goyaml import resolve_plain


def read(text: str) -> list[Any]:
    """Each document's value, or ``("error", line, message)``."""
    return [d.obj if isinstance(d, Document) else ("error", d.line, d.message) for d in read_text_documents("f", text)]


def value(scalar: str) -> Any:
    (doc,) = read(f"v: {scalar}\n")
    assert isinstance(doc, dict), doc
    return doc["v"]


@pytest.mark.parametrize(("scalar", "expected"), [
    ("1:00", "1:00"),  # no YAML 1.1 base-60 (resolve.go: "Base 60 floats ... purposefully unsupported")
    ("190:20:30", "190:20:30"),
    ("0o10", 8),  # strconv.ParseInt(s, 0, 64)
    ("010", 8),  # a leading 0 is octal for Go
    ("08", 8),  # not octal: falls through to ParseFloat, 8.0, which JSON writes as 8
    ("0x1F", 31),
    ("0b101", 5),
    ("-0x10", -16),
    ("+1", 1),
    ("1_000", 1000),  # underscores are removed before parsing
    ("9223372036854775807", 9223372036854775807),
    ("18446744073709551615", 18446744073709551615),  # uint64
    ("18446744073709551616", 18446744073709551616),  # a float64, written by encoding/json as an integer
    ("1e3", 1000),
    ("1.0", 1),  # float64(1) is written "1"
    ("1.5", 1.5),
    (".5", 0.5),
    ("1e21", 1e21),
    ("1e400", "1e400"),  # ParseFloat's range error: a string
    ("y", True), ("Yes", True), ("ON", True), ("true", True), ("True", True),
    ("n", False), ("NO", False), ("off", False), ("FALSE", False),
    ("tRUE", "tRUE"),  # only the spellings go-yaml lists
    ("~", None), ("null", None), ("Null", None), ("NULL", None), ("", None),
    ("nULL", "nULL"),
    ("2001-12-14", "2001-12-14"),  # timestamps decoded into interface{} stay strings
    ("2001-12-14T21:59:43.10-05:00", "2001-12-14T21:59:43.10-05:00"),
    ("100m", "100m"), ("1Gi", "1Gi"), ("1e3Mi", "1e3Mi"),
    ("+", "+"), (".", "."), ("+.", "+."), ("-a", "-a"),
    ('"1:00"', "1:00"), ("'010'", "010"), ('"yes"', "yes"),
    ("!!str 010", "010"), ('!!int "3"', 3), ("!!float 1", 1), ("!!bool yes", True), ("!foo 12", "12"),
    ("!!binary aGVsbG8=", "hello"),
])
def test_scalars_resolve_as_go_yaml_v2(scalar: str, expected: Any) -> None:
    got = value(scalar)
    assert got == expected and type(got) is type(expected), (scalar, got)


@pytest.mark.parametrize(("scalar", "message", "line"), [
    (".inf", "json: unsupported value: +Inf", 1),  # encoding/json cannot write it (no line: the document's)
    ("-.Inf", "json: unsupported value: -Inf", 1),
    (".nan", "json: unsupported value: NaN", 1),
    ("!!int 1.5", "cannot decode !!float `1.5` as a !!int", 2),
    ("!!binary +", "!!binary value contains invalid base64 data", 2),
])
def test_scalars_go_yaml_refuses(scalar: str, message: str, line: int) -> None:
    assert read(f"a: 1\nv: {scalar}\n") == [("error", line, f"YAML cannot be decoded: {message}")]


def test_repeated_key_keeps_its_last_value_and_points_there() -> None:
    """go-yaml v2 without strict mode: ``setMapIndex`` overwrites."""
    text = "kind: Pod\nmetadata:\n  name: first\n  name: second\n"
    (doc,) = read_text_documents("f", text)
    assert isinstance(doc, Document)
    assert doc.obj["metadata"] == {"name": "second"}
    assert doc.line_of(("metadata", "name")) == 4


def test_keys_become_strings_as_sigs_yaml_writes_them() -> None:
    assert read("1: a\n1.5: b\ntrue: c\nyes: d\n0x10: e\n1e20: f\n") == [
        {"1": "a", "1.5": "b", "true": "d", "16": "e", "1e+20": "f"}]
    assert read("~: a\n") == [("error", 1, "YAML cannot be decoded: unsupported map key of type: <nil> (a null key)")]
    assert read("? [a]\n: b\n")[0][0] == "error"


def test_merge_applies_where_it_stands() -> None:
    """go-yaml v2 ``d.merge`` writes into the map in order: a key before ``<<`` is overwritten by it, a key
    after it wins; a list of maps merges last to first, so the first map wins."""
    text = "b: &b {p: 1, q: 1}\nc: &c {p: 2, r: 2}\nm:\n  p: 0\n  <<: [*b, *c]\n  r: 3\n"
    assert read(text)[0]["m"] == {"p": 1, "q": 1, "r": 3}
    assert read("m:\n  <<: [1]\n")[0][0] == "error"


def test_separator_lines() -> None:
    """apimachinery ``YAMLReader``: a line starting with ``---`` ends a document; only a comment may follow."""
    assert read("a: 1\n---\nb: 2\n--- # note\nc: 3\n---\n---\n") == [{"a": 1}, {"b": 2}, {"c": 3}]
    # content on a --- line is an error, and the document before it is never decoded (kubectl drops it)
    assert read("a: 1\n---\nb: 2\n--- c: 3\n") == [
        {"a": 1}, ("error", 4, "invalid YAML document separator: 'c: 3' (only a comment may follow ---)")]
    assert read("---- \na: 1\n") == [
        ("error", 1, "invalid YAML document separator: '-' (only a comment may follow ---)")]
    assert read("--- |\n  text\n")[0][0] == "error"
    assert read("a: 1\n...\nb: 2\n") == [{"a": 1}]  # go-yaml reads the first document of a piece


def test_line_numbers_count_from_the_file() -> None:
    text = "# c\n---\nkind: Pod\nmetadata:\n  name: a\n---\n\n\nkind: Pod\nmetadata:\n  name: b\n"
    docs = [d for d in read_text_documents("f", text) if isinstance(d, Document)]
    assert [d.line for d in docs] == [3, 9]
    assert [d.line_of(("metadata", "name")) for d in docs] == [5, 11]


def test_json_streams() -> None:
    """``YAMLOrJSONDecoder``: a stream starting with ``{`` is JSON values one after another."""
    text = '{"kind": "Pod", "metadata": {"name": "a"}}\n{"kind": "Pod",\n "metadata": {"name": "b"}}{"x": 1}'
    docs = [d for d in read_text_documents("f", text) if isinstance(d, Document)]
    assert [d.obj.get("metadata", {}).get("name") for d in docs] == ["a", "b", None]
    assert [d.line for d in docs] == [1, 2, 3]
    assert docs[1].line_of(("metadata", "name")) == 3
    # a JSON value that is not an object is an error (kubectl finds no apiVersion/kind), the rest is read
    assert read('{"a": 1} [1, 2] {"b": 2}') == [{"a": 1}, ("error", 1, "document is a list, not an object"), {"b": 2}]
    # one JSON object and then YAML: kubectl goes on as YAML when at most one value was read
    assert read('{"a": 1}\n---\nb: 2\n') == [{"a": 1}, {"b": 2}]
    # after two values, a syntax error ends the stream
    assert read('{"a": 1}{"b": 2}\nc: 3\n')[2][0] == "error"
    # a YAML flow mapping is not JSON: read as YAML
    assert read("{a: 1, b: 1:00}\n") == [{"a": 1, "b": "1:00"}]
    # neither JSON nor YAML: the JSON error is reported
    assert read('{"a": 1,,}')[0][2].startswith("JSON does not parse")
    assert read('{"a": NaN}')[0][0] == "error"  # encoding/json has no NaN


def test_top_level_list_or_scalar_is_an_error() -> None:
    """As kubectl: a top-level JSON array is an error, never zero objects."""
    assert read("[1, 2]\n") == [("error", 1, "document is a list, not an object")]
    refused = "document is a list, not an object; kubectl refuses it: put the objects in the items of a kind: List, " \
              "or separate them with ---"
    assert read('[{"kind": "Pod"}]') == [("error", 1, refused)]
    assert read("- a\n") == [("error", 1, "document is a list, not an object")]
    assert read("just text\n") == [("error", 1, "document is a string, not an object")]
    assert read("null\n---\n~\n---\n# only a comment\n") == []  # null documents are skipped (StreamVisitor)


def test_a_document_that_is_no_manifest_is_marked_to_pass_over() -> None:
    """A list of steps or hooks, or a string, is an error to kubectl but no manifest: ``skip`` says so, and
    check and fix count it as skipped (the shipped pre-commit hook failed on its own file). A list
    holding objects with a kind is manifests kubectl refuses: an error, never passed over."""
    assert [d.skip for d in read_text_documents("f", "- id: a\n  entry: b\n---\nwords\n---\n[1]\n")
            if isinstance(d, ReadError)] == ["document that is a list, not a Kubernetes object",
                                             "document that is a string, not a Kubernetes object",
                                             "document that is a list, not a Kubernetes object"]
    assert [d.skip for d in read_text_documents("f", "- {kind: Pod}\n") if isinstance(d, ReadError)] == [""]


def test_bom_and_crlf() -> None:
    assert read("\ufeffa: 1\r\n---\r\nb: 1:00\r\n") == [{"a": 1}, {"b": "1:00"}]


ints64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)


@given(ints64)
def test_go_integer_spellings(n: int) -> None:
    sign = "-" if n < 0 else ""
    for spelled in (str(n), f"{sign}0x{abs(n):x}", f"{sign}0o{abs(n):o}", f"{sign}0b{abs(n):b}",
                    f"{sign}0{abs(n):o}" if n else "0"):
        assert resolve_plain(spelled) == n, spelled


@given(st.text(alphabet=string.printable + "éü\u00a0", max_size=40))
def test_resolve_plain_is_total(text: str) -> None:
    got = resolve_plain(text)
    assert got is None or isinstance(got, (bool, int, float, str))


json_values = st.recursive(
    st.none() | st.booleans() | ints64 | st.text(alphabet=string.ascii_letters + string.digits + " :-_./", max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.text(alphabet=string.ascii_letters + "-_.", min_size=1, max_size=8), children, max_size=4),
    max_leaves=20)


@settings(max_examples=300)
@given(st.dictionaries(st.text(alphabet=string.ascii_letters, min_size=1, max_size=8), json_values,
                       min_size=1, max_size=5))
def test_json_reads_back_as_itself_as_json_and_as_yaml(obj: dict[str, Any]) -> None:
    """JSON is YAML: the same text gives the same object on the JSON path and on the YAML path (a
    leading space-free ``---`` line makes the stream YAML)."""
    text = json.dumps(obj)
    assert read(text) == [obj]
    assert read("---\n" + text) == [obj]
    assert read(json.dumps(obj, indent=2) + "\n" + text) == [obj, obj]


@settings(max_examples=300)
@given(st.text(alphabet=string.printable + "\u2028é", max_size=200))
def test_any_text_reads_or_is_a_named_error(text: str) -> None:
    for item in read_text_documents("f", text):
        assert isinstance(item, (Document, ReadError))
        if isinstance(item, Document):
            assert isinstance(item.obj, dict)


def test_go_yaml_alias_ratio_rule() -> None:
    """go-yaml v2 (decode.go): past 100 aliased and 1,000 total decodes, more than 99% of decodes coming
    from aliases is "excessive aliasing". Each alias of a 200-item list adds 201 aliased decodes of 202;
    after the anchor's own 202, the ratio passes 99% at the 200th alias, however small the file."""
    anchor = "a: &a [" + ", ".join(str(i) for i in range(200)) + "]\n"
    (doc,) = read(anchor + "b: [" + ", ".join(["*a"] * 150) + "]\n")
    assert len(doc["b"]) == 150 and doc["b"][149] == list(range(200))
    assert read(anchor + "b: [" + ", ".join(["*a"] * 1000) + "]\n") == [
        ("error", 1, "YAML cannot be decoded: document contains excessive aliasing")]
    # an anchor that contains itself
    assert read("a: &a [*a]\n")[0][0] == "error"
