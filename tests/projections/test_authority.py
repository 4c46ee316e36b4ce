"""The authority projection: one named test per attack of docs/authority.md §1, and the answers."""

from __future__ import annotations

import pytest

from convgraph.core.hlc import Hlc
from convgraph.core.record import sign_record
from convgraph.errors import (
    AuthorityError,
    BranchOriginError,
    FloatingDecisionError,
    ForgedMergeError,
    RetractionTargetError,
)
from convgraph.projections import authority as au
from projections.authority_world import OWNER, STRANGER, T0, A, B, C, World

ALL = ("admin", "decide", "merge", "read", "review", "write")


def team() -> World:
    """The owner, admin A (everything), admin B (admin, read, write), writer C."""
    w = World()
    w.grant(OWNER, A, *ALL)
    w.grant(OWNER, B, "admin", "read", "write")
    w.grant(A, C, "read", "write")
    return w


# --- writing at all -------------------------------------------------------------------------


def test_a_stranger_cannot_write_into_a_conversation() -> None:
    w = team()
    with pytest.raises(AuthorityError) as caught:
        w.say(STRANGER, "the team agreed to ship")
    assert caught.value.capability == "write"
    assert "convgraph why" in str(caught.value)


def test_the_owner_and_granted_writers_can_write_and_the_answer_cites_the_chain() -> None:
    w = team()
    w.say(OWNER)
    w.say(C)
    answer = w.who_can(C, "write")
    grant_a = w.records[1].cid
    grant_c = w.records[3].cid
    assert answer.allowed and answer.chain == (w.genesis.cid, grant_a, grant_c)
    assert w.who_can(OWNER, "admin").chain == (w.genesis.cid,)


def test_a_reader_without_write_cannot_write() -> None:
    w = team()
    w.grant(OWNER, STRANGER, "read")
    with pytest.raises(AuthorityError):
        w.say(STRANGER)
    assert w.who_can(STRANGER, "read").allowed


# --- delegation -----------------------------------------------------------------------------


def test_a_grant_beyond_the_granters_own_capabilities_is_rejected() -> None:
    w = team()
    with pytest.raises(AuthorityError) as caught:
        w.grant(B, C, "decide")  # B holds admin, read, write: not decide
    assert caught.value.capability == "decide"


def test_a_self_grant_by_a_non_admin_is_rejected() -> None:
    w = team()
    with pytest.raises(AuthorityError) as caught:
        w.grant(C, C, "admin", "read", "write")
    assert caught.value.capability == "admin"


def test_a_grant_cannot_outlive_the_granters_own() -> None:
    w = World()
    w.grant(OWNER, A, "admin", "read", "write", expires_ms=T0 + 10_000)
    with pytest.raises(AuthorityError):
        w.grant(A, C, "read", "write")  # no expiry: longer than A's own
    w.grant(A, C, "read", "write", expires_ms=T0 + 5_000)


def test_an_expired_grant_used_after_expiry_is_rejected() -> None:
    w = World()
    w.grant(OWNER, C, "read", "write", expires_ms=T0 + 100)
    w.say(C, wall=T0 + 50)
    with pytest.raises(AuthorityError):
        w.say(C, wall=T0 + 100)  # judged by the record's own HLC
    assert not w.who_can(C, "write", at_ms=T0 + 100).allowed
    assert w.who_can(C, "write", at_ms=T0 + 100).reason == "expired"
    assert w.who_can(C, "write", at_ms=T0 + 99).until == T0 + 100


def test_no_grant_or_revocation_may_name_the_owner() -> None:
    w = team()
    with pytest.raises(AuthorityError):
        w.revoke(A, OWNER, "admin")
    with pytest.raises(AuthorityError):
        w.grant(A, OWNER, "write")


# --- revocation -----------------------------------------------------------------------------


def test_a_revoked_key_cannot_write_after_seeing_its_revocation() -> None:
    w = team()
    revocation = w.revoke(OWNER, C, "write")
    with pytest.raises(AuthorityError) as caught:
        w.say(C)
    assert caught.value.blocked_by == (str(revocation.cid),)
    assert w.who_can(C, "read").allowed and not w.who_can(C, "write").allowed


def test_a_revoked_key_writing_with_old_parents_is_excluded_and_reported() -> None:
    w = team()
    before = w.heads()
    revocation = w.revoke(OWNER, C, "read")
    late = w.say(C, "sneaky", parents=before)  # C never saw its revocation: accepted at ingest
    assert w.excluded() == {late.cid: "revoked_concurrently"}
    (entry,) = au.excluded(w.state)
    assert entry.causes == (revocation.cid,)


def test_what_a_key_wrote_before_its_revocation_stays() -> None:
    w = team()
    said = w.say(C)
    w.revoke(OWNER, C, "read")
    assert said.cid not in w.excluded()


def test_a_re_grant_after_the_revocation_restores_but_a_concurrent_one_does_not() -> None:
    w = team()
    before = w.heads()
    w.revoke(OWNER, C, "read")
    concurrent = w.grant(A, C, "read", "write", parents=before)  # A had not seen it
    assert not w.who_can(C, "write").allowed
    assert concurrent.cid not in w.excluded()  # the grant itself is valid, only cut
    w.grant(OWNER, C, "read", "write")  # made after seeing the revocation
    assert w.who_can(C, "write").allowed


def test_two_admins_revoking_each_other_concurrently_both_lose_admin() -> None:
    w = team()
    before = w.heads()
    w.revoke(A, B, "admin")
    w.revoke(B, A, "admin", parents=before)
    assert not w.who_can(A, "admin").allowed
    assert not w.who_can(B, "admin").allowed
    assert w.excluded() == {}  # neither revocation voids the other
    assert w.who_can(OWNER, "admin").allowed


def test_a_revoked_admin_revoking_others_with_old_parents_has_no_effect() -> None:
    w = team()
    before = w.heads()
    removal = w.revoke(OWNER, B, "admin")
    spite = w.revoke(B, C, "read", parents=before)
    assert w.excluded() == {spite.cid: "revoker_revoked"}
    assert w.who_can(C, "write").allowed
    assert removal.cid in dict.fromkeys(au.excluded(w.state)[0].causes)


def test_a_sock_puppet_of_a_concurrently_revoked_admin_is_excluded_with_all_it_did() -> None:
    w = team()
    before = w.heads()
    w.revoke(OWNER, B, "admin")
    puppet_grant = w.grant(B, STRANGER, "admin", "read", "write", parents=before)
    puppet_says = w.say(STRANGER, "I am legit", parents=(puppet_grant.cid,))
    puppet_revokes = w.revoke(STRANGER, C, "read", parents=(puppet_grant.cid,))
    assert w.excluded() == {
        puppet_grant.cid: "revoked_concurrently",
        puppet_says.cid: "grant_excluded",
        puppet_revokes.cid: "revoker_revoked",
    }
    assert w.who_can(C, "write").allowed
    assert not w.who_can(STRANGER, "read").allowed


def test_a_grant_cycle_cannot_keep_a_revoked_admin_alive() -> None:
    w = World()
    w.grant(OWNER, A, "admin", "read", "write")
    w.grant(A, B, "admin", "read", "write")
    w.grant(B, A, "admin", "read", "write")  # a second chain for A, through B
    before = w.heads()
    w.revoke(OWNER, A, "read")
    w.revoke(OWNER, B, "read")
    w.grant(B, A, "admin", "read", "write", parents=before)  # B re-grants A with old parents
    assert not w.who_can(A, "read").allowed
    assert not w.who_can(B, "read").allowed


def test_three_admins_revoking_in_a_cycle_leave_all_three_admins() -> None:
    w = World()
    for k in (A, B, C):
        w.grant(OWNER, k, "admin", "read", "write")
    before = w.heads()
    ua = w.revoke(A, B, "admin", parents=before)
    ub = w.revoke(B, C, "admin", parents=before)
    uc = w.revoke(C, A, "admin", parents=before)
    assert w.excluded() == {ua.cid: "revoker_revoked", ub.cid: "revoker_revoked",
                            uc.cid: "revoker_revoked"}
    assert all(w.who_can(k, "admin").allowed for k in (A, B, C))


# --- the graph kinds ------------------------------------------------------------------------


def branched(w: World) -> tuple[object, object]:
    root = w.say(OWNER, "main")
    fork = w.write(OWNER, "branch", {"name": "exp", "from": root.cid})
    work = w.write(C, "agent_message", {"content": "branch work"}, branch="exp")
    return fork, work


def test_a_merge_of_a_branch_that_does_not_exist_is_forged() -> None:
    w = team()
    w.say(OWNER)
    with pytest.raises(ForgedMergeError):
        w.write(A, "merge", {"branch": "nosuchbranch", "heads": sorted(w.heads()), "accepted": [],
                             "content": "the team agreed to ship"})


def test_a_merge_naming_heads_not_in_its_past_is_forged() -> None:
    w = team()
    _, work = branched(w)
    ghost = World().say(OWNER, "elsewhere").cid
    with pytest.raises(ForgedMergeError):
        w.write(A, "merge", {"branch": "exp", "heads": sorted([*w.heads(), ghost]), "accepted": []})
    with pytest.raises(ForgedMergeError):
        w.write(A, "merge", {"branch": "exp", "heads": sorted(w.heads()), "accepted": [ghost]})
    w.write(A, "merge", {"branch": "exp", "heads": sorted(w.heads()), "accepted": [work.cid]})


def test_a_merge_by_an_author_without_merge_is_rejected() -> None:
    w = team()
    _, work = branched(w)
    with pytest.raises(AuthorityError) as caught:
        w.write(C, "merge", {"branch": "exp", "heads": sorted(w.heads()), "accepted": [work.cid]})
    assert caught.value.capability == "merge"


def test_a_branch_from_a_record_not_in_its_past_is_rejected() -> None:
    w = team()
    ghost = World().say(OWNER, "elsewhere").cid
    with pytest.raises(BranchOriginError):
        w.write(C, "branch", {"name": "x", "from": ghost})


def test_a_floating_decision_is_rejected() -> None:
    w = team()
    turn = w.say(C, "not a request")
    with pytest.raises(FloatingDecisionError):
        w.write(A, "decision", {"request": turn.cid, "choice": "ship"})


def test_a_decision_by_a_non_decider_is_rejected() -> None:
    w = team()
    ask = w.write(C, "decision_request", {"question": "ship?"})
    w.write(A, "decision", {"request": ask.cid, "choice": "no"})
    with pytest.raises(AuthorityError) as caught:
        w.write(C, "decision", {"request": ask.cid, "choice": "yes"})
    assert caught.value.capability == "decide"


def test_a_decision_without_the_reviews_its_request_asked_for_is_an_omitted_review() -> None:
    w = team()
    w.grant(OWNER, B, "review")
    ask = w.write(C, "decision_request", {"question": "ship?", "reviews": 1, "reviewers": [B.public]})
    hasty = w.write(A, "decision", {"request": ask.cid, "choice": "ship"})
    (finding,) = au.findings(w.state)
    assert finding.kind == "omitted_review" and finding.cid == hasty.cid
    assert finding.missing == (B.public,)
    w.write(B, "review_comment", {"target": ask.cid, "body": "lgtm", "verdict": "approve"})
    w.write(A, "decision", {"request": ask.cid, "choice": "ship"})
    assert [f.cid for f in au.findings(w.state)] == [hasty.cid]


def test_retracting_someone_elses_turn_needs_admin() -> None:
    w = team()
    turn = w.say(OWNER, "mine")
    with pytest.raises(AuthorityError) as caught:
        w.write(C, "retraction", {"target": turn.cid})
    assert caught.value.capability == "admin"
    w.write(A, "retraction", {"target": turn.cid})  # an admin may
    own = w.say(C, "oops")
    w.write(C, "retraction", {"target": own.cid})


def test_superseding_someone_elses_turn_is_refused_even_for_an_admin() -> None:
    w = team()
    turn = w.say(C, "mine")
    with pytest.raises(AuthorityError):
        w.write(A, "supersession", {"target": turn.cid, "content": "words in C's mouth"})
    ghost = World().say(OWNER, "elsewhere").cid
    with pytest.raises(RetractionTargetError):
        w.write(C, "retraction", {"target": ghost})


def test_members_list_every_capability_with_its_chain() -> None:
    w = team()
    members = au.members(w.state, w.heads(), T0 + 10**9)
    assert [a.capability for a in members[C.public]] == ["read", "write"]
    assert [a.capability for a in members[OWNER.public]] == list(ALL)
    assert STRANGER.public not in members


# --- found while building tests/vectors/authority.json ----------------------------------------


def test_two_geneses_by_the_owner_give_the_same_answers_in_any_order() -> None:
    # §2: the owner's own equivocation at seq 1 leaves authority unchanged, and §6.1: the order
    # records arrived in never shows. The chain cites the genesis in the use's own past.
    w = World()
    second = sign_record(OWNER, conv=w.conv, seq=1, hlc=Hlc(T0 + 50, 0), parents=(), kind="genesis",
                         payload={"nonce": w.genesis.payload["nonce"], "title": "again"})
    grant = sign_record(OWNER, conv=w.conv, seq=2, hlc=Hlc(second.hlc.wall_ms + 1, 0), parents=(second.cid,),
                        kind="grant", payload={"grantee": A.public, "rights": ["read", "write"]})
    heads = (w.genesis.cid, grant.cid)
    answers = []
    for order in ((w.genesis, second, grant), (second, grant, w.genesis)):
        state = au.AuthorityState()
        for record in order:
            au.check(state, record)
            au.apply(state, record)
        answers.append((au.who_can(state, A.public, "write", heads, T0 + 10**9),
                        au.who_can(state, OWNER.public, "admin", (grant.cid,), T0 + 10**9)))
    assert answers[0] == answers[1]
    assert answers[0][0].chain == (second.cid, grant.cid)  # the genesis in the grant's past
    assert answers[0][1].chain == (second.cid,)


def test_a_revocation_dropped_by_the_fixpoint_names_what_cut_it() -> None:
    # §6.2: `excluded` lists each record with the CIDs that cause it. The fixpoint of §6.1
    # drops every revocation in its first round; what cut it there is its cause, even when
    # that cutter is itself dropped (A's revocation of B, cut by the owner's of A).
    w = World()
    w.grant(OWNER, A, "admin", "read", "write")
    w.grant(A, B, "admin", "read", "write")
    w.grant(B, C, "read", "write")
    before = w.heads()
    u1 = w.revoke(OWNER, A, "admin", parents=before)
    u2 = w.revoke(A, B, "admin", parents=before)
    u3 = w.revoke(B, C, "read", parents=before)
    assert [(e.cid, e.reason, e.causes) for e in au.excluded(w.state)] == sorted(
        [(u2.cid, "revoker_revoked", (u1.cid,)), (u3.cid, "revoker_revoked", (u2.cid,))],
        key=lambda e: w.state.ancestry.nodes[e[0]].hlc)


def test_each_revocation_of_a_three_cycle_names_the_one_that_cut_it() -> None:
    w = World()
    for k in (A, B, C):
        w.grant(OWNER, k, "admin", "read", "write")
    before = w.heads()
    ua = w.revoke(A, B, "admin", parents=before)
    ub = w.revoke(B, C, "admin", parents=before)
    uc = w.revoke(C, A, "admin", parents=before)
    causes = {e.cid: e.causes for e in au.excluded(w.state)}
    assert causes == {ua.cid: (uc.cid,), ub.cid: (ua.cid,), uc.cid: (ub.cid,)}


def test_a_sock_puppets_revocation_names_the_excluded_grant_it_rested_on() -> None:
    # no revocation names the puppet: what voids its revocation is its excluded grant
    w = team()
    before = w.heads()
    w.revoke(OWNER, B, "admin")
    puppet_grant = w.grant(B, STRANGER, "admin", "read", "write", parents=before)
    puppet_revokes = w.revoke(STRANGER, C, "read", parents=(puppet_grant.cid,))
    causes = {e.cid: e.causes for e in au.excluded(w.state)}
    assert causes[puppet_revokes.cid] == (puppet_grant.cid,)
