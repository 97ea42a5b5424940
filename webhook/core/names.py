"""Kubernetes' name rules (``k8s.io/apimachinery/pkg/util/validation``) where a flag names an object: a namespace
is a DNS-1123 label, a Service a DNS-1035 label. Checked before anything is written or printed, since the API
server would refuse the objects later."""

from __future__ import annotations

import re

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
MAX_LABEL = 63
MAX_SUBDOMAIN = 253


def shown(name: str) -> str:
    """``name`` quoted for a message, at most 63 characters of it (a longer one ends in ``...``)."""
    return repr(name[:MAX_LABEL]) + ("..." if len(name) > MAX_LABEL else "")


def namespace_problem(name: str) -> str | None:
    """Why ``name`` cannot be a namespace's name, or None."""
    if len(name) <= MAX_LABEL and DNS1123_LABEL.fullmatch(name):
        return None
    return (f"{shown(name)} is not a namespace name (a DNS-1123 label: at most 63 lower-case letters, digits and "
            "'-', starting and ending with a letter or digit)")


def subdomain_problem(name: str, what: str) -> str | None:
    """Why ``name`` cannot be the name of ``what`` (a Pod, a Node: ``NameIsDNSSubdomain``), or None."""
    if len(name) <= MAX_SUBDOMAIN and DNS1123_SUBDOMAIN.fullmatch(name):
        return None
    return (f"{shown(name)}{f' ({len(name)} characters)' if len(name) > MAX_LABEL else ''} is not a {what} name (a "
            "DNS-1123 subdomain: at most 253 lower-case letters, digits, '-' and '.', each part starting and ending "
            "with a letter or digit)")
