"""Compare two surfaces (review/surface.py) into classified changes.

Every change says what changed, where (a path inside the surface), how it is classified
(breaking, risky or compatible) and by which rule (`RULES`: id → severity and the reason). Input
schemas are compared as a caller sees them (a parameter that becomes required breaks callers);
output schemas as a consumer of the result sees them (a property that may now be missing breaks
consumers). Schemas are read as servers write JSON Schema 2020-12: local `$ref`s (`#/$defs/…`,
`#/definitions/…`) are followed, `anyOf`/`oneOf` members and `type` lists make a set of types,
`additionalProperties: false` closes an object.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass, field
from typing import Any

BREAKING, RISKY, COMPATIBLE = "breaking", "risky", "compatible"
ORDER = {BREAKING: 0, RISKY: 1, COMPATIBLE: 2}

# rule id → (severity, why). The ids appear in the text, JSON and JUnit outputs.
RULES: dict[str, tuple[str, str]] = {
    "tool-removed": (BREAKING, "callers and conversations that use it fail"),
    "tool-added": (COMPATIBLE, "nothing that worked stops working"),
    "input-parameter-removed": (BREAKING, "callers that send it may be refused or ignored"),
    "input-parameter-added-required": (BREAKING, "callers that do not send it are refused"),
    "input-parameter-added-optional": (COMPATIBLE, "callers may leave it out"),
    "input-made-required": (BREAKING, "callers that leave it out are refused"),
    "input-made-optional": (COMPATIBLE, "every call that worked still works"),
    "input-type-narrowed": (BREAKING, "values that were accepted are refused"),
    "input-type-widened": (COMPATIBLE, "every value that was accepted still is"),
    "input-type-changed": (BREAKING, "values that were accepted are refused"),
    "input-enum-values-removed": (BREAKING, "callers that send a removed value are refused"),
    "input-enum-values-added": (COMPATIBLE, "every value that was accepted still is"),
    "input-closed": (BREAKING, "additionalProperties is now false: extra arguments are refused"),
    "input-opened": (COMPATIBLE, "extra arguments are now accepted"),
    "input-constraint-tightened": (BREAKING, "values that were accepted are refused"),
    "input-constraint-loosened": (COMPATIBLE, "every value that was accepted still is"),
    "output-schema-added": (COMPATIBLE, "results now declare their structure"),
    "output-schema-removed": (RISKY, "consumers relying on structuredContent lose its contract"),
    "output-property-removed": (BREAKING, "consumers that read it find nothing"),
    "output-made-optional": (BREAKING, "consumers that read it may find nothing"),
    "output-property-added": (COMPATIBLE, "consumers may ignore it"),
    "output-made-required": (COMPATIBLE, "consumers get more, never less"),
    "output-type-widened": (BREAKING, "consumers may get values they do not handle"),
    "output-type-narrowed": (COMPATIBLE, "consumers get a subset of what they handled"),
    "output-type-changed": (BREAKING, "consumers get values they do not handle"),
    "output-enum-values-added": (BREAKING, "consumers may get values they do not handle"),
    "output-enum-values-removed": (COMPATIBLE, "consumers get a subset of what they handled"),
    "output-opened": (RISKY, "results may carry properties consumers did not expect"),
    "output-closed": (COMPATIBLE, "results carry no unexpected properties"),
    "output-constraint-loosened": (RISKY, "results may be outside what consumers expected"),
    "output-constraint-tightened": (COMPATIBLE, "results stay within what consumers expected"),
    "read-only-dropped": (RISKY, "readOnlyHint dropped: the tool may now change things"),
    "destructive-added": (RISKY, "destructiveHint added: the tool may now destroy things"),
    "idempotent-dropped": (RISKY, "idempotentHint dropped: calling it twice may now differ"),
    "open-world-added": (RISKY, "openWorldHint added: the tool now reaches outside systems"),
    "annotation-changed": (COMPATIBLE, "a hint changed in the safe direction or a label changed"),
    "description-changed": (RISKY, "descriptions steer the model: review the new text"),
    "parameter-description-changed": (RISKY, "descriptions steer the model: review the new text"),
    "title-changed": (COMPATIBLE, "a display label"),
    "task-required": (BREAKING, "execution.taskSupport is now required: clients without tasks cannot call it"),
    "meta-changed": (COMPATIBLE, "_meta changed (App view binding, visibility, vendor keys)"),
    "visibility-changed": (RISKY, "who may call the tool (model, App view) changed"),
    "instructions-changed": (RISKY, "server instructions are sent to the model: review the new text"),
    "server-info-changed": (COMPATIBLE, "name or version the server reports"),
    "capability-removed": (BREAKING, "clients that use it fail"),
    "capability-added": (COMPATIBLE, "nothing that worked stops working"),
    "capability-changed": (COMPATIBLE, "a capability's options changed"),
    "item-removed": (BREAKING, "clients that read or use it fail"),
    "item-added": (COMPATIBLE, "nothing that worked stops working"),
    "item-changed": (COMPATIBLE, "a listed field changed"),
    "prompt-argument-removed": (BREAKING, "clients that send it may be refused"),
    "prompt-argument-added-required": (BREAKING, "clients that do not send it are refused"),
    "prompt-argument-added-optional": (COMPATIBLE, "clients may leave it out"),
    "prompt-argument-made-required": (BREAKING, "clients that leave it out are refused"),
    "token-cost": (COMPATIBLE, "what the surface costs the model per request"),
}


@dataclass
class Change:
    rule: str
    subject: str  # "tool search", "prompt greet", "server"
    path: str  # where inside the subject: "inputSchema.properties.limit"
    detail: str
    before: Any = None
    after: Any = None
    text_diff: list[tuple[str, str]] | None = None

    @property
    def severity(self) -> str:
        return RULES[self.rule][0]

    @property
    def why(self) -> str:
        return RULES[self.rule][1]

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(severity=self.severity, why=self.why)
        if self.text_diff is None:
            data.pop("text_diff")
        return data


@dataclass
class SurfaceDiff:
    changes: list[Change] = field(default_factory=list)
    tokens_before: int | None = None
    tokens_after: int | None = None

    @property
    def worst(self) -> str | None:
        real = [c for c in self.changes if c.rule != "token-cost"]
        return min((c.severity for c in real), key=ORDER.__getitem__, default=None)

    def count(self, severity: str) -> int:
        return sum(1 for c in self.changes if c.severity == severity and c.rule != "token-cost")

    def as_json(self) -> dict[str, Any]:
        return {"worst": self.worst, "tokens_before": self.tokens_before, "tokens_after": self.tokens_after,
                "counts": {s: self.count(s) for s in ORDER}, "changes": [c.as_json() for c in self.changes]}


def text_diff(before: str, after: str) -> list[tuple[str, str]]:
    """A word-level diff: [("=", text), ("-", removed), ("+", added)], whitespace kept."""
    a, b = re.split(r"(\s+)", before or ""), re.split(r"(\s+)", after or "")
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(("=", "".join(a[i1:i2])))
        else:
            if i2 > i1:
                out.append(("-", "".join(a[i1:i2])))
            if j2 > j1:
                out.append(("+", "".join(b[j1:j2])))
    return out


# --- JSON Schema --------------------------------------------------------------------------------

ALL_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})


def _resolve(node: Any, root: dict, seen: tuple = ()) -> Any:
    """Follow a local `$ref` (JSON pointer into the schema's root); unknown or cyclic refs stay as they are."""
    while isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#"):
        ref = node["$ref"]
        if ref in seen:
            return {k: v for k, v in node.items() if k != "$ref"}
        seen = (*seen, ref)
        target: Any = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            return {k: v for k, v in node.items() if k != "$ref"}
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        node = {**target, **siblings}  # 2020-12: keywords beside $ref apply too
    return node


def _members(node: dict) -> list[Any]:
    return [m for key in ("anyOf", "oneOf") for m in node.get(key) or [] if isinstance(node.get(key), list)]


def type_set(node: Any, root: dict, seen: tuple = ()) -> frozenset[str] | None:
    """The JSON types a schema accepts, or None for any. `integer` is kept apart from `number`
    (comparison treats number ⊇ integer)."""
    node = _resolve(node, root, seen)
    if node is True or node == {} or not isinstance(node, dict):
        return None if node is not False else frozenset()
    declared = node.get("type")
    types: frozenset[str] | None = None
    if isinstance(declared, str):
        types = frozenset({declared})
    elif isinstance(declared, list):
        types = frozenset(t for t in declared if isinstance(t, str))
    members = _members(node)
    if members:
        union: set[str] = set()
        for m in members:
            t = type_set(m, root, seen)
            if t is None:
                union = set(ALL_TYPES)
                break
            union |= t
        types = frozenset(union) if types is None else types & frozenset(union)
    if types is None and ("enum" in node or "const" in node):
        values = node.get("enum") if isinstance(node.get("enum"), list) else [node.get("const")]
        types = frozenset(_json_type(v) for v in values)
    return types


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _expand(types: frozenset[str] | None) -> frozenset[str]:
    types = ALL_TYPES if types is None else types
    return types | {"integer"} if "number" in types else types


def _enum(node: Any, root: dict) -> list[Any] | None:
    node = _resolve(node, root)
    if not isinstance(node, dict):
        return None
    if isinstance(node.get("enum"), list):
        return list(node["enum"])
    if "const" in node:
        return [node["const"]]
    members = _members(node)
    if members:
        values: list[Any] = []
        for m in members:
            e = _enum(m, root)
            if e is None:
                return None
            values.extend(e)
        return values
    return None


def _object_parts(node: dict, root: dict) -> tuple[dict[str, Any], set[str], Any]:
    """Properties, required names and additionalProperties of an object schema (its own and its
    object anyOf/oneOf/allOf members' properties together)."""
    props: dict[str, Any] = dict(node.get("properties") or {}) if isinstance(node.get("properties"), dict) else {}
    required = set(r for r in node.get("required") or [] if isinstance(r, str))
    for m in [*_members(node), *(node.get("allOf") or [])]:
        m = _resolve(m, root)
        if isinstance(m, dict) and isinstance(m.get("properties"), dict):
            for k, v in m["properties"].items():
                props.setdefault(k, v)
            if m in (node.get("allOf") or []) or "allOf" in node:
                required |= set(r for r in m.get("required") or [] if isinstance(r, str))
    return props, required, node.get("additionalProperties", True)


TIGHTER_IF_RAISED = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
TIGHTER_IF_LOWERED = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")


class _SchemaWalk:
    """Compare two schemas of one tool; `side` is "input" or "output"."""

    def __init__(self, subject: str, side: str, root_b: dict, root_a: dict, changes: list[Change]) -> None:
        self.subject, self.side, self.root_b, self.root_a, self.changes = subject, side, root_b, root_a, changes

    def add(self, rule: str, path: str, detail: str, before: Any = None, after: Any = None, diff=None) -> None:
        self.changes.append(Change(rule, self.subject, path, detail, before, after, diff))

    def walk(self, b: Any, a: Any, path: str, depth: int = 0) -> None:
        if depth > 12:
            return
        b, a = _resolve(b, self.root_b), _resolve(a, self.root_a)
        if not isinstance(b, dict) or not isinstance(a, dict):
            if b != a:
                self.add(f"{self.side}-type-changed", path, "schema changed", b, a)
            return
        s = self.side
        tb, ta = type_set(b, self.root_b), type_set(a, self.root_a)
        if tb != ta:
            eb, ea = _expand(tb), _expand(ta)
            shown_b, shown_a = sorted(tb) if tb is not None else "any", sorted(ta) if ta is not None else "any"
            if ea < eb:
                self.add(f"{s}-type-narrowed", path, f"type {shown_b} → {shown_a}", shown_b, shown_a)
            elif eb < ea:
                self.add(f"{s}-type-widened", path, f"type {shown_b} → {shown_a}", shown_b, shown_a)
            elif eb != ea:
                self.add(f"{s}-type-changed", path, f"type {shown_b} → {shown_a}", shown_b, shown_a)
        nb, na = _enum(b, self.root_b), _enum(a, self.root_a)
        if nb is not None or na is not None:
            removed = [v for v in nb or [] if na is not None and v not in na]
            added = [v for v in na or [] if nb is not None and v not in nb]
            if nb is None:  # an enum appeared: values were free, now listed
                self.add(f"{s}-type-narrowed" if s == "input" else f"{s}-type-narrowed", path,
                         f"now limited to {na}", None, na)
            elif na is None:
                self.add(f"{s}-type-widened", path, f"no longer limited to {nb}", nb, None)
            else:
                if removed:
                    self.add(f"{s}-enum-values-removed", path, f"values removed: {removed}", nb, na)
                if added:
                    self.add(f"{s}-enum-values-added", path, f"values added: {added}", nb, na)
        for key in TIGHTER_IF_RAISED + TIGHTER_IF_LOWERED:
            vb, va = b.get(key), a.get(key)
            if vb == va or not all(isinstance(v, (int, float)) or v is None for v in (vb, va)):
                continue
            raised = va is not None and (vb is None or va > vb)
            tighter = raised if key in TIGHTER_IF_RAISED else (va is not None and (vb is None or va < vb))
            self.add(f"{s}-constraint-{'tightened' if tighter else 'loosened'}", f"{path}.{key}", f"{key} {vb} → {va}", vb, va)
        if b.get("pattern") != a.get("pattern"):
            self.add(f"{s}-constraint-{'tightened' if a.get('pattern') else 'loosened'}", f"{path}.pattern",
                     "pattern changed", b.get("pattern"), a.get("pattern"))
        if depth > 0 and (b.get("description") or "") != (a.get("description") or ""):
            self.add("parameter-description-changed", f"{path}.description", "description changed",
                     b.get("description"), a.get("description"), text_diff(b.get("description") or "", a.get("description") or ""))
        self.objects(b, a, path, depth)
        if isinstance(b.get("items"), (dict, bool)) or isinstance(a.get("items"), (dict, bool)):
            self.walk(b.get("items", True), a.get("items", True), f"{path}.items", depth + 1)

    def objects(self, b: dict, a: dict, path: str, depth: int) -> None:
        pb, rb, addb = _object_parts(b, self.root_b)
        pa, ra, adda = _object_parts(a, self.root_a)
        s = self.side
        for name in sorted(set(pb) - set(pa)):
            where = f"{path}.properties.{name}"
            self.add(f"{s}-parameter-removed" if s == "input" else "output-property-removed", where, f"“{name}” removed")
        for name in sorted(set(pa) - set(pb)):
            where = f"{path}.properties.{name}"
            if s == "input":
                rule = "input-parameter-added-required" if name in ra else "input-parameter-added-optional"
                self.add(rule, where, f"“{name}” added{' (required)' if name in ra else ''}", None, pa[name])
            else:
                self.add("output-property-added", where, f"“{name}” added", None, pa[name])
        for name in sorted(set(pb) & set(pa)):
            where = f"{path}.properties.{name}"
            if name in ra and name not in rb:
                self.add(f"{s}-made-required", where, f"“{name}” is now required")
            elif name in rb and name not in ra:
                self.add(f"{s}-made-optional", where, f"“{name}” is no longer required")
            self.walk(pb[name], pa[name], where, depth + 1)
        if (addb is not False) and adda is False:
            self.add(f"{s}-closed", f"{path}.additionalProperties", "additionalProperties is now false", addb, adda)
        elif addb is False and adda is not False:
            self.add(f"{s}-opened", f"{path}.additionalProperties", "additionalProperties no longer false", addb, adda)


# --- the surface --------------------------------------------------------------------------------

def _by(items: list[dict], key: str) -> dict[str, dict]:
    return {str(i.get(key)): i for i in items or [] if isinstance(i, dict)}


ANNOTATION_RULES = {
    "readOnlyHint": (True, "read-only-dropped"),  # (the value that is safe, rule when it is lost)
    "idempotentHint": (True, "idempotent-dropped"),
    "destructiveHint": (False, "destructive-added"),
    "openWorldHint": (False, "open-world-added"),
}


def _tool(name: str, b: dict, a: dict, changes: list[Change]) -> None:
    subject = f"tool {name}"
    if (b.get("description") or "") != (a.get("description") or ""):
        changes.append(Change("description-changed", subject, "description", "description changed", b.get("description"),
                              a.get("description"), text_diff(b.get("description") or "", a.get("description") or "")))
    if (b.get("title") or "") != (a.get("title") or ""):
        changes.append(Change("title-changed", subject, "title", f"title {b.get('title')!r} → {a.get('title')!r}",
                              b.get("title"), a.get("title")))
    root_b, root_a = b.get("inputSchema") or {}, a.get("inputSchema") or {}
    _SchemaWalk(subject, "input", root_b, root_a, changes).walk(root_b, root_a, "inputSchema")
    ob, oa = b.get("outputSchema"), a.get("outputSchema")
    if ob is None and oa is not None:
        changes.append(Change("output-schema-added", subject, "outputSchema", "outputSchema added", None, oa))
    elif ob is not None and oa is None:
        changes.append(Change("output-schema-removed", subject, "outputSchema", "outputSchema removed", ob, None))
    elif ob is not None and ob != oa:
        _SchemaWalk(subject, "output", ob, oa, changes).walk(ob, oa, "outputSchema")
    ab, aa = b.get("annotations") or {}, a.get("annotations") or {}
    for key in sorted(set(ab) | set(aa)):
        vb, va = ab.get(key), aa.get(key)
        if vb == va:
            continue
        safe, rule = ANNOTATION_RULES.get(key, (None, "annotation-changed"))
        if safe is not None:
            lost = (vb is safe and va is not safe) if safe is True else (vb is not True and va is True)
            rule = rule if lost else "annotation-changed"
        changes.append(Change(rule, subject, f"annotations.{key}", f"{key} {vb} → {va}", vb, va))
    eb = ((b.get("execution") or {}).get("taskSupport"))
    ea = ((a.get("execution") or {}).get("taskSupport"))
    if eb != ea:
        rule = "task-required" if ea == "required" else "meta-changed"
        changes.append(Change(rule, subject, "execution.taskSupport", f"taskSupport {eb} → {ea}", eb, ea))
    mb, ma = b.get("_meta") or {}, a.get("_meta") or {}
    if mb != ma:
        vis_b = ((mb.get("ui") or {}) if isinstance(mb.get("ui"), dict) else {}).get("visibility")
        vis_a = ((ma.get("ui") or {}) if isinstance(ma.get("ui"), dict) else {}).get("visibility")
        if vis_b != vis_a:
            changes.append(Change("visibility-changed", subject, "_meta.ui.visibility", f"visibility {vis_b} → {vis_a}", vis_b, vis_a))
        else:
            changes.append(Change("meta-changed", subject, "_meta", "_meta changed", mb, ma))


def _prompt(name: str, b: dict, a: dict, changes: list[Change]) -> None:
    subject = f"prompt {name}"
    if (b.get("description") or "") != (a.get("description") or ""):
        changes.append(Change("description-changed", subject, "description", "description changed", b.get("description"),
                              a.get("description"), text_diff(b.get("description") or "", a.get("description") or "")))
    args_b, args_a = _by(b.get("arguments") or [], "name"), _by(a.get("arguments") or [], "name")
    for arg in sorted(set(args_b) - set(args_a)):
        changes.append(Change("prompt-argument-removed", subject, f"arguments.{arg}", f"argument “{arg}” removed"))
    for arg in sorted(set(args_a) - set(args_b)):
        required = bool(args_a[arg].get("required"))
        changes.append(Change("prompt-argument-added-required" if required else "prompt-argument-added-optional", subject,
                              f"arguments.{arg}", f"argument “{arg}” added{' (required)' if required else ''}"))
    for arg in sorted(set(args_a) & set(args_b)):
        if args_a[arg].get("required") and not args_b[arg].get("required"):
            changes.append(Change("prompt-argument-made-required", subject, f"arguments.{arg}", f"argument “{arg}” is now required"))
        if (args_a[arg].get("description") or "") != (args_b[arg].get("description") or ""):
            changes.append(Change("parameter-description-changed", subject, f"arguments.{arg}.description", "description changed",
                                  args_b[arg].get("description"), args_a[arg].get("description"),
                                  text_diff(args_b[arg].get("description") or "", args_a[arg].get("description") or "")))


def _item(kind: str, key: str, b: dict, a: dict, changes: list[Change]) -> None:
    subject = f"{kind} {key}"
    for field_name in sorted(set(b) | set(a)):
        if b.get(field_name) == a.get(field_name):
            continue
        if field_name == "description":
            changes.append(Change("description-changed", subject, "description", "description changed", b.get(field_name),
                                  a.get(field_name), text_diff(b.get(field_name) or "", a.get(field_name) or "")))
        else:
            changes.append(Change("item-changed", subject, field_name, f"{field_name} changed", b.get(field_name), a.get(field_name)))


def compare(before: dict[str, Any], after: dict[str, Any], tokens_before: int | None = None,
            tokens_after: int | None = None) -> SurfaceDiff:
    """Every change from `before` to `after` (canonical surfaces), breaking first."""
    changes: list[Change] = []
    if (before.get("instructions") or "") != (after.get("instructions") or ""):
        changes.append(Change("instructions-changed", "server", "instructions", "instructions changed", before.get("instructions"),
                              after.get("instructions"), text_diff(before.get("instructions") or "", after.get("instructions") or "")))
    if before.get("serverInfo") != after.get("serverInfo"):
        changes.append(Change("server-info-changed", "server", "serverInfo", "server info changed", before.get("serverInfo"),
                              after.get("serverInfo")))
    cb, ca = before.get("capabilities") or {}, after.get("capabilities") or {}
    for cap in sorted(set(cb) | set(ca)):
        if cap not in ca:
            changes.append(Change("capability-removed", "server", f"capabilities.{cap}", f"capability “{cap}” removed", cb[cap]))
        elif cap not in cb:
            changes.append(Change("capability-added", "server", f"capabilities.{cap}", f"capability “{cap}” added", None, ca[cap]))
        elif cb[cap] != ca[cap]:
            changes.append(Change("capability-changed", "server", f"capabilities.{cap}", f"capability “{cap}” changed", cb[cap], ca[cap]))
    tb, ta = _by(before.get("tools"), "name"), _by(after.get("tools"), "name")
    for name in sorted(set(tb) - set(ta)):
        changes.append(Change("tool-removed", f"tool {name}", "", "tool removed", tb[name], None))
    for name in sorted(set(ta) - set(tb)):
        changes.append(Change("tool-added", f"tool {name}", "", "tool added", None, ta[name]))
    for name in sorted(set(ta) & set(tb)):
        if tb[name] != ta[name]:
            _tool(name, tb[name], ta[name], changes)
    for section, kind, key in (("resources", "resource", "uri"), ("resourceTemplates", "resource template", "uriTemplate"),
                               ("prompts", "prompt", "name")):
        ib, ia = _by(before.get(section), key), _by(after.get(section), key)
        for k in sorted(set(ib) - set(ia)):
            changes.append(Change("item-removed", f"{kind} {k}", "", f"{kind} removed", ib[k], None))
        for k in sorted(set(ia) - set(ib)):
            changes.append(Change("item-added", f"{kind} {k}", "", f"{kind} added", None, ia[k]))
        for k in sorted(set(ia) & set(ib)):
            if ib[k] != ia[k]:
                (_prompt(k, ib[k], ia[k], changes) if kind == "prompt" else _item(kind, k, ib[k], ia[k], changes))
    if tokens_before is not None and tokens_after is not None and tokens_before != tokens_after:
        changes.append(Change("token-cost", "server", "tokens", f"tokens per request {tokens_before} → {tokens_after} "
                              f"({tokens_after - tokens_before:+d})", tokens_before, tokens_after))
    changes.sort(key=lambda c: ORDER[c.severity])
    return SurfaceDiff(changes, tokens_before, tokens_after)


def changed_tools(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    """Names of tools added or changed from `before` to `after` (what drift withholds)."""
    tb, ta = _by(before.get("tools"), "name"), _by(after.get("tools"), "name")
    return {name for name, tool in ta.items() if tb.get(name) != tool}
