"""Mutation testing of every module of convgraph that makes decisions (run through `scripts/mutate`).

Each module is mutated by mutmut in a work folder of its own, `.mutation/<module>/`, against
only the tests that concern it (`MODULES`); mutmut then runs, for each mutant, just the
tests that call the mutated function. A surviving mutant is either a test still to write or
an equivalent mutant listed, with the reason, in `tests/mutation_equivalents.toml`. Kill
rate = killed / (mutants - equivalent). Results stay in the work folder until the next run
of that module, so `--report` prints the table of every module run so far without rerunning
(judging survivors against the equivalents as listed now).

    scripts/mutate                      every module, in MODULES order
    scripts/mutate sync/auth.py core  one module, or a whole package
    scripts/mutate --report             the table and survivors of the last runs (markdown)
    scripts/mutate --check              fail if a module or test file in MODULES does not exist
    MUTATE_JOBS=1 scripts/mutate ...    mutmut's worker processes (default 2)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
EQUIVALENTS = ROOT / "tests" / "mutation_equivalents.toml"
MUTMUT = Path(sys.executable).parent / "mutmut"

_CORE = ("tests/core/test_record.py", "tests/core/test_vectors.py")
_AUTHORITY = ("tests/projections/test_authority.py", "tests/projections/test_authority_orders.py",
              "tests/projections/test_authority_vectors.py", "tests/replica/test_authority.py")
# module (under src/convgraph) -> the test files that concern it; the promise-critical modules
# come first, so a partial run covers them
MODULES: dict[str, tuple[str, ...]] = {
    "core/record.py": (*_CORE, "tests/core/test_validation.py"),
    "core/validation.py": ("tests/core/test_validation.py",),
    "core/kinds.py": ("tests/core/test_kinds.py", *_CORE),
    "core/cid.py": ("tests/core/test_cid.py", *_CORE),
    "core/hlc.py": ("tests/core/test_hlc.py",),
    "core/keys.py": ("tests/core/test_keys.py", *_CORE),
    "server/access.py": ("tests/server/test_access.py",),
    "sync/reconcile.py": ("tests/sync/test_reconcile.py", "tests/sync/test_protocol.py",
                          "tests/sync/test_compacted.py"),  # bases and adoption
    "projections/repair.py": ("tests/projections/test_repair.py", "tests/projections/test_resume.py"),
    "sync/auth.py": ("tests/sync/test_auth.py",),
    # sync/wire.py until issue 29 split it into its messages, encoder and decoder
    "sync/encoder.py": ("tests/sync/test_wire.py", "tests/sync/test_protocol.py"),
    "sync/decoder.py": ("tests/sync/test_wire.py", "tests/sync/test_protocol.py"),
    "core/codec.py": ("tests/core/test_codec.py", *_CORE),
    "replica/ingest.py": ("tests/replica/test_ingest.py", "tests/replica/test_adoption.py"),  # adoption runs through plan_ingest
    # the report part: pushes over a live server, over a local pair, and releases after a base
    "sync/fates.py": ("tests/sync/test_fates.py", "tests/sync/test_local.py", "tests/sync/test_compacted.py"),
    # checked directly, then travelling by sync and in CAR files (compaction_of, role, cover_checkpoint)
    "replica/adoption.py": ("tests/replica/test_adoption.py", "tests/sync/test_compacted.py", "tests/sync/test_car.py"),
    # the root of trust: the id derivation and the root rules, directly and through the vectors
    "core/rooted.py": ("tests/core/test_rooted.py", "tests/core/test_vectors.py"),
    # the authority projection (issue 10), each part against the same four suites: the attacks
    # of docs/authority.md §1 one by one, every delivery order, the vectors, a replica's doors
    "projections/ancestry.py": ("tests/projections/test_ancestry.py", *_AUTHORITY),
    "projections/authority/judge.py": _AUTHORITY,
    "projections/authority/answers.py": _AUTHORITY,
    "projections/authority/rules.py": _AUTHORITY,
    "projections/authority/needs.py": _AUTHORITY,
    "projections/authority/state.py": _AUTHORITY,
    # witnessed history (issue 11): the pure core, directly, through the vectors and through the
    # replica-level checks that stand on it
    "integrity/statement.py": (
        "tests/integrity/test_statement.py", "tests/integrity/test_integrity_vectors.py",
        "tests/integrity/test_evidence.py", "tests/sync/test_statements.py",
    ),
    "integrity/consistency.py": ("tests/integrity/test_consistency.py", "tests/integrity/test_evidence.py"),
    "integrity/remembered.py": ("tests/integrity/test_remembered.py", "tests/replica/test_witnessing.py"),
    "integrity/evidence.py": ("tests/integrity/test_evidence.py", "tests/integrity/test_integrity_vectors.py",
                              "tests/replica/test_checkpointing.py"),
    "integrity/note.py": ("tests/integrity/test_note.py",),
    "integrity/checkpoints.py": ("tests/integrity/test_checkpoints.py", "tests/replica/test_checkpointing.py"),
    # its own suite only: test_resume.py asks only that resume's output pass (no false refusal,
    # which test_validity.py's accepted histories ask too), at half a minute of CPU per mutant
    "projections/validity.py": ("tests/projections/test_validity.py",),
    # artifacts (issue 14, docs/format.md §17/§18): the pure modules, directly, through the
    # vectors, and through the replica that stores and checks them
    "artifacts/blocks.py": ("tests/artifacts/test_blocks.py", "tests/artifacts/test_artifact_vectors.py",
                            "tests/artifacts/test_put_get.py", "tests/replica/test_artifacts.py"),
    "artifacts/diff.py": ("tests/artifacts/test_diff.py",),
    "artifacts/claims.py": ("tests/artifacts/test_claims.py", "tests/integrity/test_artifact_evidence.py"),
    # issue 30 §4: every other module under src/convgraph that makes decisions, grouped by
    # package, the packages held to 95% first (core, authority, integrity, server gate and
    # access, sync wire/responder/reconcile, stores). Each against its own test file(s), else
    # the tests that import it, else the tests of the modules that use it (at most six).
    # Skipped, as they decide nothing: every `__init__.py` (re-export faces; the top one's lazy
    # `__getattr__` is checked by tests/test_exported_members.py), `__main__.py` and
    # `cli/__main__.py` (one call), `sync/wire.py` (re-exports), `sync/messages.py` (data
    # classes), `replica/config.py` (constants), `sync/_deferred.py` (a lazy-import shim),
    # `server/openapi.py` (a data document) and `integrity/findings.py` (a data class and its JSON)
    # core
    "core/lenient.py": (
        "tests/core/test_codec.py", "tests/core/test_keys.py", "tests/core/test_record.py",
        "tests/core/test_vectors.py",
    ),
    "core/safe_text.py": ("tests/core/test_safe_text.py",),
    "core/short_actor.py": ("tests/core/test_short_actor.py",),
    "core/short_cid.py": ("tests/cli/test_artifacts_cli.py", "tests/cli/test_commands.py"),
    "core/suggestions.py": ("tests/core/test_suggestions.py",),
    "core/tagged.py": ("tests/core/test_tagged.py",),
    "core/text.py": ("tests/core/test_text.py",),
    # projections/authority
    "projections/authority/fold.py": (
        "tests/projections/test_authority.py", "tests/projections/test_authority_orders.py",
        "tests/projections/test_authority_vectors.py", "tests/replica/test_authority.py",
        "tests/projections/test_state.py",
    ),
    "projections/authority/stale.py": (
        "tests/projections/test_stale_decisions.py", "tests/projections/test_authority.py",
        "tests/projections/test_authority_orders.py",
        "tests/projections/test_authority_vectors.py", "tests/replica/test_authority.py",
    ),
    "projections/authority/values.py": (
        "tests/projections/test_authority.py", "tests/projections/test_authority_orders.py",
        "tests/projections/test_authority_vectors.py", "tests/replica/test_authority.py",
    ),
    # integrity
    "integrity/artifact_proofs.py": (
        "tests/integrity/test_artifact_evidence.py", "tests/integrity/test_evidence.py",
    ),
    "integrity/builders.py": (
        "tests/integrity/test_artifact_evidence.py", "tests/integrity/test_evidence.py",
        "tests/integrity/test_integrity_vectors.py",
    ),
    "integrity/checkpoint_proofs.py": ("tests/integrity/test_integrity_vectors.py",),
    "integrity/cosignature.py": (
        "tests/integrity/test_cosignature.py", "tests/integrity/test_integrity_vectors.py",
        "tests/cli/test_status.py", "tests/replica/test_checkpointing.py",
    ),
    "integrity/gossip.py": ("tests/integrity/test_gossip.py",),
    # server
    "server/gate.py": ("tests/server/test_gate.py", "tests/server/test_gate_process.py"),
    # sync
    "sync/responder.py": (
        "tests/sync/test_artifacts.py", "tests/sync/test_compacted.py", "tests/sync/test_local.py",
        "tests/sync/test_spool.py", "tests/sync/test_statements.py", "tests/sync/test_witnessed_sync.py",
    ),
    # store
    "store/base.py": (
        "tests/store/test_block_tables.py", "tests/store/test_contract.py",
        "tests/store/test_forget_tables.py", "tests/store/test_index_tables.py",
        "tests/store/test_witness_tables.py", "tests/replica/test_resume_cache.py",
    ),
    "store/memory.py": (
        "tests/store/test_contract.py", "tests/integrations/test_openai_agents_session.py",
        "tests/replica/test_artifacts.py",
    ),
    "store/memory_blocks.py": (
        "tests/store/test_contract.py", "tests/integrations/test_openai_agents_session.py",
        "tests/replica/test_artifacts.py",
    ),
    "store/memory_index.py": (
        "tests/store/test_contract.py", "tests/integrations/test_openai_agents_session.py",
        "tests/replica/test_artifacts.py",
    ),
    "store/memory_journal.py": (
        "tests/store/test_contract.py", "tests/integrations/test_openai_agents_session.py",
        "tests/replica/test_artifacts.py",
    ),
    "store/memory_witness.py": (
        "tests/store/test_contract.py", "tests/integrations/test_openai_agents_session.py",
        "tests/replica/test_artifacts.py",
    ),
    "store/postgres.py": (
        "tests/store/test_postgres.py", "tests/store/test_contract.py",
        "tests/replica/test_artifact_checks.py", "tests/replica/test_artifacts.py",
        "tests/replica/test_resume_cache.py", "tests/replica/test_turn_index.py",
    ),
    "store/rows.py": (
        "tests/store/test_block_tables.py", "tests/store/test_contract.py",
        "tests/store/test_forget_tables.py", "tests/store/test_postgres.py", "tests/store/test_sql_rows.py",
        "tests/store/test_sqlite.py",
    ),
    "store/sql_rows.py": ("tests/store/test_sql_rows.py",),
    "store/sqlite.py": (
        "tests/store/test_sqlite.py", "tests/store/test_sqlite_forget.py", "tests/store/test_contract.py",
        "tests/cli/test_commands.py", "tests/replica/test_verify_artifacts.py",
        "tests/server/test_members.py",
    ),
    # artifacts
    "artifacts/links.py": (
        "tests/replica/test_artifacts.py", "tests/store/test_contract.py",
        "tests/integrations/test_openai_agents_session.py", "tests/store/test_postgres.py",
        "tests/replica/test_artifact_checks.py", "tests/replica/test_resume_cache.py",
    ),
    # cli
    "cli/aliases.py": ("tests/cli/test_aliases.py",),
    "cli/artifacts.py": ("tests/cli/test_artifacts_cli.py",),
    "cli/authority.py": ("tests/cli/test_authority_cli.py",),
    "cli/car.py": ("tests/cli/test_car.py",),
    "cli/commands.py": ("tests/cli/test_commands.py",),
    "cli/compacted.py": (
        "tests/cli/test_conversation.py", "tests/integrations/test_langgraph_compaction.py",
        "tests/integrations/test_openai_agents_compaction.py",
    ),
    "cli/conversation.py": ("tests/cli/test_conversation.py", "tests/cli/test_commands.py"),
    "cli/demo.py": (
        "tests/cli/test_artifacts_cli.py", "tests/cli/test_commands.py", "tests/cli/test_conversation.py",
        "tests/cli/test_foreign_text.py", "tests/cli/test_import_cli.py", "tests/cli/test_listing.py",
    ),
    "cli/entry.py": (
        "tests/cli/test_entry.py", "tests/cli/test_commands.py", "tests/cli/test_completion.py",
        "tests/test_packaging.py",
    ),
    "cli/evidence.py": (
        "tests/integrity/test_evidence.py", "tests/integrity/test_artifact_evidence.py",
        "tests/cli/test_findings_cli.py",
    ),
    "cli/findings.py": ("tests/cli/test_findings_cli.py",),
    "cli/graph_view.py": ("tests/cli/test_graph_view.py",),
    "cli/hints.py": ("tests/cli/test_suggestions_cli.py",),
    "cli/home.py": ("tests/cli/test_commands.py", "tests/cli/test_sync_cli.py"),
    "cli/imports.py": ("tests/cli/test_import_cli.py",),
    "cli/inputs.py": (
        "tests/cli/test_commands.py", "tests/cli/test_sync_cli.py", "tests/cli/test_authority_cli.py",
    ),
    "cli/journal.py": (
        "tests/cli/test_status.py", "tests/cli/test_findings_cli.py", "tests/cli/test_sync_cli.py",
    ),
    "cli/listing.py": ("tests/cli/test_listing.py",),
    "cli/main.py": (
        "tests/cli/test_artifacts_cli.py", "tests/cli/test_commands.py", "tests/cli/test_conversation.py",
        "tests/cli/test_foreign_text.py", "tests/cli/test_import_cli.py", "tests/cli/test_listing.py",
    ),
    "cli/rooted.py": ("tests/cli/test_rooted_commands.py",),
    "cli/shared.py": (
        "tests/cli/test_artifacts_cli.py", "tests/cli/test_car.py", "tests/cli/test_conversation.py",
        "tests/cli/test_commands.py", "tests/cli/test_findings_cli.py", "tests/cli/test_foreign_text.py",
    ),
    "cli/status.py": ("tests/cli/test_status.py",),
    "cli/sync.py": (
        "tests/cli/test_sync_artifacts_cli.py", "tests/cli/test_sync_cli.py",
        "tests/cli/test_authority_cli.py",
    ),
    "cli/view.py": (
        "tests/viewer/test_browser.py", "tests/viewer/test_served.py",
        "tests/integrations/test_openai_agents_session.py",
    ),
    "cli/witness.py": ("tests/cli/test_witness_cli.py",),
    # (top)
    "errors.py": (
        "tests/artifacts/test_blocks.py", "tests/artifacts/test_diff.py", "tests/artifacts/test_put_get.py",
        "tests/cli/test_aliases.py", "tests/cli/test_authority_cli.py", "tests/cli/test_car.py",
    ),
    "graph.py": ("tests/test_graph.py",),
    # importers
    "importers/formats.py": (
        "tests/importers/test_import_jsonl.py", "tests/importers/test_import_langgraph.py",
        "tests/cli/test_import_cli.py",
    ),
    "importers/jsonl.py": ("tests/importers/test_import_jsonl.py", "tests/cli/test_import_cli.py"),
    "importers/langgraph.py": (
        "tests/importers/test_import_langgraph.py", "tests/importers/test_import_langgraph_thread.py",
    ),
    "importers/langgraph_thread.py": ("tests/importers/test_import_langgraph_thread.py",),
    "importers/openai_agents.py": ("tests/importers/test_import_openai_agents.py",),
    "importers/openai_agents_session.py": ("tests/importers/test_import_openai_agents_session.py",),
    "importers/report.py": ("tests/importers/test_import_jsonl.py", "tests/cli/test_import_cli.py"),
    "importers/writing.py": (
        "tests/importers/test_import_jsonl.py", "tests/importers/test_import_openai_agents.py",
        "tests/importers/test_import_langgraph.py", "tests/importers/test_import_resume_property.py",
    ),
    # integrations
    "integrations/_langgraph_cold.py": (
        "tests/integrations/test_langgraph_cold.py", "tests/integrations/test_langgraph_first_read.py",
    ),
    "integrations/_langgraph_deletes.py": (
        "tests/integrations/test_langgraph_delete.py", "tests/integrations/test_langgraph.py",
    ),
    "integrations/_langgraph_edits.py": ("tests/integrations/test_langgraph_edits.py",),
    "integrations/_langgraph_forks.py": (
        "tests/integrations/test_langgraph.py", "tests/integrations/test_langgraph_cold.py",
        "tests/integrations/test_langgraph_edits.py", "tests/integrations/test_langgraph_delete.py",
        "tests/integrations/test_langgraph_first_read.py", "tests/integrations/test_langgraph_property.py",
    ),
    "integrations/_langgraph_frames.py": (
        "tests/integrations/test_langgraph.py", "tests/integrations/test_langgraph_cold.py",
        "tests/integrations/test_langgraph_edits.py", "tests/integrations/test_langgraph_delete.py",
        "tests/integrations/test_langgraph_first_read.py", "tests/integrations/test_langgraph_property.py",
    ),
    "integrations/_langgraph_generations.py": (
        "tests/integrations/test_langgraph.py", "tests/integrations/test_langgraph_cold.py",
        "tests/integrations/test_langgraph_edits.py", "tests/integrations/test_langgraph_delete.py",
        "tests/integrations/test_langgraph_first_read.py", "tests/integrations/test_langgraph_property.py",
    ),
    "integrations/_langgraph_index.py": (
        "tests/integrations/test_langgraph_index.py", "tests/integrations/test_langgraph_delete.py",
    ),
    "integrations/_langgraph_index_state.py": ("tests/integrations/test_langgraph_index.py",),
    "integrations/_langgraph_lists.py": ("tests/integrations/test_langgraph_lists.py",),
    "integrations/_langgraph_mapping.py": (
        "tests/integrations/test_langgraph_edits.py", "tests/integrations/test_langgraph.py",
        "tests/integrations/test_langgraph_cold.py", "tests/integrations/test_langgraph_compaction.py",
        "tests/integrations/test_langgraph_conformance.py", "tests/integrations/test_langgraph_delete.py",
    ),
    "integrations/_langgraph_postings.py": (
        "tests/integrations/test_langgraph_index.py", "tests/integrations/test_langgraph_delete.py",
    ),
    "integrations/_langgraph_reads.py": (
        "tests/integrations/test_langgraph.py", "tests/integrations/test_langgraph_cold.py",
        "tests/integrations/test_langgraph_edits.py", "tests/integrations/test_langgraph_delete.py",
        "tests/integrations/test_langgraph_first_read.py", "tests/integrations/test_langgraph_property.py",
    ),
    "integrations/_langgraph_thread.py": (
        "tests/integrations/test_langgraph.py", "tests/integrations/test_langgraph_cold.py",
        "tests/integrations/test_langgraph_edits.py", "tests/integrations/test_langgraph_delete.py",
        "tests/integrations/test_langgraph_first_read.py", "tests/integrations/test_langgraph_property.py",
    ),
    "integrations/_langgraph_writes.py": (
        "tests/integrations/test_langgraph.py", "tests/integrations/test_langgraph_cold.py",
        "tests/integrations/test_langgraph_edits.py", "tests/integrations/test_langgraph_delete.py",
        "tests/integrations/test_langgraph_first_read.py", "tests/integrations/test_langgraph_property.py",
    ),
    "integrations/_large.py": (
        "tests/integrations/test_langchain_values.py", "tests/integrations/test_langgraph_first_read.py",
        "tests/integrations/test_langgraph_values.py", "tests/integrations/test_openai_agents_values.py",
    ),
    "integrations/_responses_items.py": (
        "tests/importers/test_import_openai_agents_session.py", "tests/integrations/test_openai_agents.py",
        "tests/integrations/test_openai_agents_compaction.py",
        "tests/integrations/test_openai_agents_session.py",
        "tests/integrations/test_openai_agents_session_file.py",
        "tests/integrations/test_openai_agents_values.py",
    ),
    "integrations/_session_file.py": (
        "tests/integrations/test_openai_agents_session_file.py",
        "tests/integrations/test_openai_agents_session.py",
    ),
    "integrations/_session_view.py": (
        "tests/integrations/test_openai_agents.py", "tests/integrations/test_openai_agents_compaction.py",
        "tests/integrations/test_openai_agents_session.py",
        "tests/integrations/test_openai_agents_session_file.py",
        "tests/integrations/test_openai_agents_values.py", "tests/integrations/test_concurrent_writers.py",
    ),
    "integrations/_store_fold.py": (
        "tests/integrations/test_langgraph_store.py", "tests/integrations/test_concurrent_writers.py",
    ),
    "integrations/langchain.py": (
        "tests/integrations/test_langchain.py", "tests/integrations/test_langchain_compaction.py",
        "tests/integrations/test_langchain_values.py", "tests/integrations/test_concurrent_writers.py",
    ),
    "integrations/langgraph.py": (
        "tests/integrations/test_langgraph.py", "tests/integrations/test_langgraph_cold.py",
        "tests/integrations/test_langgraph_compaction.py",
        "tests/integrations/test_langgraph_conformance.py", "tests/integrations/test_langgraph_delete.py",
        "tests/integrations/test_langgraph_docs.py",
    ),
    "integrations/langgraph_store.py": (
        "tests/integrations/test_langgraph_store.py", "tests/integrations/test_concurrent_writers.py",
    ),
    "integrations/openai_agents.py": (
        "tests/integrations/test_openai_agents.py", "tests/integrations/test_openai_agents_compaction.py",
        "tests/integrations/test_openai_agents_session.py",
        "tests/integrations/test_openai_agents_session_file.py",
        "tests/integrations/test_openai_agents_values.py", "tests/integrations/test_concurrent_writers.py",
    ),
    # projections
    "projections/authority_json.py": (
        "tests/projections/test_authority_json.py", "tests/projections/test_stale_decisions.py",
    ),
    "projections/index_rows.py": (
        "tests/replica/test_turn_index.py", "tests/store/test_forget_tables.py",
        "tests/store/test_index_tables.py", "tests/store/test_postgres.py", "tests/store/test_sql_rows.py",
        "tests/store/test_sqlite.py",
    ),
    "projections/message.py": (
        "tests/projections/providers/test_anthropic.py", "tests/projections/providers/test_gemini.py",
        "tests/projections/providers/test_openai_chat.py",
        "tests/projections/providers/test_openai_responses.py",
        "tests/projections/providers/test_package.py", "tests/projections/test_format_blocks.py",
    ),
    # projections/providers
    "projections/providers/_common.py": (
        "tests/importers/test_import_jsonl.py", "tests/projections/providers/test_anthropic.py",
        "tests/projections/providers/test_gemini.py", "tests/projections/providers/test_openai_chat.py",
        "tests/projections/providers/test_openai_responses.py",
    ),
    "projections/providers/anthropic.py": ("tests/projections/providers/test_anthropic.py",),
    "projections/providers/gemini.py": ("tests/projections/providers/test_gemini.py",),
    "projections/providers/openai_chat.py": ("tests/projections/providers/test_openai_chat.py",),
    "projections/providers/openai_responses.py": ("tests/projections/providers/test_openai_responses.py",),
    # projections
    "projections/request.py": (
        "tests/projections/test_request.py", "tests/cli/test_system_cli.py", "tests/test_system_prompt.py",
    ),
    "projections/resume.py": (
        "tests/projections/test_resume.py", "tests/projections/test_format_blocks.py",
        "tests/projections/test_request.py", "tests/cli/test_foreign_text.py",
        "tests/integrations/test_langchain.py", "tests/integrations/test_openai_agents.py",
    ),
    "projections/retention.py": ("tests/projections/test_retention.py", "tests/projections/test_surfaces.py"),
    "projections/state.py": (
        "tests/projections/test_state.py", "tests/projections/test_surfaces.py",
        "tests/projections/test_turn.py", "tests/projections/test_window.py", "tests/replica/test_reads.py",
        "tests/replica/test_resume_cache.py",
    ),
    "projections/surfaces.py": (
        "tests/projections/test_surfaces.py", "tests/projections/test_retention.py",
        "tests/projections/test_state.py",
    ),
    "projections/system.py": ("tests/test_system_prompt.py",),
    "projections/transcript.py": (
        "tests/projections/test_transcript.py", "tests/projections/test_request.py",
        "tests/projections/test_resume.py", "tests/projections/test_state.py",
        "tests/projections/test_window.py", "tests/cli/test_car.py",
    ),
    "projections/turn.py": (
        "tests/projections/test_turn.py", "tests/projections/providers/test_anthropic.py",
        "tests/projections/providers/test_gemini.py", "tests/projections/providers/test_openai_chat.py",
        "tests/projections/providers/test_openai_responses.py", "tests/projections/test_format_blocks.py",
    ),
    "projections/window.py": ("tests/projections/test_window.py",),
    # replica
    "replica/artifact_checks.py": ("tests/replica/test_artifact_checks.py",),
    "replica/artifacts.py": ("tests/replica/test_artifacts.py",),
    "replica/checkpointing.py": ("tests/replica/test_checkpointing.py",),
    "replica/checkpoints.py": ("tests/replica/test_facade.py", "tests/cli/test_commands.py"),
    "replica/code.py": ("tests/replica/test_code.py",),
    "replica/collector.py": ("tests/replica/test_collector.py",),
    "replica/drafts.py": (
        "tests/integrations/test_langgraph_edits.py", "tests/integrations/test_langgraph_store.py",
        "tests/integrations/test_concurrent_writers.py", "tests/replica/test_facade.py",
        "tests/cli/test_commands.py",
    ),
    "replica/facade.py": ("tests/replica/test_facade.py", "tests/cli/test_commands.py"),
    "replica/folds.py": (
        "tests/replica/test_facade.py", "tests/cli/test_commands.py", "tests/replica/test_turn_index.py",
        "tests/test_system_prompt.py", "tests/replica/test_views.py",
    ),
    "replica/forget.py": ("tests/replica/test_forget.py",),
    "replica/home.py": ("tests/integrations/test_langgraph_delete.py",),
    "replica/intake.py": ("tests/replica/test_facade.py", "tests/cli/test_commands.py"),
    "replica/migration.py": ("tests/replica/test_migration.py",),
    "replica/reads.py": ("tests/replica/test_reads.py",),
    "replica/resume_cache.py": ("tests/replica/test_resume_cache.py",),
    "replica/turn_index.py": ("tests/replica/test_turn_index.py", "tests/test_system_prompt.py"),
    "replica/verify.py": ("tests/replica/test_verify_artifacts.py",),
    "replica/views.py": ("tests/replica/test_views.py",),
    "replica/witness_policy.py": (
        "tests/replica/test_witness_policy.py", "tests/replica/test_checkpointing.py",
        "tests/server/test_witness.py",
    ),
    "replica/witnessing.py": ("tests/replica/test_witnessing.py",),
    "replica/writes.py": ("tests/replica/test_facade.py", "tests/cli/test_commands.py"),
    # server
    "server/app.py": (
        "tests/server/test_app.py", "tests/server/test_costs.py", "tests/server/test_gate.py",
        "tests/server/test_load.py", "tests/server/test_openapi.py",
        "tests/server/test_postgres_instances.py",
    ),
    "server/artifacts.py": ("tests/server/test_artifact_lookup.py", "tests/sync/test_artifact_scope.py"),
    "server/events.py": (
        "tests/server/test_app.py", "tests/server/test_costs.py", "tests/server/test_gate.py",
        "tests/server/test_load.py", "tests/server/test_openapi.py",
        "tests/server/test_postgres_instances.py",
    ),
    "server/identity.py": (
        "tests/server/test_app.py", "tests/server/test_costs.py", "tests/server/test_gate.py",
        "tests/server/test_load.py", "tests/server/test_openapi.py",
        "tests/server/test_postgres_instances.py",
    ),
    "server/listener.py": ("tests/server/test_listener.py", "tests/test_packaging.py"),
    "server/members.py": ("tests/server/test_members.py",),
    "server/pg_nonces.py": (
        "tests/server/test_gate.py", "tests/server/test_postgres_instances.py", "tests/sync/test_faults.py",
        "tests/test_packaging.py",
    ),
    "server/reads.py": (
        "tests/server/test_app.py", "tests/server/test_costs.py", "tests/server/test_gate.py",
        "tests/server/test_load.py", "tests/server/test_openapi.py",
        "tests/server/test_postgres_instances.py",
    ),
    "server/shell.py": (
        "tests/server/test_app.py", "tests/server/test_costs.py", "tests/server/test_gate.py",
        "tests/server/test_load.py", "tests/server/test_openapi.py",
        "tests/server/test_postgres_instances.py",
    ),
    "server/sync_endpoint.py": (
        "tests/server/test_app.py", "tests/server/test_costs.py", "tests/server/test_gate.py",
        "tests/server/test_load.py", "tests/server/test_openapi.py",
        "tests/server/test_postgres_instances.py",
    ),
    "server/witness.py": (
        "tests/server/test_witness.py", "tests/server/test_witness_routes.py",
        "tests/integrity/test_any_lie_is_found.py",
    ),
    # sync
    "sync/artifact_exchange.py": (
        "tests/sync/test_artifact_scope.py", "tests/sync/test_artifacts.py", "tests/sync/test_compacted.py",
        "tests/sync/test_fates.py", "tests/sync/test_faults.py", "tests/sync/test_http.py",
    ),
    "sync/artifact_scope.py": ("tests/sync/test_artifact_scope.py",),
    "sync/car.py": (
        "tests/sync/test_car.py", "tests/sync/test_car_artifacts.py", "tests/sync/test_car_interop.py",
        "tests/cli/test_car.py",
    ),
    "sync/car_summary.py": (
        "tests/cli/test_car.py", "tests/sync/test_artifacts.py", "tests/sync/test_artifacts_large.py",
        "tests/sync/test_car_artifacts.py",
    ),
    "sync/carfile.py": (
        "tests/sync/test_artifacts.py", "tests/sync/test_artifacts_large.py",
        "tests/sync/test_car_artifacts.py",
    ),
    "sync/deadline.py": ("tests/sync/test_deadline.py", "tests/sync/test_initiator.py"),
    "sync/http.py": (
        "tests/sync/test_http.py", "tests/sync/test_compacted.py", "tests/sync/test_fates.py",
        "tests/sync/test_faults.py", "tests/sync/test_killed_artifacts.py",
        "tests/sync/test_killed_server.py",
    ),
    "sync/initiator.py": (
        "tests/sync/test_initiator.py", "tests/sync/test_artifacts.py", "tests/sync/test_compacted.py",
        "tests/sync/test_fates.py", "tests/sync/test_faults.py", "tests/sync/test_http.py",
    ),
    "sync/initiator_session.py": (
        "tests/sync/test_initiator.py", "tests/sync/test_artifacts.py", "tests/sync/test_compacted.py",
        "tests/sync/test_fates.py", "tests/sync/test_faults.py", "tests/sync/test_http.py",
    ),
    "sync/keyset.py": (
        "tests/sync/test_keyset.py", "tests/sync/test_artifacts.py", "tests/sync/test_protocol.py",
        "tests/sync/test_reconcile.py", "tests/sync/test_statements.py", "tests/sync/test_sync_vectors.py",
    ),
    "sync/live.py": ("tests/viewer/test_badges.py",),
    "sync/local.py": (
        "tests/sync/test_local.py", "tests/sync/test_artifacts.py", "tests/sync/test_artifacts_large.py",
        "tests/sync/test_car_artifacts.py", "tests/sync/test_killed_server.py",
        "tests/sync/test_statements.py",
    ),
    "sync/peer.py": (
        "tests/sync/test_artifacts.py", "tests/sync/test_compacted.py", "tests/sync/test_fates.py",
        "tests/sync/test_faults.py", "tests/sync/test_http.py", "tests/sync/test_killed_artifacts.py",
    ),
    "sync/pins.py": ("tests/sync/test_pins.py",),
    "sync/reports.py": (
        "tests/sync/test_initiator.py", "tests/sync/test_artifacts.py", "tests/sync/test_compacted.py",
        "tests/sync/test_fates.py", "tests/sync/test_faults.py", "tests/sync/test_http.py",
    ),
    "sync/spool.py": ("tests/sync/test_spool.py",),
    "sync/statements.py": ("tests/sync/test_statements.py",),
    "sync/varint.py": ("tests/sync/test_car.py", "tests/cli/test_car.py", "tests/server/test_costs.py"),
    "sync/verify.py": (
        "tests/sync/test_http.py", "tests/sync/test_compacted.py", "tests/sync/test_fates.py",
        "tests/sync/test_faults.py", "tests/sync/test_killed_artifacts.py",
        "tests/sync/test_killed_server.py",
    ),
    "sync/witness_client.py": ("tests/replica/test_checkpointing.py", "tests/server/test_witness.py"),
    "sync/witness_hooks.py": (
        "tests/cli/test_sync_artifacts_cli.py", "tests/cli/test_sync_cli.py",
        "tests/cli/test_authority_cli.py", "tests/sync/test_initiator.py", "tests/sync/test_artifacts.py",
        "tests/sync/test_compacted.py",
    ),
    # viewer
    "viewer/app.py": (
        "tests/viewer/test_badges.py", "tests/viewer/test_browser.py", "tests/viewer/test_code_browser.py",
        "tests/viewer/test_hostile.py", "tests/viewer/test_served.py", "tests/test_packaging.py",
    ),
    "viewer/code.py": ("tests/viewer/test_code.py", "tests/viewer/test_code_browser.py"),
    "viewer/layout.py": ("tests/viewer/test_layout.py",),
    "viewer/links.py": ("tests/viewer/test_links.py",),
    "viewer/sessions.py": ("tests/viewer/test_sessions.py", "tests/viewer/test_badges.py"),
    "viewer/views.py": ("tests/viewer/test_code.py",),
}
KILLED = {"killed", "timeout", "segfault"}


def _slug(module: str) -> str:
    return module.removesuffix(".py").replace("/", "-")


def _select(names: list[str]) -> list[str]:
    """MODULES keys for command-line names: `core/record.py`, `core/record`, or a package `core`."""
    chosen: list[str] = []
    for name in names:
        bare = name.removeprefix("src/").removeprefix("convgraph/").rstrip("/")
        found = [m for m in MODULES if bare in (m, m.removesuffix(".py")) or m.startswith(bare + "/")]
        if not found:
            raise SystemExit(f"unknown module {name!r}; known: {', '.join(MODULES)}")
        chosen += [m for m in found if m not in chosen]
    return chosen


def _prepare(module: str) -> Path:
    folder = WORK / _slug(module)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    # mutmut copies src/, tests/ (and docs/, which tests read) into mutants/ itself and reads
    # its settings from the pyproject.toml of the folder it runs in: the project's own, plus
    # this module's section
    for name in ("src", "tests", "docs", "README.md"):
        (folder / name).symlink_to(ROOT / name)
    settings = {
        "source_paths": ["src"],
        "also_copy": ["docs", "README.md"],
        "only_mutate": [f"src/convgraph/{module}"],
        "pytest_add_cli_args": ["-p", "no:xdist", "-p", "no:cacheprovider"],
        "pytest_add_cli_args_test_selection": list(MODULES[module]),
    }
    lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    (folder / "pyproject.toml").write_text(
        (ROOT / "pyproject.toml").read_text() + "\n[tool.mutmut]\n" + "\n".join(lines) + "\n"
    )
    return folder


def _mutmut(folder: Path, *args: str, log: Path | None = None) -> str:
    """mutmut's output; with `log`, streamed there as it runs (its progress line included)."""
    with open(log or os.devnull, "w") as sink:
        out = subprocess.run(
            [str(MUTMUT), *args], cwd=folder, text=True, check=False,
            stdout=sink if log else subprocess.PIPE, stderr=subprocess.STDOUT,
        )
    text = log.read_text() if log else out.stdout
    if out.returncode != 0:
        tail = "\n".join(text.replace("\r", "\n").splitlines()[-30:])
        raise SystemExit(f"mutmut {' '.join(args)} failed in {folder}:\n{tail}")
    return text


def _change(diff: str) -> tuple[str, str]:
    """The removed and the added lines of a mutant's diff, stripped: stable across line shifts."""
    lines = diff.splitlines()
    removed = [x[1:].strip() for x in lines if x.startswith("-") and not x.startswith("---")]
    added = [x[1:].strip() for x in lines if x.startswith("+") and not x.startswith("+++")]
    return "\n".join(removed), "\n".join(added)


def _equivalents() -> list[dict[str, str]]:
    entries: list[dict[str, str]] = tomllib.loads(EQUIVALENTS.read_text()).get("equivalent", [])
    return entries


def _why_equivalent(module: str, name: str, diff: str, known: list[dict[str, str]]) -> str | None:
    function = name.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[-1]
    removed, added = _change(diff)
    for entry in known:
        if [entry[k] for k in ("module", "function", "from", "to")] == [module, function, removed, added]:
            return entry["why"]
    return None


def _collect(module: str, folder: Path, command: str) -> dict[str, Any]:
    statuses = dict(
        line.strip().rsplit(": ", 1)
        for line in _mutmut(folder, "results", "--all", "true").splitlines()
        if line.startswith("    ")
    )
    known = _equivalents()
    survivors = []
    for name, status in sorted(statuses.items()):
        if status in KILLED:
            continue
        diff = _mutmut(folder, "show", name).partition("\n")[2]
        why = _why_equivalent(module, name, diff, known)
        survivors.append({"name": name, "status": status, "diff": diff, "equivalent": why})
    summary = {
        "module": module,
        "tests": list(MODULES[module]),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "mutmut": version("mutmut"),
        "mutants": len(statuses),
        "killed": sum(s in KILLED for s in statuses.values()),
        "equivalent": sum(s["equivalent"] is not None for s in survivors),
        "survivors": survivors,
    }
    (folder / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def _rejudge(summary: dict[str, Any]) -> dict[str, Any]:
    """A stored summary with its survivors judged against the equivalents listed now."""
    known = _equivalents()
    for x in summary["survivors"]:
        x["equivalent"] = _why_equivalent(summary["module"], x["name"], x["diff"], known)
    summary["equivalent"] = sum(x["equivalent"] is not None for x in summary["survivors"])
    return summary


def _rate(s: dict[str, Any]) -> float:
    judged = s["mutants"] - s["equivalent"]
    return 100.0 * s["killed"] / judged if judged else 100.0


def _row(s: dict[str, Any]) -> str:
    survived = s["mutants"] - s["killed"] - s["equivalent"]
    return (f"| {s['module']} | {s['mutants']} | {s['killed']} | {s['equivalent']} | {survived} "
            f"| {_rate(s):.1f}% |")


def _print(summaries: list[dict[str, Any]], *, diffs: bool) -> None:
    print("| module | mutants | killed | equivalent | survived | kill rate (non-equivalent) |")
    print("|---|---:|---:|---:|---:|---:|")
    for s in summaries:
        print(_row(s))
    for s in summaries:
        live = [x for x in s["survivors"] if x["equivalent"] is None]
        if live:
            print(f"\n## {s['module']}: {len(live)} surviving mutant(s)\n")
        for x in live:
            print(f"{x['name']} ({x['status']})")
            if diffs:
                print(re.sub(r"(?m)^", "    ", x["diff"].rstrip()))
    equivalent = [(s["module"], x) for s in summaries for x in s["survivors"] if x["equivalent"]]
    if equivalent and not diffs:
        print("\n## Equivalent mutants\n")
    for module, x in equivalent if not diffs else ():
        removed, added = (" / ".join(part.splitlines()) for part in _change(x["diff"]))
        print(f"* {module} `{x['name'].rsplit('.', 1)[-1]}`: `{removed}` → `{added}`: {x['equivalent']}")


def check() -> list[str]:
    """What MODULES names that does not exist: a module under src/convgraph or a test file."""
    missing = [f"src/convgraph/{m}" for m in MODULES if not (ROOT / "src" / "convgraph" / m).is_file()]
    missing += sorted({t for tests in MODULES.values() for t in tests if not (ROOT / t).is_file()})
    return missing


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("modules", nargs="*", help="modules under src/convgraph (default: all of MODULES)")
    parser.add_argument("--report", action="store_true", help="print the last results; run nothing")
    parser.add_argument("--check", action="store_true",
                        help="fail if a module or test file MODULES names does not exist; run nothing")
    args = parser.parse_args()
    if args.check:
        missing = check()
        if missing:
            raise SystemExit("MODULES names what does not exist:\n  " + "\n  ".join(missing))
        tests = {t for v in MODULES.values() for t in v}
        print(f"{len(MODULES)} modules, {len(tests)} test files: all exist")
        return
    modules = _select(args.modules) if args.modules else list(MODULES)
    if args.report:
        found = [WORK / _slug(m) / "summary.json" for m in modules]
        _print([_rejudge(json.loads(p.read_text())) for p in found if p.exists()], diffs=False)
        return
    jobs = os.environ.get("MUTATE_JOBS", "2")
    summaries = []
    for module in modules:
        folder = _prepare(module)
        print(f"== {module}: mutmut against {' '.join(MODULES[module])}", flush=True)
        command = f"MUTATE_JOBS={jobs} scripts/mutate {module}"
        _mutmut(folder, "run", "--max-children", jobs, log=folder / "mutmut.log")
        summaries.append(_collect(module, folder, command))
        print(_row(summaries[-1]), flush=True)
    _print(summaries, diffs=True)


if __name__ == "__main__":
    main()
