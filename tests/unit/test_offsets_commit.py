"""The commit step's rule and its words: a group is never moved backwards unless asked
(--allow-rewind); one that read on past the translation after an earlier run is left there and the
message says so without contradicting itself."""

from __future__ import annotations

from types import SimpleNamespace

from mm2spec.ops.modules.offsets import _changes, _commit_outcome

FLOW = SimpleNamespace(name="north-to-hub")
TRANSLATED = {("north.orders", 0): 43, ("north.orders", 1): 10, ("north.orders", 2): 7}


def ctx(*, allow_rewind=False, check=False):
    return SimpleNamespace(options=SimpleNamespace(allow_rewind=allow_rewind, check=check))


def outcome(current, **options):
    changes, kept = _changes(ctx(**options), "app", TRANSLATED, current)
    return changes, _commit_outcome(ctx(**options), FLOW, "hub", "app", changes, kept, current)


def test_a_group_that_read_on_is_left_ahead_and_the_message_says_so():
    changes, result = outcome({("north.orders", 0): 44, ("north.orders", 1): 10, ("north.orders", 2): 7})
    assert changes == {} and result.status == "ok"
    assert result.message == ("app: left ahead of the translated offsets, where it has read to: "
                              "north.orders-0 at 44 (translated 43) (--allow-rewind moves it back)")
    assert "already at" not in result.message


def test_partly_ahead_commits_the_rest_and_names_what_it_left():
    changes, result = outcome({("north.orders", 0): 44, ("north.orders", 1): 3})
    assert changes == {("north.orders", 1): 10, ("north.orders", 2): 7}
    assert result.status == "changed" and result.message.startswith("app: committed 2 partitions; left ahead")
    assert [d[1:] for d in result.diff] == [("3", "10"), ("-", "7")]


def test_allow_rewind_moves_it_back_and_check_mode_says_would():
    changes, result = outcome({("north.orders", 0): 44, ("north.orders", 1): 10, ("north.orders", 2): 7},
                              allow_rewind=True, check=True)
    assert changes == {("north.orders", 0): 43}
    assert result.message == "app: would commit 1 partition"


def test_already_there_is_said_plainly():
    _changes_, result = outcome(dict(TRANSLATED))
    assert result.status == "ok" and result.message == "app: already at the translated offsets"
