"""Editor support for DR specs, checked with the real YAML language server (the one VS Code's and
JetBrains' YAML plugins run), driven over LSP (JSON-RPC on stdio) as an editor drives it.

The schema is found the two ways the README tells users: the ``# yaml-language-server: $schema=``
line the examples carry, and the ``yaml.schemas`` setting that associates ``*.dr.yaml``. The
server gets no network (the schema store is off), so it works on the local schema file only.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from required import missing_component

from mm2spec.components import components
from mm2spec.errors import ComponentMissing
from mm2spec.resources import schema_path

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
#: How long one answer from the server may take. It answers in milliseconds once it runs; node's
#: start and the first schema load take a few seconds, far more on two cores shared with builds.
REPLY_TIMEOUT = 120.0


class LanguageServer:
    """A minimal LSP client: requests with ids, notifications, and the server's own requests answered."""

    def __init__(self, command: list[str], settings: dict):
        self.settings = settings
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)
        self.incoming: queue.Queue = queue.Queue()
        self.notifications: list[dict] = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            headers = {}
            while (line := stream.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            if not headers:
                return  # the server closed its output
            self.incoming.put(json.loads(stream.read(int(headers["content-length"]))))

    def _send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        wanted = self.next_id
        self._send({"id": wanted, "method": method, "params": params})
        reply = self._next(lambda m: m.get("id") == wanted and "method" not in m)
        assert "error" not in reply, reply["error"]
        return reply.get("result")

    def notification(self, method: str, accept: Callable[[dict], bool]) -> dict:
        """The first notification ``method`` (already received or next) whose params ``accept`` takes."""
        for seen in self.notifications:
            if seen["method"] == method and accept(seen["params"]):
                return seen["params"]
        return self._next(lambda m: m.get("method") == method and "id" not in m and accept(m["params"]))["params"]

    def _next(self, wanted: Callable[[dict], bool]) -> dict:
        while True:
            try:
                message = self.incoming.get(timeout=REPLY_TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"the language server sent nothing for {REPLY_TIMEOUT:.0f}s") from None
            if wanted(message):
                return message
            if "method" in message and "id" in message:
                self._answer(message)
            elif "method" in message:
                self.notifications.append(message)

    def _answer(self, request: dict) -> None:
        """The server asks for its settings (one per item asked) and registers capabilities."""
        result = None
        if request["method"] == "workspace/configuration":
            result = [self.settings.get(item.get("section"), None) for item in request["params"]["items"]]
        self._send({"id": request["id"], "result": result})

    def close(self) -> None:
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            self.process.wait(timeout=REPLY_TIMEOUT)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="module")
def server() -> LanguageServer:
    try:
        command = [str(components().yaml_language_server), "--stdio"]
    except ComponentMissing as exc:
        missing_component(exc)
    yaml_settings = {"validate": True, "completion": True, "hover": True,
                     "schemaStore": {"enable": False},  # no network: only the local schema
                     "schemas": {schema_path("dr-spec.schema.json").as_uri(): ["*.dr.yaml"]}}
    lsp = LanguageServer(command, {"yaml": yaml_settings})
    lsp.request("initialize", {"processId": None, "rootUri": ROOT.as_uri(), "capabilities": {
        "workspace": {"configuration": True},
        "textDocument": {"completion": {"completionItem": {"documentationFormat": ["markdown", "plaintext"]}},
                         "publishDiagnostics": {}}}})
    lsp.notify("initialized", {})
    lsp.notify("workspace/didChangeConfiguration", {"settings": {"yaml": yaml_settings}})
    yield lsp
    lsp.close()


def open_document(server: LanguageServer, path: Path, text: str) -> list[dict]:
    """Open ``text`` as the file ``path``; the diagnostics the server publishes for it."""
    uri = path.as_uri()
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "yaml", "version": 1,
                                                            "text": text}})
    return server.notification("textDocument/publishDiagnostics", lambda p: p["uri"] == uri)["diagnostics"]


def _line_of(text: str, needle: str) -> int:
    """0-based line of the first line containing ``needle`` (LSP counts lines from 0)."""
    return next(i for i, line in enumerate(text.splitlines()) if needle in line)


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").glob("*.yaml")))
def test_example_specs_have_no_diagnostics(server, example):
    example = ROOT / "examples" / example
    text = example.read_text()
    assert text.startswith("# yaml-language-server: $schema=../schemas/dr-spec.schema.json\n")
    assert open_document(server, example, text) == []


def test_unknown_field_and_wrong_type_are_flagged_on_their_lines(server, tmp_path):
    text = (ROOT / "examples" / "dr-spec.example.yaml").read_text()
    text = text.replace("    tasksMax: 30\n", "    tasksMax: thirty\n").replace(
        "  triggerInterval: 1 second\n", "  triggerInterval: 1 second\n  triggerIntervall: 2 seconds\n")
    text = text.replace("$schema=../schemas/dr-spec.schema.json", f"$schema={schema_path('dr-spec.schema.json').as_uri()}")
    diagnostics = open_document(server, tmp_path / "payments.yaml", text)
    by_line = {d["range"]["start"]["line"]: d["message"] for d in diagnostics}
    assert set(by_line) == {_line_of(text, "tasksMax: thirty"), _line_of(text, "triggerIntervall")}, diagnostics
    assert "integer" in by_line[_line_of(text, "tasksMax: thirty")]
    assert "triggerIntervall" in by_line[_line_of(text, "triggerIntervall")]


def test_dr_yaml_files_get_the_schema_without_a_modeline(server, tmp_path):
    text = "apiVersion: mm2spec/v1\nkind: DisasterRecovery\nmetadata: {name: x}\nclusters: {}\nmirrors: []\nengine: flink\n"
    diagnostics = open_document(server, tmp_path / "orders.dr.yaml", text)
    assert _line_of(text, "engine: flink") in {d["range"]["start"]["line"] for d in diagnostics}, diagnostics


def test_completion_in_a_mirror_offers_its_fields_with_their_descriptions(server, tmp_path):
    text = ("apiVersion: mm2spec/v1\nkind: DisasterRecovery\nmetadata: {name: x}\n"
            "clusters:\n  a: {bootstrapServers: [a:9092]}\n  b: {bootstrapServers: [b:9092]}\n"
            "mirrors:\n  - name: a-to-b\n    source: a\n    \n")
    path = tmp_path / "complete.dr.yaml"
    open_document(server, path, text)
    line = len(text.splitlines()) - 1  # the empty line inside mirrors[0]
    result = server.request("textDocument/completion", {"textDocument": {"uri": path.as_uri()},
                                                        "position": {"line": line, "character": 4}})
    items = {item["label"]: item for item in (result["items"] if isinstance(result, dict) else result)}
    fields = json.loads(schema_path("dr-spec.schema.json").read_text())["$defs"]["mirror"]["properties"]
    for name in ("target", "topics", "groups", "replicationPolicy", "tasksMax", "exactlyOnce"):
        assert name in items, sorted(items)
        documentation = items[name].get("documentation")
        shown = documentation.get("value", "") if isinstance(documentation, dict) else documentation or ""
        assert fields[name]["description"] in shown, (name, items[name])
    assert "source" not in items  # already set in this mirror
