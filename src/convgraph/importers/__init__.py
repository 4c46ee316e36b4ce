"""Importers of the histories users already have: a LangGraph `SqliteSaver` thread, an OpenAI
Agents SDK `SQLiteSession`, and saved message logs (legacy `{speaker, text, timestamp}` lines,
OpenAI Chat or Responses messages, Anthropic messages) into convgraph conversations.

Each returns an `ImportReport` (a whole LangGraph thread, moved for `ConvgraphSaver` to
continue, a `ThreadImportReport`). Invariant: running an import again into the same conversation
writes nothing (docs/imports.md, `importers/writing.py`).
"""

from convgraph.importers.jsonl import import_jsonl
from convgraph.importers.langgraph import import_langgraph
from convgraph.importers.langgraph_thread import ThreadImportReport, import_langgraph_thread
from convgraph.importers.openai_agents import import_openai_agents
from convgraph.importers.openai_agents_session import import_openai_agents_session
from convgraph.importers.report import ImportReport, Unmapped

__all__ = ["ImportReport", "ThreadImportReport", "Unmapped", "import_jsonl", "import_langgraph",
           "import_langgraph_thread", "import_openai_agents", "import_openai_agents_session"]
