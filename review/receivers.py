"""Review's receivers of tools' signals (connected in ReviewConfig.ready)."""

from __future__ import annotations

import logging

from django.dispatch import receiver

from tools.signals import server_listed

log = logging.getLogger(__name__)


@receiver(server_listed, dispatch_uid="review.record_surface")
def record_surface(sender, server, info, user_id=None, **kwargs) -> None:
    """After a refresh (in the worker): list the rest of the surface and store it if it changed.
    Never raises: the refresh itself succeeded."""
    from review import surface

    if surface.is_quiet():
        return
    try:
        lists = surface.fetch_lists(server, user_id)
        surface.record(server, surface.canonical(info, lists["resources"], lists["templates"], lists["prompts"]),
                       by_id=user_id, source="refresh")
    except Exception:  # noqa: BLE001 - logged; the next refresh tries again
        log.exception("could not record the surface of server %s", server.pk)
