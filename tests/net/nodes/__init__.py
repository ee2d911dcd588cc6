"""Helpers for the link tests: shared message types, a subprocess node, raw peers."""
