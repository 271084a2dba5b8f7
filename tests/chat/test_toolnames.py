"""LLM-facing tool names (`chat.toolnames.assign`): valid for every provider, collision-free,
mapped back exactly, deterministic.

`assign(pairs)` takes (server_key, server_name, tool_name) triples and returns
{llm_name: (server_key, tool_name)}. The history builder inverts that mapping to name the
offered tools and maps the model's tool calls back through it, so a lost or shared name means
a tool the model cannot call, or a call that reaches the wrong tool.
"""

from __future__ import annotations

import collections
import random
import re
import signal
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

from chat import toolnames
from chat.toolnames import MAX_LEN, assign

VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
FAST = settings(max_examples=200, deadline=None)


def _clean_ref(text: str) -> str:
    """Independent reference for the readable part: invalid characters to `_`, no `_` at the ends."""
    out = "".join(c if (c.isascii() and (c.isalnum() or c in "_-")) else "_" for c in text).strip("_")
    return out or "x"


def base_name(server_name: str, tool: str) -> str:
    return f"{_clean_ref(server_name)}__{_clean_ref(tool)}"


def check_mapping(pairs: list[tuple[str, str, str]], names: dict[str, tuple[str, str]]) -> None:
    """Every name valid; every input pair has its own name; mapping back gives the exact pair."""
    for name in names:
        assert VALID.match(name), f"invalid LLM tool name {name!r}"
    assert len(names) == len(pairs), "two tools share one name: one of them cannot be called"
    assert collections.Counter(names.values()) == collections.Counter((k, t) for k, _, t in pairs)


@contextmanager
def time_limit(seconds: int):
    """Turn a hang into a failure (pytest runs tests in the main thread, where SIGALRM works)."""

    def _raise(*_):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------------------------

any_text = st.text(max_size=80)  # arbitrary unicode (lone surrogates aside: they cannot be stored)
ascii_names = st.text("abcAB01._- /:", max_size=70)  # few characters: many collisions after cleaning
# Long names, built by repetition (cheap to generate), often share a 64-character prefix.
long_names = st.builds(lambda s, n: (s or "n") * n, st.text("ab._é", min_size=1, max_size=3), st.integers(10, 60))
names = st.one_of(any_text, ascii_names, ascii_names, long_names)


@st.composite
def catalogues(draw) -> list[tuple[str, str, str]]:
    """Tools of several servers, as the history builder passes them: server keys unique per
    server, tool names unique per server; server names may repeat (two users' "weather")."""
    servers = draw(st.lists(st.tuples(names, st.integers(1, 6)), min_size=1, max_size=5))
    pairs = []
    for index, (server_name, count) in enumerate(servers):
        key = str(draw(st.integers(1, 10**6))) + f"-{index}"  # unique, like a primary key
        tools = draw(st.lists(names, min_size=1, max_size=count, unique=True))
        pairs.extend((key, server_name, tool) for tool in tools)
    return draw(st.permutations(pairs))


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------


@FAST
@given(pairs=catalogues())
def test_names_are_valid_distinct_and_map_back_exactly(pairs):
    with time_limit(5):
        names = assign(pairs)
    check_mapping(pairs, names)


@FAST
@given(pairs=st.lists(st.tuples(names, names, names), max_size=12, unique=True))
def test_any_input_at_all_gets_valid_distinct_names(pairs):
    """Shared keys, a key with several server names, empty names: one name per entry, all valid.
    (Identical triples, which the database cannot produce, are in test_duplicate_pairs_do_not_hang.)"""
    with time_limit(5):
        names = assign(pairs)
    check_mapping(pairs, names)


@FAST
@given(pairs=catalogues(), seed=st.integers(0, 2**32))
def test_deterministic_whatever_the_order(pairs, seed):
    first = assign(pairs)
    shuffled = list(pairs)
    random.Random(seed).shuffle(shuffled)
    assert assign(shuffled) == first
    assert assign(list(pairs)) == first
    assert list(assign(shuffled).items()) == list(first.items())


@FAST
@given(pairs=catalogues())
def test_names_stay_readable(pairs):
    """A name is the cleaned `<server>__<tool>`, or at least its first 55 characters then a hash."""
    names = assign(pairs)
    server_names = {(k, t): s for k, s, t in pairs}
    bases = collections.Counter(base_name(s, t) for _, s, t in pairs)
    for name, (key, tool) in names.items():
        base = base_name(server_names[(key, tool)], tool)
        assert name[: min(len(base), MAX_LEN - 9)] == base[: MAX_LEN - 9]
        if len(base) <= MAX_LEN and bases[base] == 1 and base not in {n for n in names if n != name}:
            assert name == base  # nothing to disambiguate: the plain, readable name


@FAST
@given(server=any_text, tool=any_text)
def test_single_tool(server, tool):
    names = assign([("1", server, tool)])
    [(name, pair)] = names.items()
    assert pair == ("1", tool)
    assert VALID.match(name)
    base = base_name(server, tool)
    assert name == base if len(base) <= MAX_LEN else len(name) == MAX_LEN


# ---------------------------------------------------------------------------------------------
# Examples
# ---------------------------------------------------------------------------------------------


def test_plain_names_are_kept():
    names = assign([("1", "weather", "get_forecast"), ("2", "files", "read-file")])
    assert names == {"weather__get_forecast": ("1", "get_forecast"), "files__read-file": ("2", "read-file")}


def test_sanitising_collisions_are_told_apart():
    pairs = [("1", "a.b", "c"), ("2", "a_b", "c"), ("3", "a b", "c"), ("4", "a/b", "c"), ("5", "a__b", "c")]
    names = assign(pairs)
    check_mapping(pairs, names)
    assert sum(name == "a_b__c" for name in names) == 1
    for name in names:
        assert name.startswith(("a_b__c", "a__b__c"))


def test_separator_ambiguity():
    # "a__b" + "c" and "a" + "b__c" both clean to "a__b__c".
    pairs = [("1", "a__b", "c"), ("2", "a", "b__c")]
    names = assign(pairs)
    check_mapping(pairs, names)


def test_same_server_name_twice():
    # Two servers called "weather" (two users' copies): same tool names, different keys.
    pairs = [("11", "weather", "forecast"), ("12", "weather", "forecast")]
    names = assign(pairs)
    check_mapping(pairs, names)
    assert "weather__forecast" in names


def test_long_names_sharing_a_64_character_prefix():
    prefix = "s" * 30
    tool_prefix = "t" * 40
    pairs = [("1", prefix, tool_prefix + suffix) for suffix in ("alpha", "beta", "gamma", "")]
    pairs += [("2", prefix, tool_prefix + "alpha")]
    names = assign(pairs)
    check_mapping(pairs, names)
    for name in names:
        assert len(name) <= MAX_LEN
        assert name.startswith(prefix + "__" + "t" * 20)


def test_unicode_and_empty_names():
    pairs = [("1", "météo", "prévision"), ("2", "天气", "预报"), ("3", "", ""), ("4", "___", "🌧️"), ("5", "-", "-")]
    names = assign(pairs)
    check_mapping(pairs, names)
    assert "m_t_o__pr_vision" in names
    assert names["x__x"] in {("2", "预报"), ("3", ""), ("4", "🌧️")}
    assert names["-__-"] == ("5", "-")


def test_empty_input():
    assert assign([]) == {}


def test_names_depend_on_the_pairs_not_on_the_process():
    # sha1, not hash(): stable between processes (PYTHONHASHSEED) and therefore between steps.
    pairs = [("1", "a.b", "c"), ("2", "a_b", "c")]
    assert assign(pairs) == {"a_b__c": ("1", "c"), "a_b__c_25018fc4": ("2", "c")}


# ---------------------------------------------------------------------------------------------
# The fallback for a name already taken: these once hung (`name[:62] + "_x"` is a no-op on a
# 64-character name that already ends in "_x"); the fallback now counts up.
# ---------------------------------------------------------------------------------------------


def _taken_twice(server_key: str, server_name: str, tool: str) -> list[tuple[str, str, str]]:
    """Tools of one server whose names are exactly the hashed name `tool` would get, and the
    old `name[:62] + "_x"` fallback after it (the input that made `assign` spin forever): both
    sort before `tool`, so `tool` finds both taken."""
    base = f"{server_name}__{tool}"
    hashed = base[: MAX_LEN - 9] + "_" + toolnames._digest(server_key, tool)
    fallback = hashed[: MAX_LEN - 2] + "_x"
    prefix = len(server_name) + 2
    return [(server_key, server_name, hashed[prefix:]), (server_key, server_name, fallback[prefix:])]


def test_a_name_taken_by_another_tool_does_not_hang():
    """A server can (by accident or on purpose) name its tools after the hashed name another of
    its tools would get; `assign` must still finish and keep every tool callable."""
    long_tool = "t" * 100
    pairs = [*_taken_twice("1", "s", long_tool), ("1", "s", long_tool)]
    assert len({t for _, _, t in pairs}) == 3
    with time_limit(2):
        names = assign(pairs)
    check_mapping(pairs, names)


def test_duplicate_pairs_do_not_hang():
    """Found by Hypothesis: the same long pair three times (the same digest each time)."""
    pairs = [("", "0" * 62, "")] * 3
    with time_limit(2):
        names = assign(pairs)
    check_mapping(pairs, names)


def test_hash_collisions_do_not_hang(monkeypatch):
    """With every digest equal (the "in theory" case), long names must still be told apart."""
    monkeypatch.setattr(toolnames, "_digest", lambda server_key, tool: "deadbeef")
    pairs = [(str(i), "s" * 40, "t" * 40) for i in range(5)]
    with time_limit(2):
        names = assign(pairs)
    check_mapping(pairs, names)


def test_hash_collisions_on_short_names(monkeypatch):
    monkeypatch.setattr(toolnames, "_digest", lambda server_key, tool: "deadbeef")
    pairs = [(str(i), "s", "t") for i in range(6)]
    with time_limit(2):
        names = assign(pairs)
    check_mapping(pairs, names)
