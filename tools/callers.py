"""Who started a tool call, as tools sees it: an opaque context, and the hooks a caller registers.

Why: the apps above tools (chat) start calls and want to hear about them, but tools must not
know them (no import, no model, no task or event name of theirs), or each app's code and
migrations depend on the other's. So a caller hands `start_tool_call` a `Caller`, stored on the
row as plain columns (`owner`, `caller`) and one JSON (`context`), and tools reads only these:

- `key` (the `caller` column, indexed): how the caller finds its calls again, e.g.
  "conversation:12". Tools never parses it.
- `owner`: the user whose calls they are besides the one who asked (a conversation's owner):
  they may read and act on them (`ToolCallQuerySet.visible_to` / `acted_on_by`).
- `model`: the model whose tokenizer counts the call's tokens (tools/mcp/tokens.py).
- `groups`: the caller's Channels groups that hear the call's events too.
- `refs`: ids the caller wants in the call's JSON (every event and API answer); a call started
  from this call's view (tools/widgets.py) keeps them. `local_refs`: the same, for this call
  only (the turn that asked for it: a call a view makes later belongs to no turn).

Visibility beyond owner and requester (a conversation shared with the team) changes after the
call was made, so it cannot be copied onto the row: the caller registers a function that
returns the extra rows a user may read (`register_visibility`), which tools ORs in. A
denormalised `shared` column would have to be kept in step by every path that changes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

_visibility: list[Callable[[Any], Q]] = []
_ref_names: list[str] = []
_links: list[Callable[[Any], "tuple[str, str] | None"]] = []
_view_states: list[Callable[[Any], "dict[str, Any] | None"]] = []


@dataclass(frozen=True)
class Caller:
    """What a caller tells tools about a call it starts (see the module docstring)."""

    key: str = ""
    owner_id: int | None = None
    model: str = ""
    groups: tuple[str, ...] = ()
    refs: dict[str, Any] = field(default_factory=dict)
    local_refs: dict[str, Any] = field(default_factory=dict)

    def row_fields(self) -> dict[str, Any]:
        """The ToolCall columns that hold this caller."""
        context: dict[str, Any] = {}
        if self.model:
            context["model"] = self.model
        if self.groups:
            context["groups"] = list(self.groups)
        if self.refs:
            context["refs"] = dict(self.refs)
        if self.local_refs:
            context["local_refs"] = dict(self.local_refs)
        return {"caller": self.key, "owner_id": self.owner_id, "context": context}


def of_call(call) -> Caller:
    """The caller of a call made from `call`'s view: the same caller, without `local_refs`."""
    context = call.context or {}
    return Caller(key=call.caller, owner_id=call.owner_id, model=context.get("model", ""),
                  groups=tuple(context.get("groups", ())), refs=dict(context.get("refs", {})))


def model(call) -> str:
    return (call.context or {}).get("model", "")


def groups(context: dict[str, Any] | None) -> list[str]:
    return list((context or {}).get("groups", ()))


def refs_json(call) -> dict[str, Any]:
    """The caller's ids for the call's JSON: every registered name (None when unset), then the call's own."""
    context = call.context or {}
    data: dict[str, Any] = dict.fromkeys(_ref_names)
    data.update(context.get("refs", {}))
    data.update(context.get("local_refs", {}))
    return data


def register_refs(*names: str) -> None:
    """Names every call's JSON carries (None for a call whose caller set none), so the shape is fixed."""
    for name in names:
        if name not in _ref_names:
            _ref_names.append(name)


def register_visibility(extra: Callable[[Any], Q]) -> None:
    """`extra(user)` returns the calls a user may read beyond their own and their owner's (see the docstring)."""
    if extra not in _visibility:
        _visibility.append(extra)


def visible_q(user) -> Q:
    """Calls `user` may read: asked for, owned, or let in by a registered caller."""
    q = Q(requested_by=user) | Q(owner=user)
    for extra in _visibility:
        q |= extra(user)
    return q


def register_link(link: Callable[[Any], "tuple[str, str] | None"]) -> None:
    """`link(call)` gives (url, label) of the page of the call's caller (a conversation), or None."""
    if link not in _links:
        _links.append(link)


def link(call) -> tuple[str, str] | None:
    """Where the call's caller is shown (the workbench links to it), if a registered caller says."""
    for each in _links:
        if (found := each(call)) is not None:
            return found
    return None


def register_view_state(state: Callable[[Any], "dict[str, Any] | None"]) -> None:
    """`state(call)` gives what the caller kept of the call's App view (a conversation's model
    context: `content`, `structured`, `widget_state`), or None."""
    if state not in _view_states:
        _view_states.append(state)


def view_state(call) -> dict[str, Any] | None:
    """The state a registered caller kept of the call's view (the view gets it back when it mounts)."""
    for each in _view_states:
        if (found := each(call)) is not None:
            return found
    return None
