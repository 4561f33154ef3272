"""A small client for the Kafka Connect REST API (standard library only).

Used by ``mm2spec plan`` (live connector configs), the connector provider and the tests. Errors
become ``ConnectUnreachable`` / ``ConnectRequestFailed`` naming the URL, never a traceback.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from mm2spec.errors import ConnectRequestFailed, ConnectUnreachable

# A worker answers its REST API within a second when idle; while it rebalances, connector
# writes wait for the group to settle, which takes up to its rebalance timeout (default 60 s,
# usually seconds). 30 s covers a routine rebalance without hanging a plan on a dead worker.
REQUEST_TIMEOUT_S = 30.0


class ConnectClient:
    """``GET``/``PUT``/``DELETE`` on one Connect cluster's REST API."""

    def __init__(self, url: str, timeout: float = REQUEST_TIMEOUT_S):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None, ok_missing: bool = False) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            if ok_missing and exc.code == 404:
                return None
            detail = exc.read().decode(errors="replace")
            try:
                detail = json.loads(detail).get("message", detail)
            except (ValueError, AttributeError):
                pass
            raise ConnectRequestFailed(f"Connect {self.url}: {method} {path} -> HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ConnectUnreachable(f"Kafka Connect at {self.url} is unreachable: {reason}") from None
        return json.loads(payload) if payload else None

    def version(self) -> str | None:
        """The worker's Kafka version (``GET /``: ``{"version": "4.3.1", "commit": ..., "kafka_cluster_id": ...}``)."""
        return (self._call("GET", "/") or {}).get("version")

    def connector_configs(self) -> dict[str, dict[str, str]]:
        """Every connector's config, in one request."""
        expanded = self._call("GET", "/connectors?expand=info") or {}
        return {name: entry["info"]["config"] for name, entry in expanded.items()}

    def connector_config(self, name: str) -> dict[str, str] | None:
        return self._call("GET", f"/connectors/{urllib.parse.quote(name, safe='')}/config", ok_missing=True)

    def put_connector_config(self, name: str, config: dict[str, str]) -> dict:
        return self._call("PUT", f"/connectors/{urllib.parse.quote(name, safe='')}/config", config)

    def delete_connector(self, name: str) -> None:
        self._call("DELETE", f"/connectors/{urllib.parse.quote(name, safe='')}", ok_missing=True)

    def connector_status(self, name: str) -> dict | None:
        return self._call("GET", f"/connectors/{urllib.parse.quote(name, safe='')}/status", ok_missing=True)

    def stop_connector(self, name: str) -> None:
        """``PUT /connectors/{name}/stop`` (KIP-875): tasks shut down, config kept; state STOPPED."""
        self._call("PUT", f"/connectors/{urllib.parse.quote(name, safe='')}/stop")

    def resume_connector(self, name: str) -> None:
        """``PUT /connectors/{name}/resume``: a stopped or paused connector runs again."""
        self._call("PUT", f"/connectors/{urllib.parse.quote(name, safe='')}/resume")

    def alter_offsets(self, name: str, offsets: list[dict]) -> None:
        """``PATCH /connectors/{name}/offsets`` (KIP-875; the connector must be STOPPED): each entry
        ``{"partition": {...}, "offset": {...}}``, a null offset resets that partition."""
        self._call("PATCH", f"/connectors/{urllib.parse.quote(name, safe='')}/offsets", {"offsets": offsets})

    def validate(self, plugin: str, config: dict[str, str]) -> dict:
        """``PUT /connector-plugins/{plugin}/config/validate``: MM2's own checks of a config."""
        return self._call("PUT", f"/connector-plugins/{urllib.parse.quote(plugin, safe='')}/config/validate", config)

    def plugins(self) -> list[dict]:
        return self._call("GET", "/connector-plugins") or []
