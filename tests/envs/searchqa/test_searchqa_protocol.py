"""The Search-R1 protocol: action parsing, result rendering, answer scoring."""

from __future__ import annotations

import random

import pytest

from agentgym_credit.envs.searchqa.corpus import Passage
from agentgym_credit.envs.searchqa.protocol import (
    NO_RESULTS_TEXT,
    exact_match,
    format_information,
    normalize_answer,
    parse_action,
    parse_information,
    token_f1,
)
from agentgym_credit.envs.searchqa.retrieval import Hit
from benchmarks.parser_speed import upstream_command  # the upstream regular expressions
from tests.envs.deadline import hard_limit


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("The answer is Tarsk.", id="none"),
        pytest.param("", id="empty"),
        pytest.param("<search>Tarsk", id="unclosed"),
        pytest.param("<search>Tarsk</answer>", id="mismatched"),
        pytest.param("<SEARCH>Tarsk</SEARCH>", id="wrong-case"),
    ],
)
def test_outputs_without_a_command_are_invalid(text: str) -> None:
    parsed = parse_action(text)
    assert parsed.kind == "invalid"
    assert not parsed.valid
    assert parsed.error
    assert parsed.content == ""


# (output, Search-R1's command, verl-agent's command), read off Search-R1's ``_postprocess_responses`` +
# ``postprocess_predictions`` and verl-agent's ``search_projection``
CASES = [
    ("<search>Tarsk</search>", ("search", "Tarsk"), ("search", "Tarsk")),
    ("<think>I need the city.</think>\n<search> birthplace of Velora </search>",
     ("search", "birthplace of Velora"), ("search", "birthplace of Velora")),
    ("<answer>\nThe Glass Orvan\n</answer>", ("answer", "The Glass Orvan"), ("answer", "The Glass Orvan")),
    ("<think>done</think><answer>1867</answer> trailing words", ("answer", "1867"), ("answer", "1867")),
    ("<search>Tarsk</search><answer>Tarsk</answer>", ("search", "Tarsk"), ("search", "Tarsk")),
    ("<answer>Tarsk</answer><search>Velmoria</search>", ("answer", "Tarsk"), ("search", "Velmoria")),
    ("<search>Tarsk</search> and <search>Velmoria</search>", ("search", "Tarsk"), ("search", "Tarsk")),
    ("<answer>a</answer><answer>b</answer>", ("answer", "a"), ("answer", "a")),
    ("<search>   </search>", ("search", ""), ("search", "")),
    ("<search></search><answer>x</answer>", ("search", ""), ("search", "")),
    ("<answer></answer>", ("answer", ""), ("answer", "")),
    ("<search>Tarsk</search></search>", ("search", "Tarsk"), ("search", "Tarsk")),
    ("<answer>x</answer> <search>", ("answer", "x"), ("answer", "x")),
    # the cut after the first </search> leaves the answer unclosed: its inner search is the command
    ("<answer>x <search>q</search> y</answer>", ("search", "q"), ("search", "q")),
    ("<search>a <answer>b</answer> c</search>", ("search", "a <answer>b</answer> c"),
     ("search", "a <answer>b</answer> c")),
    ("<SEARCH>Tarsk</SEARCH>", ("invalid", ""), ("search", "Tarsk")),
    ("<Answer>x</Answer><search>q</search>", ("search", "q"), ("search", "q")),
]


@pytest.mark.parametrize(("text", "search_r1", "verl_agent"), CASES)
def test_the_first_command_counts_as_upstream(text: str, search_r1: tuple, verl_agent: tuple) -> None:
    for protocol, (kind, content) in (("search-r1", search_r1), ("verl-agent", verl_agent)):
        parsed = parse_action(text, protocol)
        assert (parsed.kind, parsed.content) == (kind, content), protocol
        assert parsed.valid == (kind != "invalid") and bool(parsed.error) == (kind == "invalid")


EDGE_CASES = [
    "<search>a</answer><answer>b</search>",  # each closing belongs to the other tag: the cut keeps the search
    "<answer>a</search><answer>b</answer>",
    "<search>x<search>y</search>",
    "<search><answer>q</answer>",
    "<SEARCH>a</search><answer>b</answer>",
    "<ſearch>long s</SEARCH>",  # re.IGNORECASE reads the long s as an s
    "<Search>a</SEARCH><search>b</search>",
    "</search><search>a</search>",
    "<answer>a</answer></search>",
    "<search>\n multi\nline </search>",
]


@pytest.mark.parametrize("text", [case[0] for case in CASES] + EDGE_CASES)
def test_commands_are_the_upstream_regular_expressions(text: str) -> None:
    for protocol in ("search-r1", "verl-agent"):
        parsed = parse_action(text, protocol)
        assert (parsed.kind, parsed.content) == upstream_command(text, protocol), protocol


def test_random_outputs_give_the_upstream_regular_expressions_commands() -> None:
    rng = random.Random(0)
    parts = ["<search>", "</search>", "<answer>", "</answer>", "<SEARCH>", "</Search>", "<Answer>", "</ANSWER>",
             "<ſearch>", " q ", "\n", "<", "/", ">", "search", "answer"]
    for _ in range(4000):
        text = "".join(rng.choice(parts) for _ in range(rng.randrange(12)))
        for protocol in ("search-r1", "verl-agent"):
            parsed = parse_action(text, protocol)
            assert (parsed.kind, parsed.content) == upstream_command(text, protocol), (text, protocol)


MEGABYTE = 1 << 20
ADVERSARIAL_OUTPUTS = [  # (output, Search-R1's command, verl-agent's command); the regexes take minutes on each
    ("<search>" * (MEGABYTE // 8), ("invalid", ""), ("invalid", "")),
    ("<answer>" * (MEGABYTE // 8), ("invalid", ""), ("invalid", "")),
    ("<SeArCh>" * (MEGABYTE // 8) + "<answer> x </answer>", ("answer", "x"), ("answer", "x")),
    ("<search><answer>" * (MEGABYTE // 16) + "q</answer>", ("answer", "<search><answer>" * (MEGABYTE // 16 - 1) + "q"),
     ("answer", "<search><answer>" * (MEGABYTE // 16 - 1) + "q")),
    ("<answer>" * (MEGABYTE // 8) + "<search>q</search>", ("search", "q"), ("search", "q")),
]


@pytest.mark.parametrize(("text", "search_r1", "verl_agent"), ADVERSARIAL_OUTPUTS)
def test_a_megabyte_of_unclosed_openings_is_read_at_once(text: str, search_r1: tuple, verl_agent: tuple) -> None:
    with hard_limit(5, "parsing a megabyte of openings"):
        for protocol, expected in (("search-r1", search_r1), ("verl-agent", verl_agent)):
            parsed = parse_action(text, protocol)
            assert (parsed.kind, parsed.content) == expected, protocol
        assert parse_information("<information>" * (MEGABYTE // 13)) == []


def test_non_string_output_is_invalid_and_unknown_protocols_raise() -> None:
    assert parse_action(None).kind == "invalid"  # type: ignore[arg-type]
    assert parse_action(b"<answer>x</answer>", "verl-agent").kind == "invalid"  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="protocol"):
        parse_action("<answer>x</answer>", "strict")


def test_normalization_and_exact_match() -> None:
    assert normalize_answer("The  Glass-Orvan!") == "glassorvan"
    assert normalize_answer("  An   Apple, a Day ") == "apple day"
    assert exact_match("the Glass Orvan.", ["Glass Orvan"])
    assert exact_match("384000", ["384,000"])
    assert not exact_match("Glass", ["Glass Orvan"])
    assert not exact_match("anything", [])


def test_token_f1() -> None:
    assert token_f1("Glass Orvan", ["The Glass Orvan"]) == 1.0
    assert token_f1("Glass", ["Glass Orvan"]) == pytest.approx(2 / 3)
    assert token_f1("Tarsk", ["Velmoria", "Tarsk city"]) == pytest.approx(2 / 3)
    assert token_f1("nothing shared", ["Tarsk"]) == 0.0
    assert token_f1("", ["Tarsk"]) == 0.0


def test_information_rendering_round_trips() -> None:
    hits = [
        Hit(Passage("a", "Tarsk", "Tarsk is a city in Velmoria. It has (old) walls."), 3.0),
        Hit(Passage("b", "Velmoria", "Velmoria is a country."), 2.0),
    ]
    block = format_information(hits)
    assert block == (
        "<information>Doc 1(Title: Tarsk) Tarsk is a city in Velmoria. It has (old) walls.\n"
        "Doc 2(Title: Velmoria) Velmoria is a country.</information>"
    )
    transcript = "Question: q\n\n<information>Doc 1(Title: Old) old</information>\n\n" + block
    assert parse_information(transcript) == [(h.passage.title, h.passage.text) for h in hits]
    assert format_information([]) == f"<information>{NO_RESULTS_TEXT}</information>"
    assert parse_information(format_information([])) == []
    assert parse_information("no block here") == []
