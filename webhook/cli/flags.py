"""The flags of ``check``, ``fix`` and ``audit`` that replace a key of ``--config``'s configuration: a flag wins
over the file, and its value is checked as the key's is (a bad one is a ``ConfigError``, exit 2, naming the flag)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from webhook.core.config import KSERVE_NS, Config, ConfigError
from webhook.core.kubeversion import VersionError, resolve


def with_flags(config: Config, args: argparse.Namespace) -> Config:
    """``config`` with ``kubernetesVersion`` replaced by ``--kubernetes-version`` and ``policy.kserveNamespace``
    by ``--kserve-namespace``, each when given (a command without the flag keeps the file's)."""
    version, namespace = getattr(args, "kubernetes_version", None), getattr(args, "kserve_namespace", None)
    if version is not None:
        try:
            config = replace(config, kubernetes_version=resolve(version))
        except VersionError as exc:
            raise ConfigError(f"--kubernetes-version: {exc}") from None
    if namespace is not None:
        parsed = KSERVE_NS.kind.parse(namespace, "--kserve-namespace")
        config = replace(config, policy=replace(config.policy, kserve_namespace=parsed))
    return config


__all__ = ["with_flags"]
