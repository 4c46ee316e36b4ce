"""Adapters that put convgraph behind the interfaces agent frameworks already use.

Each adapter is an optional extra (`pip install convgraph[langgraph]`) and imports its
framework only when its own module is imported, so `import convgraph` never needs one.
"""
