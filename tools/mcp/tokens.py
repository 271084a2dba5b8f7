"""Token counts as the model's own tokenizer sees them: litellm's counter, fully offline.

Why: a characters-per-token guess undercounts JSON two to three times, so a cap enforced on the
guess lets several times the cap through to the model. litellm ships its tokenizers (tiktoken's
`cl100k_base` / `o200k_base` and Anthropic's) inside the wheel and points tiktoken at them, so
counting never touches the network. The few model families whose tokenizer litellm would download
from Hugging Face (Llama, Cohere) are counted with `cl100k_base` instead: a close estimate, and
never a download from a worker. (DeepSeek's tokenizer is in litellm's wheel: counted with it.)

Counting model: the model of the conversation, provider prefix removed (`openai/gpt-4o-mini` is
counted as `gpt-4o-mini`, i.e. with `o200k_base`); calls without a conversation (manual, widget,
replay) use TOKEN_COUNT_MODEL. A name litellm does not know falls back to `cl100k_base`.

`count()` is exact. `estimate()` is exact up to `EXACT_LIMIT_CHARS` characters and beyond that
extrapolates from `SAMPLES` evenly spaced samples of `SAMPLE_CHARS` characters: a 40 MB full result
costs milliseconds instead of seconds, at an error of a few percent on uniform data.
"""

from __future__ import annotations

import os
import re
from typing import Any

# Before litellm is imported anywhere: its price map is bundled too (settings.py says the same).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DEFAULT_MODEL = "gpt-4o-mini"
EXACT_LIMIT_CHARS = 256_000
SAMPLES = 16
SAMPLE_CHARS = 4096


def default_model() -> str:
    """TOKEN_COUNT_MODEL from the environment (inspector/settings.py reads the same variable), or the
    built-in default: read here, not from Django's settings, so the MCP client stays Django-free."""
    return os.environ.get("TOKEN_COUNT_MODEL", "").strip() or DEFAULT_MODEL


def counting_name(model: str | None) -> str:
    """The name litellm counts with: the bare model name, without provider prefixes."""
    name = (model or "").strip() or default_model()
    return name.rsplit("/", 1)[-1] or DEFAULT_MODEL


BUNDLED = (None, "anthropic", "deepseek")  # litellm's tokenizer kinds that come in its wheel (None: tiktoken)
_chosen: dict[str, dict[str, Any]] = {}


def _tokenizer(name: str) -> dict[str, Any]:
    """litellm's own choice, unless that choice would download a tokenizer (then `cl100k_base`).

    Kept per name: litellm would choose again on every count (~0.13 ms of a tool call's worker
    CPU, two counts a call, bench/hot_path.py). A bundled Hugging Face tokenizer that failed to
    load (litellm then counts with tiktoken) is not kept: litellm tries it again later."""
    chosen = _chosen.get(name)
    if chosen is not None:
        return chosen
    from litellm.utils import _return_openai_tokenizer, huggingface_tokenizer_kind, select_tokenizer

    kind = huggingface_tokenizer_kind(name)
    if kind not in BUNDLED:
        return _return_openai_tokenizer(name)  # Llama and Cohere would be downloaded from Hugging Face
    chosen = select_tokenizer(name)
    if (kind is None or chosen["type"] != "openai_tokenizer") and len(_chosen) < 64:
        _chosen[name] = chosen
    return chosen


def count(text: str, model: str | None = None) -> int:
    """The exact number of tokens `text` costs the model (litellm.token_counter)."""
    if not text:
        return 0
    import litellm

    name = counting_name(model)
    return litellm.token_counter(model=name, text=text, custom_tokenizer=_tokenizer(name))


def estimate(text: str, model: str | None = None, exact_limit: int = EXACT_LIMIT_CHARS) -> int:
    """Exact up to `exact_limit` characters; above it, extrapolated from evenly spaced samples."""
    if len(text) <= max(exact_limit, SAMPLES * SAMPLE_CHARS):
        return count(text, model)
    return extrapolate([text[start:stop] for start, stop in sample_spans(len(text))], len(text), model)


def sample_spans(total_chars: int) -> list[tuple[int, int]]:
    """Where `estimate()` samples a text of `total_chars` characters (SAMPLES evenly spaced spans)."""
    step = (total_chars - SAMPLE_CHARS) / (SAMPLES - 1)
    return [(round(i * step), round(i * step) + SAMPLE_CHARS) for i in range(SAMPLES)]


def extrapolate(samples: list[str] | tuple[str, ...], total_chars: int, model: str | None = None) -> int:
    """The tokens of a text of `total_chars` characters, from samples of it (a text too long to
    hold whole is sampled while it is decoded: tools/mcp/wire_result.py)."""
    counted = sum(count(s, model) for s in samples)
    return max(1, round(counted * total_chars / max(sum(len(s) for s in samples), 1)))


def estimate_utf8(data: Any, model: str | None = None) -> int:
    """`estimate()` of UTF-8 JSON text given as bytes (a large result as its server sent it),
    sampled by byte offsets: only the samples are decoded. Counted as the inspector's own
    serialisation would be (non-ASCII characters as themselves, not `\\uXXXX` escapes), so a
    result's token count does not depend on how its server escapes text."""
    view = memoryview(data)
    if len(view) <= max(EXACT_LIMIT_CHARS, SAMPLES * SAMPLE_CHARS):
        return count(_unescaped(bytes(view)), model)
    spans = [bytes(view[start:stop]) for start, stop in sample_spans(len(view))]
    counted = sum(count(_unescaped(s), model) for s in spans)
    return max(1, round(counted * len(view) / sum(len(s) for s in spans)))


# An escaped backslash (kept), a surrogate pair, or one \uXXXX escape.
_ESCAPE = re.compile(rb"(\\\\)|\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})|\\u([0-9a-f]{4})", re.IGNORECASE)


def _unescaped(sample: bytes) -> str:
    """A piece of JSON text with its non-ASCII `\\uXXXX` escapes written as the characters."""
    def character(match: re.Match[bytes]) -> bytes:
        if match[1]:
            return match[1]
        if match[2]:
            return chr(0x10000 + ((int(match[2], 16) - 0xD800) << 10) + int(match[3], 16) - 0xDC00).encode()
        code = int(match[4], 16)
        return match[0] if code < 0x80 or 0xD800 <= code < 0xE000 else chr(code).encode()

    return _ESCAPE.sub(character, sample).decode("utf-8", errors="ignore")
