"""The report sections the offset modules contribute, and the facts they read them from: the
translations (each group's position per partition and what it costs, with their totals) that
``offsets.translate`` and ``failback.translate`` leave, and the RPO of an unplanned failover
(the last record mirrored per DR partition), and the silent losses (records deleted on the
source before they were mirrored, source topics recreated) that ``verify.loss``, ``verify.failover``
and ``failback.preflight`` find.
"""

from __future__ import annotations

from typing import Any, Mapping

from mm2spec.ops.modules.loss import DELETED, Loss
from mm2spec.ops.modules.translate import Translation

TRANSLATIONS = "translations"
"""The fact ``offsets.translate`` (and ``failback.translate``) leave for the commit and the report:
a list of ``Translation``."""
RPO = "rpo"
"""Unplanned failover: the last mirrored record per DR partition, for the report."""
LOSS = "loss"
"""The silent losses found (a list of ``loss.Loss``): by ``verify.loss``, ``verify.failover`` (a
planned failover's, after the commit) and ``failback.preflight`` (before DR's records go back)."""


def totals(translations: list[Translation]) -> dict[str, int]:
    """What the translations cost the groups, summed (untranslated partitions counted apart)."""
    known = [t for t in translations if t.dr_offset is not None]
    return {"groups": len({t.group for t in translations}), "partitions": len(translations),
            "skipped": sum(max(0, t.skipped) for t in known), "reread": sum(max(0, t.reread) for t in known),
            "mm2Reread": sum(t.mm2_reread or 0 for t in known),
            "untranslated": len(translations) - len(known),
            "unmirrored": sum(t.unmirrored for t in known)}


class TranslationsSection:
    """Every translated group partition and their totals (JSON ``translations`` and ``totals``)."""

    name = TRANSLATIONS

    def collect(self, facts: Mapping[str, Any]) -> list[Translation]:
        return facts.get(TRANSLATIONS, [])

    def to_json(self, translations: list[Translation]) -> dict[str, Any]:
        return {"translations": [t.to_json() for t in translations], "totals": totals(translations)}

    def text_lines(self, translations: list[Translation]) -> list[str]:
        if not translations:
            return []
        total = totals(translations)
        lines = ["", f"OFFSETS {total['groups']} groups, {total['partitions']} partitions: "
                     f"{total['skipped']} records skipped, {total['reread']} re-read "
                     f"(MM2's translation would re-read {total['mm2Reread']})"
                     + (f", {total['untranslated']} not translated" if total["untranslated"] else "")
                     + (f", {total['unmirrored']} consumed on the source but never mirrored"
                        if total["unmirrored"] else "")
                     + (f", {remote} on remote topics (active-active)" if (remote := _remote_count(translations))
                        else "")]
        for t in translations:
            target = "-" if t.dr_offset is None else t.dr_offset
            mm2 = t.mm2_reread if t.mm2_reread is not None else "-"
            lines.append(f"  {t.group} {t.topic}-{t.partition}: source {t.committed} -> dr {t.target_topic}-{t.partition} "
                         f"{target} ({t.method}{_remote_text(t)}, skipped {t.skipped}, re-read {t.reread}, MM2 {mm2})"
                         + (f" {t.note}" if t.note else ""))
        return lines

    def markdown_lines(self, translations: list[Translation]) -> list[str]:
        if not translations:
            return []
        total = totals(translations)
        lines = ["", f"**Offsets**: {total['groups']} groups, {total['partitions']} partitions, "
                     f"{total['skipped']} skipped, {total['reread']} re-read (MM2 would re-read {total['mm2Reread']})",
                 "", "| group | partition | source offset | DR offset | method | skipped | re-read | MM2 re-read |",
                 "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {t.group} | {t.topic}-{t.partition} | {t.committed} | "
                  f"{'-' if t.dr_offset is None else t.dr_offset} | {t.method}{_remote_text(t)} | {t.skipped} | {t.reread} | "
                  f"{'-' if t.mm2_reread is None else t.mm2_reread} |" for t in translations]
        return lines


def _remote_count(translations: list[Translation]) -> int:
    return sum(1 for t in translations if t.remote)


def _remote_text(t: Translation) -> str:
    """Active-active: which topic is the remote one (a reverse flow's copy, named after the original
    by DefaultReplicationPolicy: ``dr.orders``) and which the original (``orders``)."""
    if not t.remote:
        return ""
    copy, original = sorted((t.topic, t.target_topic), key=len, reverse=True)
    return f", remote topic {copy}: {t.remote}'s copy of {original}"


class RpoSection:
    """Unplanned failover: per DR partition the last mirrored record's timestamp and how many
    records it was behind (JSON ``rpo``)."""

    name = RPO

    def collect(self, facts: Mapping[str, Any]) -> list[dict]:
        return facts.get(RPO, [])

    def to_json(self, rpo: list[dict]) -> dict[str, Any]:
        return {"rpo": rpo}

    def text_lines(self, rpo: list[dict]) -> list[str]:
        if not rpo:
            return []
        return ["", "RPO (last record mirrored before the switch)"] + [
            f"  {r['topic']}-{r['partition']}: last mirrored record at {r['lastMirroredTimestamp']}"
            + (f", {r['recordsBehind']} records behind" if r.get("recordsBehind") is not None else "")
            for r in rpo]

    def markdown_lines(self, rpo: list[dict]) -> list[str]:
        if not rpo:
            return []
        return ["", "**RPO**", ""] + [f"- `{r['topic']}-{r['partition']}`: last mirrored record at "
                                      f"{r['lastMirroredTimestamp']}" for r in rpo]


TRANSLATIONS_SECTION = TranslationsSection()
"""Contributed by ``offsets.translate`` and ``failback.translate`` (first in the report)."""
RPO_SECTION = RpoSection()
"""Contributed by ``offsets.translate`` (an unplanned failover's RPO, after the translations)."""


class LossSection:
    """Records lost without a word: per source partition, those deleted before they were mirrored,
    and source topics recreated under the same name (JSON ``loss``)."""

    name = LOSS

    def collect(self, facts: Mapping[str, Any]) -> list[Loss]:
        return facts.get(LOSS, [])

    def to_json(self, losses: list[Loss]) -> dict[str, Any]:
        return {"loss": [loss.to_json() for loss in losses]}

    def text_lines(self, losses: list[Loss]) -> list[str]:
        if not losses:
            return []
        deleted = sum(loss.records or 0 for loss in losses if loss.kind == DELETED)
        return (["", f"SILENT LOSS {deleted} records deleted on the source before they were mirrored, "
                     f"{len({(loss.flow, loss.topic) for loss in losses if loss.kind != DELETED})} topics recreated"]
                + [f"  {loss.flow}: {loss.text()}" for loss in losses])

    def markdown_lines(self, losses: list[Loss]) -> list[str]:
        if not losses:
            return []
        return ["", "**Silent loss**", ""] + [f"- {loss.flow}: `{loss.where}`: {loss.text().split(': ', 1)[1]}"
                                             for loss in losses]


LOSS_SECTION = LossSection()
"""Contributed by ``verify.loss``, ``verify.failover`` and ``failback.preflight`` (after the RPO)."""
