"""Adapters that put convgraph behind the interfaces agent frameworks already use (optional extras)."""
