"""A test server with MCP tasks (2025-11-25): task-augmented `tools/call`, `tasks/get`,
`tasks/result`, `tasks/cancel`, `tasks/list` and `notifications/tasks/status`.

Run: ``python tests/mcp_servers/tasks.py --legacy [--transport stdio|http] [--port N]``.
Tasks exist on 2025-11-25 connections only (the 2026-07-28 core spec dropped them), so tests
run it with ``--legacy``. The SDK types tasks but dispatches none of their methods: the
handlers here are registered on its lowlevel server, as a server author would have to.

Tasks live in this process, not in a connection, so a client that reconnects (another worker)
follows a task by its id.

Tools (``execution.taskSupport`` in brackets):
* ``slow_report(seconds, tag)`` [required] - works ``seconds`` seconds, its status message
  saying "step i of n" each second; answers "done after N s (tag)".
* ``needs_input(tag)`` [required] - works a second, goes ``input_required``; the client's
  ``tasks/result`` then gets a form elicitation {name}; answers "hello NAME" (or the action).
* ``maybe_task(text)`` [optional] - answers "task: TEXT" as a task, "plain: TEXT" without one.
* ``task_counts(tag)`` [forbidden] - JSON {"started": n, "cancelled": n, "results": n} for tasks of ``tag``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import serve  # noqa: E402
from mcp_types import (  # noqa: E402
    CallToolRequestParams, CallToolResult, CancelTaskRequestParams, GetTaskPayloadRequestParams,
    GetTaskRequestParams, INVALID_PARAMS, METHOD_NOT_FOUND, PaginatedRequestParams, ServerTasksCapability,
    ToolExecution,
)

from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

mcp: MCPServer[Any] = MCPServer("tasks-test-server", version="1.0.0")
lowlevel = mcp._lowlevel_server  # noqa: SLF001 - the SDK exposes no public accessor

SUPPORT = {"slow_report": "required", "needs_input": "required", "maybe_task": "optional", "task_counts": "forbidden"}
TTL_MS = 300_000
POLL_MS = 250
COUNTS: dict[str, Counter] = {}
RELATED = "io.modelcontextprotocol/related-task"


@dataclass
class Job:
    task_id: str
    tag: str
    status: str = "working"
    message: str = ""
    created_at: str = field(default_factory=lambda: _now())
    updated_at: str = field(default_factory=lambda: _now())
    result: dict[str, Any] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    answer: asyncio.Future | None = None  # set when the job waits for input
    runner: asyncio.Task | None = None
    session: Any = None

    def wire(self) -> dict[str, Any]:
        task = {"taskId": self.task_id, "status": self.status, "createdAt": self.created_at,
                "lastUpdatedAt": self.updated_at, "ttl": TTL_MS, "pollInterval": POLL_MS}
        if self.message:
            task["statusMessage"] = self.message
        return task

    async def move(self, status: str, message: str = "") -> None:
        self.status, self.message, self.updated_at = status, message, _now()
        if self.session is not None:  # best effort, as the spec allows: clients also poll
            with contextlib.suppress(Exception):
                await self.session._notify(_Note(self.wire()), request_scoped=False)  # noqa: SLF001


class _Note:
    """A notifications/tasks/status the SDK's typed send would refuse (tasks are types-only there)."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        return {"method": "notifications/tasks/status", "params": self.params}


JOBS: dict[str, Job] = {}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def _count(tag: str, what: str) -> None:
    COUNTS.setdefault(tag, Counter())[what] += 1


def _text(text: str, is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


async def _slow_report(job: Job, arguments: dict[str, Any]) -> dict[str, Any]:
    seconds = int(arguments.get("seconds", 5))
    for step in range(1, seconds + 1):
        await job.move("working", f"step {step} of {seconds}")
        await asyncio.sleep(1)
    return _text(f"done after {seconds} s ({job.tag})")


async def _needs_input(job: Job, arguments: dict[str, Any]) -> dict[str, Any]:
    await job.move("working", "getting ready")
    await asyncio.sleep(1)
    job.answer = asyncio.get_running_loop().create_future()
    await job.move("input_required", "waiting for your name")
    answer = await job.answer
    await job.move("working", "greeting")
    if answer.get("action") != "accept":
        return _text(f"no name: {answer.get('action')}")
    return _text(f"hello {(answer.get('content') or {}).get('name')}")


async def _maybe_task(job: Job, arguments: dict[str, Any]) -> dict[str, Any]:
    return _text(f"task: {arguments.get('text', '')}")


RUNNERS = {"slow_report": _slow_report, "needs_input": _needs_input, "maybe_task": _maybe_task}


async def _run(job: Job, name: str, arguments: dict[str, Any]) -> None:
    try:
        job.result = await RUNNERS[name](job, arguments)
        await job.move("failed" if job.result.get("isError") else "completed")
    except asyncio.CancelledError:
        job.result = _text("The task was cancelled.", is_error=True)
        await job.move("cancelled", "cancelled by the client")
    finally:
        job.done.set()


@mcp.tool(structured_output=False)
async def slow_report(seconds: int = 5, tag: str = "") -> str:
    """Work for a while, reporting status (task required)."""
    return "unreachable: the call wrapper refuses it without a task"


@mcp.tool(structured_output=False)
async def needs_input(tag: str = "") -> str:
    """Ask for a name mid-task (task required)."""
    return "unreachable"


@mcp.tool(structured_output=False)
async def maybe_task(text: str = "") -> str:
    """Echo, as a task or not (task optional)."""
    return f"plain: {text}"


@mcp.tool(structured_output=False)
async def task_counts(tag: str) -> str:
    """How many tasks of `tag` were started, cancelled and had their result fetched."""
    counts = COUNTS.get(tag, Counter())
    return json.dumps({"started": counts["started"], "cancelled": counts["cancelled"], "results": counts["results"]})


_list_tools = lowlevel.get_request_handler("tools/list").handler


async def list_tools(ctx: Any, params: PaginatedRequestParams) -> Any:
    listed = await _list_tools(ctx, params)
    for tool in listed.tools:
        tool.execution = ToolExecution(task_support=SUPPORT[tool.name])
    return listed


async def call_tool(ctx: Any, call_next: Any) -> Any:
    """Middleware on `tools/call`: a task-augmented call answers a CreateTaskResult, which the SDK's
    own handler could not return (it checks a tools/call result is a CallToolResult; a middleware
    that answers without `call_next` owns its result)."""
    if ctx.method != "tools/call":
        return await call_next(ctx)
    params = CallToolRequestParams.model_validate(dict(ctx.params or {}))
    support = SUPPORT.get(params.name)
    if params.task is None:
        if support == "required":
            raise MCPError(code=METHOD_NOT_FOUND, message=f"Tool '{params.name}' requires task augmentation")
        return await call_next(ctx)
    if support not in ("required", "optional"):
        raise MCPError(code=INVALID_PARAMS, message=f"Tool '{params.name}' does not support tasks")
    arguments = params.arguments or {}
    job = Job(task_id=uuid.uuid4().hex, tag=str(arguments.get("tag", "")), session=ctx.session)
    JOBS[job.task_id] = job
    _count(job.tag, "started")
    job.runner = asyncio.ensure_future(_run(job, params.name, arguments))
    return {"task": job.wire()}


def _job(task_id: str) -> Job:
    job = JOBS.get(task_id)
    if job is None:
        raise MCPError(code=INVALID_PARAMS, message=f"Unknown task: {task_id}")
    return job


async def get_task(ctx: Any, params: GetTaskRequestParams) -> Any:
    return _job(params.task_id).wire()


async def task_result(ctx: Any, params: GetTaskPayloadRequestParams) -> Any:
    """Blocks until the task ends; a task that needs input asks for it here, on this request."""
    job = _job(params.task_id)
    while not job.done.is_set():
        if job.status == "input_required" and job.answer is not None and not job.answer.done():
            form = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
            try:
                answer = await ctx.session.elicit_form("What is your name?", form, related_request_id=ctx.request_id)
                job.answer.set_result(answer.model_dump(mode="json", exclude_none=True))
            except MCPError as exc:
                job.answer.set_result({"action": f"error {exc.error.message}"})
            continue
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(job.done.wait(), 0.1)
    _count(job.tag, "results")
    result = dict(job.result or _text("no result", is_error=True))
    result["_meta"] = {**(result.get("_meta") or {}), RELATED: {"taskId": job.task_id}}
    return CallToolResult.model_validate(result)


async def cancel_task(ctx: Any, params: CancelTaskRequestParams) -> Any:
    job = _job(params.task_id)
    if job.status in ("completed", "failed", "cancelled"):
        raise MCPError(code=INVALID_PARAMS, message=f"Task {job.task_id} already ended ({job.status})")
    _count(job.tag, "cancelled")
    if job.runner is not None:
        job.runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await job.runner
    return job.wire()


async def list_tasks(ctx: Any, params: PaginatedRequestParams) -> Any:
    return {"tasks": [job.wire() for job in JOBS.values()]}


lowlevel.add_request_handler("tools/list", PaginatedRequestParams, list_tools)
mcp.middleware.append(call_tool)
lowlevel.add_request_handler("tasks/get", GetTaskRequestParams, get_task)
lowlevel.add_request_handler("tasks/result", GetTaskPayloadRequestParams, task_result)
lowlevel.add_request_handler("tasks/cancel", CancelTaskRequestParams, cancel_task)
lowlevel.add_request_handler("tasks/list", PaginatedRequestParams, list_tasks)

_capabilities = lowlevel.get_capabilities


def capabilities(*args: Any, **kwargs: Any) -> Any:
    caps = _capabilities(*args, **kwargs)
    caps.tasks = ServerTasksCapability.model_validate({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    return caps


lowlevel.get_capabilities = capabilities  # type: ignore[method-assign]

if __name__ == "__main__":
    serve(mcp)
