"""The authority projection: one named test per attack of docs/authority.md §1, and the answers."""

from __future__ import annotations

import pytest

from convgraph.core.cid import CID
from convgraph.core.hlc import Hlc
from convgraph.core.keys import SigningKey, actor_text
from convgraph.core.record import Record, sign_record
from convgraph.core.rooted import conv_id
from convgraph.errors import (
    AuthorityError,
    BranchOriginError,
    FloatingDecisionError,
    ForgedMergeError,
    RetractionTargetError,
)
from convgraph.projections import authority as au
from convgraph.projections.authority.judge import judge_of
from projections.authority_world import OWNER, STRANGER, T0, A, B, C, D, World

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


# --- found by mutation testing (tests/MUTATION.md) ------------------------------------------


def in_canonical_order(w: World, *records: Record) -> tuple[CID, ...]:
    return tuple(r.cid for r in sorted(records, key=lambda r: r.order_key))


def revoked_twice() -> tuple[World, Record, Record]:
    """C's first grant is cut by two revocations; the owner's re-grant, made after the first,
    is cut by the second (A's, concurrent with it)."""
    w = team()
    u1 = w.revoke(OWNER, C, "write")
    seen_u1 = w.heads()
    w.grant(OWNER, C, "read", "write")  # a re-grant after seeing u1: u1 does not cut it
    u2 = w.revoke(A, C, "write", parents=seen_u1)  # A had not seen the re-grant
    return w, u1, u2


def test_an_ingest_refusal_names_the_record_its_author_and_every_revocation_in_its_way() -> None:
    w, u1, u2 = revoked_twice()
    blocked = in_canonical_order(w, u1, u2)
    assert sorted(blocked) != list(blocked)  # so that only the canonical order passes
    record = w.sign(C, "user_message", {"content": "hi"})
    with pytest.raises(AuthorityError) as caught:
        au.check(w.state, record)
    who = actor_text(C.public)
    revoked_by = ", ".join(map(str, blocked))
    assert caught.value.message == (
        f"{who} lacks `write` at this record's causal position (revoked by {revoked_by}); "
        f"`convgraph why {who} write --conv {w.conv}` shows the chain")
    assert caught.value.blocked_by == tuple(map(str, blocked))
    assert (caught.value.actor, caught.value.cid) == (who, str(record.cid))
    answer = w.who_can(C, "write")
    assert (answer.allowed, answer.blocked_by, answer.reason) == (False, blocked, "revoked")


def test_a_local_write_refusal_speaks_of_what_the_replica_holds() -> None:
    w, u1, u2 = revoked_twice()
    who = actor_text(C.public)
    with pytest.raises(AuthorityError) as caught:
        au.require(w.state, C.public, "user_message", {"content": "hi"}, heads=w.heads(), at_ms=T0 + 10**9)
    revoked_by = ", ".join(map(str, in_canonical_order(w, u1, u2)))
    assert caught.value.message == (f"{who} lacks `write` to write this here (revoked by {revoked_by}); "
                                    f"`convgraph why {who} write --conv {w.conv}` shows the chain")
    assert caught.value.cid is None
    with pytest.raises(AuthorityError) as caught:
        au.require(w.state, STRANGER.public, "user_message", {"content": "hi"}, heads=w.heads(), at_ms=T0)
    who = actor_text(STRANGER.public)
    assert caught.value.message == (
        f"{who} lacks `write` to write this here (no grant of it is in what this replica holds); "
        f"`convgraph why {who} write --conv {w.conv}` shows the chain")
    record = w.sign(STRANGER, "user_message", {"content": "hi"})
    with pytest.raises(AuthorityError) as caught:
        au.check(w.state, record)
    assert "at this record's causal position (no grant of it is in this record's causal past)" in str(
        caught.value)


def test_the_refusals_of_delegation_name_the_capability_the_author_and_the_record() -> None:
    w = team()
    for kind, payload in (("grant", {"grantee": OWNER.public, "rights": ["write"]}),
                          ("revocation", {"grantee": OWNER.public, "rights": ["admin"]})):
        record = w.sign(A, kind, payload)
        with pytest.raises(AuthorityError) as caught:
            au.check(w.state, record)
        assert caught.value.message == f"a {kind} cannot name the conversation's owner"
        assert (caught.value.capability, caught.value.actor, caught.value.cid) == (
            "admin", actor_text(A.public), str(record.cid))
    w = World()
    w.grant(OWNER, A, "admin", "read", "write", expires_ms=T0 + 10_000)
    record = w.sign(A, "grant", {"grantee": C.public, "rights": ["read", "write"]})
    with pytest.raises(AuthorityError) as caught:
        au.check(w.state, record)
    assert caught.value.message == f"the grant outlives the granter's own `admin` (until {T0 + 10_000} ms)"
    assert (caught.value.capability, caught.value.actor, caught.value.cid) == (
        "admin", actor_text(A.public), str(record.cid))


def test_a_counter_revocation_that_leaves_its_revokers_admin_alone_is_not_exempt() -> None:
    # §6.3 exempts only a revocation that closes `admin` (or `read`) of the one revoking it
    w = team()
    before = w.heads()
    removal = w.revoke(B, A, "admin", parents=before)
    spite = w.revoke(A, B, "write", parents=before)  # concurrent, but B keeps its admin
    assert w.excluded() == {spite.cid: "revoker_revoked"}
    assert au.excluded(w.state)[0].causes == (removal.cid,)


def test_an_admin_revoked_by_the_owner_and_a_peer_cannot_save_itself_by_revoking_the_peer() -> None:
    # §6.3: the peer's revocation is exempt for A's counter-revocation, the owner's is not
    w = team()
    before = w.heads()
    w.revoke(B, A, "admin", parents=before)
    by_owner = w.revoke(OWNER, A, "admin", parents=before)
    counter = w.revoke(A, B, "admin", parents=before)
    assert w.excluded() == {counter.cid: "revoker_revoked"}
    assert au.excluded(w.state)[0].causes == (by_owner.cid,)
    assert w.who_can(B, "admin").allowed and not w.who_can(A, "admin").allowed


def test_why_an_answer_is_no_and_that_a_yes_gives_no_reason() -> None:
    """§7: `revoked` (a revocation cut a grant of it), else `expired` (a grant of it, or of
    `read`, is in the past but expired), else `no grant`."""
    w = World()
    w.grant(OWNER, A, "review", expires_ms=T0 + 100)  # neither write nor read
    w.grant(OWNER, B, "write", expires_ms=T0 + 100)  # write, and read with it, but not listed
    w.grant(OWNER, C, "read")
    w.grant(OWNER, D, "read", expires_ms=T0 + 100)
    at = T0 + 1000

    def why(who: SigningKey, cap: str) -> str:
        answer = w.who_can(who, cap, at_ms=at)
        assert not answer.allowed and answer.blocked_by == ()
        return answer.reason

    assert why(STRANGER, "write") == "no grant"
    assert why(A, "write") == "no grant"  # an expired grant of something else says nothing
    assert why(A, "review") == "expired"
    assert why(A, "read") == "expired"  # every grant gives read
    assert why(B, "write") == "expired"
    assert why(C, "write") == "no grant"  # a live grant of read only
    assert why(D, "write") == "expired"  # an expired grant of read
    yes = w.who_can(C, "read", at_ms=at)
    assert yes.allowed and (yes.reason, yes.blocked_by) == ("", ())


def test_a_capability_lapses_with_its_own_grant_when_read_outlives_it() -> None:
    # §5.4 `until`: the earlier of the capability's own expiry and read's
    w = World()
    w.grant(OWNER, C, "read", "write", expires_ms=T0 + 500)
    w.grant(OWNER, C, "read")
    assert w.who_can(C, "write", at_ms=T0).until == T0 + 500
    assert w.who_can(C, "read", at_ms=T0).until is None
    assert w.who_can(C, "read", at_ms=T0 + 1000).allowed  # the first grant expired, not the second
    w.grant(OWNER, C, "review")
    assert w.who_can(C, "review", at_ms=T0).until is None


def test_the_owners_answer_without_heads_cites_the_earliest_genesis() -> None:
    w = World()
    second = sign_record(OWNER, conv=w.conv, seq=1, hlc=Hlc(T0 - 50, 0), parents=(), kind="genesis",
                         payload={"nonce": w.genesis.payload["nonce"], "title": "again"})
    au.apply(w.state, second)
    answer = au.who_can(w.state, OWNER.public, "admin", (), T0)
    assert answer.allowed and answer.chain == (second.cid,)


def test_a_record_stamped_at_wall_clock_zero_is_judged_like_any_other() -> None:
    # the judge remembers, per author, until when its answer holds; a stamp of 0 must not
    # read as "within" an answer it never gave
    conv = conv_id(OWNER.public, bytes(16))
    genesis = sign_record(OWNER, conv=conv, seq=1, hlc=Hlc(0, 0), parents=(), kind="genesis",
                          payload={"nonce": bytes(16)})
    state = au.apply(au.AuthorityState(), genesis)
    stranger = sign_record(STRANGER, conv=conv, seq=1, hlc=Hlc(0, 1), parents=(genesis.cid,),
                           kind="user_message", payload={"content": "first at zero"})
    with pytest.raises(AuthorityError):
        au.check(state, stranger)


def test_an_exclusion_names_every_revocation_that_cut_what_its_record_needs() -> None:
    # a grant needs admin and each right it gives: one revocation closes A's admin, another its review
    w = team()
    before = w.heads()
    u1 = w.revoke(OWNER, A, "admin", parents=before)
    u2 = w.revoke(OWNER, A, "review", parents=before)
    given_away = w.grant(A, D, "read", "review", parents=before)
    causes = in_canonical_order(w, u1, u2)
    assert sorted(causes) != list(causes)
    assert [(e.cid, e.reason, e.causes) for e in au.excluded(w.state)] == [
        (given_away.cid, "revoked_concurrently", causes)]


def test_a_puppets_exclusion_names_only_the_excluded_grants_it_rested_on_in_canonical_order() -> None:
    w = team()
    w.grant(OWNER, D, "admin", "read", "write")
    w.grant(OWNER, STRANGER, "read")  # a valid grant, but not of write
    before = w.heads()
    w.revoke(OWNER, B, "admin")
    w.revoke(OWNER, D, "admin")
    late = w.grant(D, STRANGER, "read", "write", parents=before)
    early = w.grant(B, STRANGER, "read", "write", parents=before, wall=late.hlc.wall_ms - 1)
    assert sorted([early.cid, late.cid]) != [early.cid, late.cid]
    says = w.say(STRANGER, "I am legit", parents=(late.cid, early.cid))
    causes = {e.cid: (e.reason, e.causes) for e in au.excluded(w.state)}
    assert causes[says.cid] == ("grant_excluded", (early.cid, late.cid))


def test_a_grant_that_outlives_what_its_granter_keeps_in_hindsight_is_excluded() -> None:
    # at ingest A's admin never expires (B's grant); in hindsight B's grant is excluded, and
    # the owner's, which expires, is all A has: A's grant without expiry outlives it (§5.2)
    w = World()
    w.grant(OWNER, B, "admin", "read", "write")
    expiring = w.grant(OWNER, A, "admin", "read", "write", expires_ms=T0 + 10**6)
    before = w.heads()
    w.revoke(OWNER, B, "admin")
    from_b = w.grant(B, A, "admin", "read", "write", parents=before)
    forever = w.grant(A, C, "read", "write", parents=(from_b.cid, expiring.cid))
    assert w.excluded() == {from_b.cid: "revoked_concurrently", forever.cid: "grant_excluded"}


def test_the_owners_records_are_authorized_the_genesis_first() -> None:
    w = team()
    said = w.say(OWNER)
    judge = judge_of(w.state)
    assert judge.authorized(w.genesis.cid) and judge.authorized(said.cid)


def test_a_revocation_that_came_after_a_record_does_not_hide_one_concurrent_with_it() -> None:
    w = team()
    before = w.heads()
    said = w.say(C, "hi")
    w.revoke(OWNER, C, "write")  # after seeing it: what was done before stays
    concurrent = w.revoke(A, C, "write", parents=before)
    assert [(e.cid, e.reason, e.causes) for e in au.excluded(w.state)] == [
        (said.cid, "revoked_concurrently", (concurrent.cid,))]


def test_check_judges_each_grant_and_revocation_on_its_own_payload() -> None:
    # `check` is a function of the state and the record: one that passed, not applied (yet),
    # leaves nothing behind that lets another through, even with the same author and needs
    w = World()
    w.grant(OWNER, A, "admin", "read", "write", expires_ms=T0 + 10_000)
    au.check(w.state, w.sign(A, "grant", {"grantee": C.public, "rights": ["read", "write"],
                                          "expires_ms": T0 + 5_000}))
    with pytest.raises(AuthorityError, match="outlives"):
        au.check(w.state, w.sign(A, "grant", {"grantee": D.public, "rights": ["read", "write"]}))
    au.check(w.state, w.sign(A, "revocation", {"grantee": C.public, "rights": ["write"]}))
    with pytest.raises(AuthorityError, match="cannot name the conversation's owner"):
        au.check(w.state, w.sign(A, "revocation", {"grantee": OWNER.public, "rights": ["write"]}))


def test_the_exclusions_follow_the_records_that_arrive() -> None:
    w = team()
    before = w.heads()
    late = w.say(C, "sneaky", parents=before)
    assert w.excluded() == {} and au.excluded(w.state) == ()
    w.revoke(OWNER, C, "read", parents=before)
    assert w.excluded() == {late.cid: "revoked_concurrently"}


def reviewed(reviews: int, reviewers: list[SigningKey], by: list[SigningKey]) -> tuple[World, Record]:
    """A request asking for `reviews` and `reviewers`, approved by `by`, then decided by A."""
    w = team()
    for k in (B, C, D):
        w.grant(OWNER, k, "read", "review")
    ask: dict[str, object] = {"question": "ship?", "reviews": reviews}
    if reviewers:
        ask["reviewers"] = sorted(k.public for k in reviewers)
    q = w.write(C, "decision_request", ask)
    for k in by:
        w.write(k, "review_comment", {"target": q.cid, "body": "lgtm", "verdict": "approve"})
    return w, w.write(A, "decision", {"request": q.cid, "choice": "ship"})


def test_a_count_of_reviews_alone_is_enforced_and_the_finding_says_how_many_came() -> None:
    w, d = reviewed(2, [], [B])
    (f,) = au.findings(w.state)
    assert (f.cid, f.missing, f.detail) == (d.cid, (), "1 of 2 reviews")
    w, d = reviewed(2, [], [B, D])
    assert au.findings(w.state) == ()


def test_a_named_reviewer_missing_is_a_finding_even_when_the_count_is_met() -> None:
    w, d = reviewed(1, [B], [D])
    (f,) = au.findings(w.state)
    assert (f.cid, f.missing, f.detail) == (d.cid, (B.public,), "named reviewers missing")


def test_a_findings_evidence_is_the_request_then_the_reviews_in_canonical_order() -> None:
    w = team()
    for k in (B, D):
        w.grant(OWNER, k, "read", "review")
    q = w.write(C, "decision_request", {"question": "ship?", "reviews": 3})
    seen_q = w.heads()
    second = w.write(D, "review_comment", {"target": q.cid, "body": "ok", "verdict": "approve"},
                     parents=seen_q)
    first = w.write(B, "review_comment", {"target": q.cid, "body": "ok", "verdict": "approve"},
                    parents=seen_q, wall=second.hlc.wall_ms - 1)
    assert sorted([first.cid, second.cid]) != [first.cid, second.cid]
    d = w.write(A, "decision", {"request": q.cid, "choice": "ship"})
    assert [(f.cid, f.evidence) for f in au.findings(w.state)] == [(d.cid, (q.cid, first.cid, second.cid))]


def test_an_excluded_decision_makes_no_finding_and_hides_no_later_one() -> None:
    w = team()
    w.grant(OWNER, B, "decide")
    q = w.write(C, "decision_request", {"question": "ship?", "reviews": 1})
    before = w.heads()
    w.revoke(OWNER, B, "decide")
    w.write(B, "decision", {"request": q.cid, "choice": "no"}, parents=before)  # excluded
    hasty = w.write(A, "decision", {"request": q.cid, "choice": "ship"})
    assert [f.cid for f in au.findings(w.state)] == [hasty.cid]


def test_members_and_the_authority_value_judge_expiry_at_their_clock() -> None:
    w = World()
    w.grant(OWNER, C, "read", "write", expires_ms=T0 + 100)
    assert [a.capability for a in au.members(w.state, w.heads(), T0 + 50)[C.public]] == ["read", "write"]
    assert C.public not in au.members(w.state, w.heads(), T0 + 100)
    view = au.Authority(w.conv, w.state, w.heads(), T0 + 50)
    assert view.who_can(C.public, "write").allowed
    assert not view.who_can(C.public, "write", at_ms=T0 + 100).allowed
    assert view.who_can(C.public, "write", at_ms=T0 + 60).until == T0 + 100
    assert set(view.members()) == {OWNER.public, C.public}
    later = au.Authority(w.conv, w.state, w.heads(), T0 + 100)
    assert not later.who_can(C.public, "write").allowed
    assert later.who_can(C.public, "write", at_ms=T0 + 99).allowed
    assert set(later.members()) == {OWNER.public}


def test_a_local_write_is_judged_on_its_kind_its_payload_and_the_clock() -> None:
    w = team()
    w.grant(OWNER, D, "read", "write", expires_ms=T0 + 10**6)
    own = w.say(C, "mine")

    def local(who: SigningKey, kind: str, payload: dict[str, object], at_ms: int = T0 + 1000) -> None:
        au.require(w.state, who.public, kind, payload, heads=w.heads(), at_ms=at_ms)

    local(C, "retraction", {"target": own.cid})  # its own record: write suffices
    with pytest.raises(AuthorityError) as caught:
        local(C, "decision", {"request": own.cid, "choice": "x"})
    assert caught.value.capability == "decide"
    local(D, "user_message", {"content": "hi"})
    with pytest.raises(AuthorityError):
        local(D, "user_message", {"content": "hi"}, at_ms=T0 + 10**6)
    with pytest.raises(AuthorityError, match="cannot name the conversation's owner"):
        local(A, "grant", {"grantee": OWNER.public, "rights": ["write"]})
    local(OWNER, "genesis", {"nonce": bytes(16)})  # only the owner's key derives the id: nothing to check


def test_pins_and_audits_are_the_authorized_ones_not_excluded_in_canonical_order() -> None:
    w = team()
    none_yet = au.Authority(w.conv, w.state, w.heads(), T0)
    assert (none_yet.pins(), none_yet.audits()) == ((), ())
    w.grant(OWNER, D, "read", "review")
    turn = w.say(C, "the approved snapshot")
    seen = w.heads()
    second = w.write(A, "pin", {"target": turn.cid}, parents=seen)
    first = w.write(OWNER, "pin", {"target": turn.cid, "note": "v1"}, parents=seen,
                    wall=second.hlc.wall_ms - 1)
    assert sorted([first.cid, second.cid]) != [first.cid, second.cid]
    w.revoke(OWNER, B, "admin")
    w.write(B, "pin", {"target": turn.cid}, parents=seen)  # B had not seen its revocation
    audit = w.write(D, "audit", {"target": turn.cid, "result": "pass"})
    view = au.Authority(w.conv, w.state, w.heads(), T0 + 10**9)
    assert [r.cid for r in view.pins()] == [first.cid, second.cid]
    assert [r.cid for r in view.audits()] == [audit.cid]


def test_a_decision_on_a_request_that_asks_for_no_review_hides_no_later_finding() -> None:
    w = team()
    free = w.write(C, "decision_request", {"question": "lunch?"})
    w.write(A, "decision", {"request": free.cid, "choice": "soup"})
    strict = w.write(C, "decision_request", {"question": "ship?", "reviews": 1})
    hasty = w.write(A, "decision", {"request": strict.cid, "choice": "ship"})
    assert [f.cid for f in au.findings(w.state)] == [hasty.cid]


def test_each_graph_rule_refusal_says_what_is_wrong_and_names_the_record() -> None:
    w = team()
    _, work = branched(w)
    long = "b" * 64 + "c" * 36  # names are cut at 64 characters in messages
    w.write(OWNER, "branch", {"name": long, "from": w.genesis.cid})
    turn = w.say(C, "not a request")
    ghost = World().say(OWNER, "elsewhere").cid
    heads = sorted(w.heads())
    cases: list[tuple[type[Exception], Record, str]] = [
        (ForgedMergeError, w.sign(A, "merge", {"branch": "d" * 70, "heads": heads, "accepted": []}),
         f"merge of branch {'d' * 64!r}, which is not in its causal past"),
        (ForgedMergeError, w.sign(A, "merge", {"branch": "exp", "heads": sorted([*heads, ghost]), "accepted": []}),
         "a merge's heads must be among its parents"),
        (ForgedMergeError, w.sign(A, "merge", {"branch": long, "heads": heads, "accepted": [work.cid]}),
         f"accepted record {work.cid} is not on branch {'b' * 64!r} in its past"),
        (BranchOriginError, w.sign(C, "branch", {"name": "x", "from": ghost}),
         "a branch's `from` must be in its causal past"),
        (FloatingDecisionError, w.sign(A, "decision", {"request": turn.cid, "choice": "ship"}),
         "a decision's request must be a decision_request in its past"),
        (RetractionTargetError, w.sign(C, "retraction", {"target": ghost}),
         "a retraction's target must be in its causal past"),
        (RetractionTargetError, w.sign(C, "supersession", {"target": ghost, "content": "x"}),
         "a supersession's target must be in its causal past"),
        (AuthorityError, w.sign(A, "supersession", {"target": turn.cid, "content": "words in C's mouth"}),
         "only a record's author may supersede it"),
    ]
    for error, record, says in cases:
        with pytest.raises(error) as caught:
            au.check(w.state, record)
        assert type(caught.value) is error
        assert (caught.value.message, caught.value.cid) == (says, str(record.cid))
    assert (caught.value.capability, caught.value.actor) == ("write", actor_text(A.public))


def test_an_authority_over_nothing_yet_has_no_owner_genesis_or_member() -> None:
    view = au.Authority(World().conv, au.AuthorityState(), (), T0)
    assert (view.owner, view.genesis, view.members(), view.excluded()) == (None, None, {}, ())
