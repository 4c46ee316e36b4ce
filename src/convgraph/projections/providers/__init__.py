"""One module per provider wire format, each with three pure functions.

`to_wire(messages)` renders a repaired neutral sequence (see `projections.repair`) as the
provider's request list, `record(response)` turns one provider response into turn record
drafts `(kind, payload)`, and `renders(block, role, owner)` says whether `to_wire` carries
a block of a user or assistant message (repair drops those it would not). Invariant:
`to_wire` of what `record` made from a response gives back that response's assistant
message, block for block.

    >>> from convgraph.projections.providers import anthropic
    >>> [(kind, p["content"]) for kind, p in anthropic.record(
    ...     {"role": "assistant", "content": [{"type": "text", "text": "hi"}]})]
    [('agent_message', [{'type': 'text', 'text': 'hi'}])]
"""

from __future__ import annotations

from convgraph.projections.providers import anthropic, gemini, openai_chat, openai_responses

__all__ = ["anthropic", "gemini", "openai_chat", "openai_responses"]
