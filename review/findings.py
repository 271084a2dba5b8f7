"""Run the configured description-review rules (review/rules/) over a surface."""

from __future__ import annotations

from typing import Any

from review.rules import Context, Finding, SEVERITIES, Text, configured_rules
from tools.models import Server, Tool


def _schema_texts(subject: str, schema: Any, path: str, out: list[Text], depth: int = 0) -> None:
    if not isinstance(schema, dict) or depth > 8:
        return
    for key in ("description", "title"):
        if isinstance(schema.get(key), str) and depth > 0:
            out.append(Text(subject, f"{path}.{key}", schema[key]))
    for name, prop in (schema.get("properties") or {}).items() if isinstance(schema.get("properties"), dict) else []:
        _schema_texts(subject, prop, f"{path}.properties.{name}", out, depth + 1)
    for key in ("$defs", "definitions"):
        for name, sub in (schema.get(key) or {}).items() if isinstance(schema.get(key), dict) else []:
            _schema_texts(subject, sub, f"{path}.{key}.{name}", out, depth + 1)
    if isinstance(schema.get("items"), dict):
        _schema_texts(subject, schema["items"], f"{path}.items", out, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(schema.get(key) or []) if isinstance(schema.get(key), list) else []:
            _schema_texts(subject, sub, f"{path}.{key}.{i}", out, depth + 1)
    if isinstance(schema.get("enum"), list):
        for i, v in enumerate(schema["enum"]):
            if isinstance(v, str):
                out.append(Text(subject, f"{path}.enum.{i}", v))


def texts_of(surface: dict[str, Any]) -> list[Text]:
    """Every text of the surface the model may read, with where it is."""
    out: list[Text] = []
    if surface.get("instructions"):
        out.append(Text("server", "instructions", surface["instructions"]))
    for tool in surface.get("tools") or []:
        subject = f"tool {tool.get('name')}"
        out.append(Text(subject, "name", str(tool.get("name") or "")))
        for key in ("title", "description"):
            if tool.get(key):
                out.append(Text(subject, key, str(tool[key])))
        _schema_texts(subject, tool.get("inputSchema"), "inputSchema", out)
    for prompt in surface.get("prompts") or []:
        subject = f"prompt {prompt.get('name')}"
        for key in ("title", "description"):
            if prompt.get(key):
                out.append(Text(subject, key, str(prompt[key])))
        for arg in prompt.get("arguments") or []:
            if isinstance(arg, dict) and arg.get("description"):
                out.append(Text(subject, f"arguments.{arg.get('name')}.description", str(arg["description"])))
    for section, kind, key in (("resources", "resource", "uri"), ("resourceTemplates", "resource template", "uriTemplate")):
        for item in surface.get(section) or []:
            if item.get("description"):
                out.append(Text(f"{kind} {item.get(key)}", "description", str(item["description"])))
    return out


def context_for(server: Server, surface: dict[str, Any]) -> Context:
    """This server's tools and the tools of the other servers its owner can see."""
    others: dict[str, list[str]] = {}
    rows = (Tool.objects.filter(server__in=Server.objects.visible_to(server.owner)).exclude(server=server)
            .values_list("server__name", "name"))
    for server_name, name in rows:
        others.setdefault(server_name, []).append(name)
    return Context(server_name=server.name, tools=list(surface.get("tools") or []), other_servers=others)


def run_rules(surface: dict[str, Any], context: Context) -> list[Finding]:
    texts = texts_of(surface)
    found: list[Finding] = []
    for rule in configured_rules():
        found.extend(rule.check(texts, context))
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    found.sort(key=lambda f: (-rank.get(f.severity, 0), f.subject, f.field, f.start))
    return found


def review(server: Server, surface: dict[str, Any]) -> list[dict[str, Any]]:
    """The findings for `surface` as stored on its version (JSON)."""
    return [f.as_json() for f in run_rules(surface, context_for(server, surface))]
