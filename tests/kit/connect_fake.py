"""A fake Connect REST client for the connector provider's unit tests (``connector.ConnectClient``)."""

from __future__ import annotations


class ConnectFake:
    """A registered config (None: not registered), then a sequence of status answers (the last one
    repeats)."""

    def __init__(self, config=None, statuses=()):
        self.config, self.statuses = config, list(statuses)
        self.puts, self.deleted, self.status_calls = [], [], 0

    def connector_config(self, name):
        return self.config

    def put_connector_config(self, name, config):
        self.puts.append(config)

    def delete_connector(self, name):
        self.deleted.append(name)

    def connector_status(self, name):
        self.status_calls += 1
        return self.statuses[min(self.status_calls, len(self.statuses)) - 1]
