"""Approval and drift: the approved version's hash is pinned; any later surface that hashes
differently is drift. With the server's `withhold_changed` on, the tools added or changed since the
approved version are marked withheld (tools.Tool.withheld) and chat does not offer them."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from review import diff
from review.models import ServerReview, SurfaceVersion
from tools.models import Server, Tool

WITHHELD_REASON = "Changed since the approved version of its server; withheld until someone approves the new version."


@dataclass
class DriftState:
    approved: SurfaceVersion | None
    latest: SurfaceVersion | None
    withhold: bool

    @property
    def drifted(self) -> bool:
        """A version was approved and the latest surface is another."""
        return bool(self.approved and self.latest and self.latest.hash != self.approved.hash)

    @property
    def changed_tools(self) -> list[str]:
        if not self.drifted:
            return []
        return sorted(diff.changed_tools(self.approved.surface, self.latest.surface))


def state(server: Server) -> DriftState:
    review = ServerReview.objects.filter(server=server).select_related("approved").first()
    latest = SurfaceVersion.objects.filter(server=server).order_by("-number").first()
    approved = review.approved if review else None
    return DriftState(approved, latest, bool(review and review.withhold_changed))


def apply(server: Server) -> list[str]:
    """Mark the tools drift withholds, clear the rest; the names withheld."""
    current = state(server)
    names = current.changed_tools if current.withhold else []
    Tool.objects.filter(server=server).exclude(name__in=names).exclude(withheld="").update(withheld="")
    if names:
        Tool.objects.filter(server=server, name__in=names).update(withheld=WITHHELD_REASON)
    return names


def approve(version: SurfaceVersion, user) -> ServerReview:
    """Pin `version` as the server's approved surface (its findings with it) and lift what drift withheld."""
    review, _ = ServerReview.objects.get_or_create(server=version.server)
    review.approved, review.approved_hash = version, version.hash
    review.approved_by = user if (user is not None and user.pk) else None
    review.approved_at = timezone.now()
    review.save()
    apply(version.server)
    return review


def set_withhold(server: Server, on: bool) -> list[str]:
    review, _ = ServerReview.objects.get_or_create(server=server)
    review.withhold_changed = on
    review.save(update_fields=["withhold_changed"])
    return apply(server)
