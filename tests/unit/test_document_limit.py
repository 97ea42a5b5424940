"""The per-document size limit holds for every document of a stream, not only the last: a document over it is
an error for that document alone, its bytes are dropped as they are read (memory stays bounded), and the
documents after it are read."""

from __future__ import annotations

import io
import tracemalloc
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.manifests import documents
from webhook.manifests.documents import BLOCK, MAX_DOCUMENT_BYTES, MIB, Document, ReadError, stream_documents

POD = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: after\n"


def _big_pod(size: int, one_line: bool) -> bytes:
    head = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: big\n  annotations:\n"
    if one_line:
        return head + b"    a: " + b"x" * size + b"\n"
    line = b"    k%07d: " + b"v" * 100 + b"\n"
    return head + b"".join(line % i for i in range(size // len(line % 0) + 1))


def _read(data: bytes) -> tuple[list[Document | ReadError], int]:
    tracemalloc.start()
    try:
        docs = list(stream_documents("f.yaml", io.BytesIO(data)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return docs, peak


@pytest.mark.parametrize("one_line", [False, True], ids=["many-lines", "one-long-line"])
def test_a_big_document_before_another_is_refused_alone_in_bounded_memory(one_line: bool) -> None:
    big = _big_pod(int(10.5 * MIB), one_line)
    data = big + b"---\n" + POD
    docs, peak = _read(data)
    error, after = docs
    assert isinstance(error, ReadError) and error.line == 1, error
    assert error.message == ("document is over the 8 MiB limit; it is not read (the documents after it are)")
    assert isinstance(after, Document) and after.obj["metadata"]["name"] == "after"
    assert after.line == big.count(b"\n") + 2
    # The input itself is 10.5 MiB (held by the test); what reading adds stays near the limit and one block,
    # where parsing the document whole took ~170 MiB.
    assert peak - len(data) < 3 * MAX_DOCUMENT_BYTES, peak / MIB


# The property below is about where each document starts and ends, not about the size itself: held to a 64 KiB
# limit read in 32 KiB blocks (the ratio of the real 8 MiB and 4 MiB), the same cuts happen in the same places
# (a document across several blocks, a block ending inside one) for a 130th of the bytes; the real limit is the
# test above's. That a 69 KiB document is an error proves the smaller limit is the one applied.
SMALL_LIMIT = 64 * 1024


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.sampled_from([10, 1000, SMALL_LIMIT - 2000, SMALL_LIMIT + 5000]), min_size=1, max_size=4))
def test_each_document_is_held_to_the_limit(sizes: list[int]) -> None:
    """Whatever the order of small and big documents, each big one is an error at its own line and each small
    one is read, at its own line."""
    chunks, expected, line = [], [], 1
    for i, size in enumerate(sizes):
        body = b"kind: ConfigMap\nmetadata: {name: c%d}\ndata:\n  k: " % i + b"x" * size + b"\n"
        chunks.append(body)
        expected.append(("error" if len(body) > SMALL_LIMIT else f"c{i}", line))
        line += body.count(b"\n") + 1
    with mock.patch.object(documents, "MAX_DOCUMENT_BYTES", SMALL_LIMIT), \
            mock.patch.object(documents, "BLOCK", SMALL_LIMIT * BLOCK // MAX_DOCUMENT_BYTES):
        docs = list(stream_documents("f.yaml", io.BytesIO(b"---\n".join(chunks))))
    got = [("error" if isinstance(d, ReadError) else d.obj["metadata"]["name"], d.line) for d in docs]
    assert got == expected
