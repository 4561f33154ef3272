"""The failback's pure parts: the copy's anchors, the translation anchors, the recorded state,
and the copy loop's offset syncs (with fakes for the clusters' reader and writer)."""

from __future__ import annotations

from types import SimpleNamespace

from mm2spec.live.types import FailoverState
from mm2spec.mm2.records import OffsetSync
from mm2spec.ops.modules import reverse
from mm2spec.ops.modules.reverse import BackPartition, Copied, anchors, translation_anchors

PART = BackPartition("orders", 0, dr_start=100, topic="orders", source_start=130)


def test_the_copy_start_is_always_an_anchor_and_older_copies_syncs_are_ignored():
    syncs = [(40, 40), (100, 130), (150, 180), (90, 500)]
    assert anchors(PART, syncs) == [(100, 130), (150, 180)]
    assert anchors(PART, []) == [(100, 130)]


def test_translation_anchors_turn_the_forward_syncs_around_before_the_switch():
    forward = [(10, 10), (60, 61), (129, 99), (140, 120)]  # (source, DR); the last is after the switch
    found = translation_anchors(PART, forward, [(150, 180)], rebuilt=False)
    assert found == [(10, 10), (61, 60), (99, 129), (100, 130), (150, 180)]
    # A rebuilt topic's offsets changed: only the copy's own anchors hold.
    assert translation_anchors(PART, forward, [(150, 180)], rebuilt=True) == [(100, 130), (150, 180)]


def test_the_failing_back_state_round_trips_through_json():
    state = FailoverState("f", "failing-back", "unplanned", "primary", "dr", 1, 2,
                          (("orders", 0, -1, "orders", 100),), "spec", (("orders", 0, 100, "orders", 130),), "keep", 42, True)
    assert FailoverState.from_json(state.to_json()) == state
    # A record written before failback existed reads back with no failback positions.
    old = state.to_json()
    del old["failback"], old["stranded"], old["reverseSyncsFrom"], old["forwardRestarted"]
    assert FailoverState.from_json(old).failback == ()


class _Writer:
    def __init__(self):
        self.sent: list = []

    def send_message(self, topic, partition, message):
        self.sent.append((topic, partition, message.offset()))

    def send_raw(self, topic, key, value, partition=0):
        self.sent.append(OffsetSync.from_record(key, value))


def _messages(offsets):
    """Stand-ins for the client's messages: only what the copy reads of them."""
    return [SimpleNamespace(offset=lambda o=o: o) for o in offsets]


def test_the_copy_writes_a_sync_at_its_start_at_each_gap_and_every_lag_max_records():
    writer, syncs = _Writer(), _Writer()
    result = Copied(PART, before=0, dr_end=112)
    ctx = SimpleNamespace(progress=lambda _text: None)
    flow = SimpleNamespace(name="f", source="primary", target="dr", separator=".")
    # DR offsets 100..104, a transaction marker at 105, then 106..111.
    reverse._copy_partition(ctx, flow, result, _messages([100, 101, 102, 103, 104, 106, 107, 108, 109, 110, 111]),
                            writer, syncs, lag_max=4)
    assert [s[2] for s in writer.sent] == [100, 101, 102, 103, 104, 106, 107, 108, 109, 110, 111]
    assert [(s.upstream_offset, s.downstream_offset) for s in syncs.sent] == [(100, 130), (104, 134), (106, 135),
                                                                              (110, 139)]
    assert result.now == 11 and result.dr_next == 112


def test_a_dr_offset_in_the_copy_lands_by_the_anchors_gaps_and_ends_included():
    anchors_in_copy = [(100, 130), (106, 135)]  # DR offset 105 is a transaction marker
    assert [reverse.copied_offset(PART, anchors_in_copy, o, 150) for o in (100, 103, 105, 106, 110)] == \
        [130, 133, 135, 135, 139]
    assert reverse.copied_offset(PART, anchors_in_copy, 130, 150) == 150  # trailing markers: the source's end
    assert reverse.copied_offset(PART, [(100, 130)], 100, 130) == 130  # nothing copied yet
