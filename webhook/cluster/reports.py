"""The policy report APIs qos-guard writes into (``audit --report`` and ``agent --report``): where their objects
live. ``openreports.io/v1alpha1`` ``Report`` (github.com/openreports/reports-api v0.2.1) and the older
``wgpolicyk8s.io/v1alpha2`` ``PolicyReport`` have the same result shape."""

from __future__ import annotations

from dataclasses import dataclass

MANAGED_BY = ("app.kubernetes.io/managed-by", "qos-guard")


@dataclass(frozen=True, slots=True)
class Flavour:
    """One report API: where its objects live."""

    group: str
    version: str
    kind: str
    plural: str
    top_level_source: bool  # openreports' Report carries `source` at the top as well as per result

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def path(self, namespace: str | None, name: str | None = None) -> str:
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"/apis/{self.api_version}{where}/{self.plural}" + (f"/{name}" if name else "")


FLAVOURS: dict[str, Flavour] = {
    "openreports": Flavour("openreports.io", "v1alpha1", "Report", "reports", True),
    "policyreport": Flavour("wgpolicyk8s.io", "v1alpha2", "PolicyReport", "policyreports", False),
}
