"""The three roles of a team's users, and the one place a viewer is kept read-only.

- **viewer**: a member of the Django group "viewer" (and not staff). Reads the servers shared
  with the team and the conversations shared with the team; changes nothing.
- **member**: everyone else who signs in (the default): today's user.
- **admin**: Django staff (`is_staff`), with the staff powers it always had (stdio servers, the
  admin site for what their permissions allow; a superuser sees everything).

A group, not a new field: roles are then visible and editable in the admin like any Django
permission, and an OIDC sign-in can set them from the provider's groups (inspector/oidc.py).
"""

from __future__ import annotations

from django.contrib.auth.models import Group
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse

VIEWER = "viewer"
MEMBER = "member"
ADMIN = "admin"
ROLES = (VIEWER, MEMBER, ADMIN)
VIEWER_GROUP = "viewer"

READ_ONLY_MESSAGE = "Your account is a viewer: it can read shared servers and conversations but not change anything."
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def is_viewer(user) -> bool:
    """True for a signed-in, non-staff member of the "viewer" group (looked up once per user object)."""
    if user is None or not user.is_authenticated or user.is_staff:
        return False
    cached = getattr(user, "_inspector_is_viewer", None)
    if cached is None:
        cached = user.groups.filter(name=VIEWER_GROUP).exists()
        user._inspector_is_viewer = cached
    return cached


def role_of(user) -> str:
    """"admin", "viewer" or "member" for a signed-in user; "" for an anonymous one."""
    if user is None or not user.is_authenticated:
        return ""
    if user.is_staff:
        return ADMIN
    return VIEWER if is_viewer(user) else MEMBER


def can_change(user) -> bool:
    """May this user create or change anything (servers, calls, chats, tokens…)? Every role but viewer."""
    return user is not None and user.is_authenticated and not is_viewer(user)


def set_role(user, role: str) -> None:
    """Make `user` a viewer, a member or an admin (staff), saving what changed."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")
    group, _ = Group.objects.get_or_create(name=VIEWER_GROUP)
    if role == VIEWER:
        user.groups.add(group)
    else:
        user.groups.remove(group)
    staff = role == ADMIN
    if user.is_staff != staff:
        user.is_staff = staff
        user.save(update_fields=["is_staff"])
    user._inspector_is_viewer = role == VIEWER


class ViewerReadOnlyMiddleware:
    """Refuses every unsafe request (POST, PUT, PATCH, DELETE) of a viewer, pages and JSON API alike.

    One gate for the whole app rather than a check in each view: a view added later is covered
    without anyone remembering to. Signing out stays possible. WebSockets need no gate: the
    consumers only relay events to the browser and accept nothing from it.
    """

    ALLOWED_PATHS = ("logout",)

    def __init__(self, get_response):
        self.get_response = get_response
        self._allowed: tuple[str, ...] | None = None

    def _allowed_paths(self) -> tuple[str, ...]:
        if self._allowed is None:
            self._allowed = tuple(reverse(name) for name in self.ALLOWED_PATHS)
        return self._allowed

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if self._gated(request) and is_viewer(getattr(request, "user", None)):
            return refuse(request)
        return self.get_response(request)

    def _gated(self, request: HttpRequest) -> bool:
        return request.method not in SAFE_METHODS and request.path not in self._allowed_paths()


def refuse(request: HttpRequest) -> HttpResponse:
    """A 403 that says why: JSON for the API, the app's "Not allowed" page otherwise."""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": READ_ONLY_MESSAGE}, status=403)
    return render(request, "403.html", {"exception": READ_ONLY_MESSAGE}, status=403)


def role_context(request: HttpRequest) -> dict[str, object]:
    """Template context: `role` and `can_change`, so pages hide what a viewer may not do."""
    user = getattr(request, "user", None)
    return {"role": role_of(user), "can_change": can_change(user)}
