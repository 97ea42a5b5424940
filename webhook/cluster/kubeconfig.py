"""Where the Kubernetes client looks for credentials, said before it looks: a missing or broken kubeconfig is
named with its path and the places looked at (the client's own message names neither, and a file that is not
YAML reached the user as a traceback).

Nothing here imports the Kubernetes client (urllib3, ssl): a server checks before it forks, and its workers
must import the client first, after gevent patched ssl (``serving/server.py``).

The places are the client's, which are kubectl's: in a Pod its ServiceAccount (unless a kubeconfig or a context
is asked for), else ``--kubeconfig``, else each file of ``$KUBECONFIG`` (``:``-separated), else ``~/.kube/config``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    from webhook.cluster.client import ClusterError

TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
FIX = "pass --kubeconfig FILE, or set KUBECONFIG"


def _in_cluster(env: Mapping[str, str]) -> bool:
    return bool(env.get("KUBERNETES_SERVICE_HOST") and env.get("KUBERNETES_SERVICE_PORT")) and TOKEN.is_file()


def _problem(path: Path) -> str | None:
    """Why ``path`` cannot be a kubeconfig, or ``None`` when it reads as one (the client judges the rest)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return f"{path} does not exist"
    except IsADirectoryError:
        return f"{path} is a folder, not a file"
    except (OSError, UnicodeDecodeError) as exc:
        return f"{path} cannot be read: {getattr(exc, 'strerror', None) or exc}"
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        return f"{path} is not YAML{where}"
    if not isinstance(doc, dict) or not doc:
        return f"{path} holds no kubeconfig (no clusters, users or contexts)"
    return None


def places(kubeconfig: str | None, env: Mapping[str, str] | None = None) -> list[Path]:
    """The kubeconfig files the client reads, in its order."""
    env = os.environ if env is None else env
    if kubeconfig:
        return [Path(kubeconfig).expanduser()]
    listed = [p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    return [Path(p).expanduser() for p in listed] or [Path("~/.kube/config").expanduser()]


def unusable(kubeconfig: str | None, context: str | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """Why no credentials can be had, naming each place looked at (in a Pod, ``--kubeconfig``, ``$KUBECONFIG``,
    ``~/.kube/config``), or why ``context`` is not one the kubeconfig has; ``None`` when the client can try."""
    env = os.environ if env is None else env
    if not kubeconfig and context is None and _in_cluster(env):
        return None
    files = places(kubeconfig, env)
    problems = [_problem(p) for p in files]
    if any(p is None for p in problems):
        return _missing_context(context, [f for f, p in zip(files, problems, strict=True) if p is None])
    if kubeconfig:
        looked = f"--kubeconfig {files[0]}"
    else:
        source = "$KUBECONFIG" if env.get("KUBECONFIG", "").strip(os.pathsep) else "the default"
        pod = ("in a Pod, but without a ServiceAccount token" if env.get("KUBERNETES_SERVICE_HOST")
               else "not in a Pod (KUBERNETES_SERVICE_HOST unset)")
        looked = f"{pod}; {source} {os.pathsep.join(str(p) for p in files)}"
    fix = "check the --kubeconfig path" if kubeconfig else FIX
    return f"no usable kubeconfig: {'; '.join(p for p in problems if p)} (looked at: {looked}); {fix}"


def _missing_context(context: str | None, files: list[Path]) -> str | None:
    """``--context NAME`` that none of ``files`` defines: named, with the contexts they do define."""
    if context is None:
        return None
    names: list[str] = []
    for path in files:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for entry in doc.get("contexts") or [] if isinstance(doc, dict) else []:
            name = entry.get("name") if isinstance(entry, dict) else None
            if isinstance(name, str) and name not in names:
                names.append(name)
    if context in names:
        return None
    have = f"its contexts: {', '.join(names)}" if names else "it defines no context"
    where = os.pathsep.join(str(p) for p in files)
    return (f"no usable kubeconfig: --context {context}: no such context in {where} ({have}); pass one of those "
            "(kubectl config get-contexts lists them)")


def preflight(kubeconfig: str | None, context: str | None = None, env: Mapping[str, str] | None = None) -> None:
    """Raise ``ClusterError`` naming each place looked at when none can give credentials (``unusable``)."""
    problem = unusable(kubeconfig, context, env)
    if problem is not None:
        from webhook.cluster.client import ClusterError

        raise ClusterError(problem)


def explain(exc: ClusterError, kubeconfig: str | None) -> str:
    """``exc``'s message, with the files read when the client found them unusable."""
    message = str(exc)
    if message.startswith("no usable kubeconfig") and "looked at" not in message and "no such context" not in message:
        message += f" (read: {os.pathsep.join(str(p) for p in places(kubeconfig))}); {FIX}"
    return message
