"""Witnessed history (docs/integrity.md): signed statements, consistency, findings, evidence."""
