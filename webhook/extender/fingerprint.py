"""NFD's pod-set fingerprint (``nodeTopologyPodsFingerprint``, k8stopologyawareschedwg/podfingerprint v001): a
NodeResourceTopology object that carries it says which Pods its numbers already count, so the extender knows
when a Pod it held as a reservation is in the NRT and can be let go.

The fingerprint of a set of ``namespace/name`` pairs is ``pfp0v001`` and the hex of XXH64 (seed 0) over the
sorted per-Pod hashes, each ``XXH64(name, seed=XXH64(namespace))``, written little endian. XXH64 is written out
here (the image has no xxhash module); the test holds it to the upstream package's own test vectors.
"""

from __future__ import annotations

from collections.abc import Iterable

PREFIX = "pfp0v001"
ATTRIBUTE = "nodeTopologyPodsFingerprint"
METHOD_ATTRIBUTE = "nodeTopologyPodsFingerprintMethod"

_MASK = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _MASK
    return (_rotl(acc, 31) * _P1) & _MASK


def _merge(acc: int, val: int) -> int:
    acc ^= _round(0, val)
    return (acc * _P1 + _P4) & _MASK


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 as the reference implementation defines it."""
    n = len(data)
    i = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _MASK
        v2 = (seed + _P2) & _MASK
        v3 = seed & _MASK
        v4 = (seed - _P1) & _MASK
        while i + 32 <= n:
            v1 = _round(v1, int.from_bytes(data[i:i + 8], "little"))
            v2 = _round(v2, int.from_bytes(data[i + 8:i + 16], "little"))
            v3 = _round(v3, int.from_bytes(data[i + 16:i + 24], "little"))
            v4 = _round(v4, int.from_bytes(data[i + 24:i + 32], "little"))
            i += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        for v in (v1, v2, v3, v4):
            h = _merge(h, v)
    else:
        h = (seed + _P5) & _MASK
    h = (h + n) & _MASK
    while i + 8 <= n:
        h ^= _round(0, int.from_bytes(data[i:i + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _MASK
        i += 8
    if i + 4 <= n:
        h ^= (int.from_bytes(data[i:i + 4], "little") * _P1) & _MASK
        h = (_rotl(h, 23) * _P2 + _P3) & _MASK
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _MASK
        h = (_rotl(h, 11) * _P1) & _MASK
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _MASK
    h ^= h >> 29
    h = (h * _P3) & _MASK
    h ^= h >> 32
    return h


def pod_hash(namespace: str, name: str) -> int:
    return xxh64(name.encode(), xxh64(namespace.encode()))


def sign(hashes: Iterable[int]) -> str:
    """``Fingerprint.Sign()`` over the per-Pod hashes (``pod_hash``), in any order: they are sorted first, so a
    caller that keeps each Pod's hash (the extender does, per node) signs a set without hashing names again."""
    lanes = b"".join(h.to_bytes(8, "little") for h in sorted(hashes))
    return PREFIX + xxh64(lanes).to_bytes(8, "big").hex()


def fingerprint(pods: Iterable[tuple[str, str]]) -> str:
    """``Fingerprint.Sign()`` of the ``(namespace, name)`` pairs (their order does not matter)."""
    return sign(pod_hash(ns, name) for ns, name in pods)
