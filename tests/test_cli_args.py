"""``key_value``: the ``--env-kwarg`` / ``--param`` argument type of every ``agc`` subcommand."""

from __future__ import annotations

import argparse

import pytest

from agentgym_credit.cli_args import key_value


def test_values_are_read_as_json_where_they_parse_else_kept_as_text() -> None:
    assert key_value("max_steps=4") == ("max_steps", 4)
    assert key_value("dim_room=[6, 6]") == ("dim_room", [6, 6])
    assert key_value("shuffle=true") == ("shuffle", True)
    assert key_value("split=test") == ("split", "test")
    assert key_value("query=a=b") == ("query", "a=b")  # only the first = separates


@pytest.mark.parametrize("text", ["max_steps", "=4", ""])
def test_a_missing_key_or_equals_sign_is_an_argparse_error(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="KEY=VALUE"):
        key_value(text)


def test_the_subcommands_share_it() -> None:
    from agentgym_credit.evaluation.cli import build_parser

    args = build_parser().parse_args(["--env", "Sokoban-Group-v0", "--policy", "random", "--env-kwarg",
                                      "max_solution_steps=2"])
    assert args.env_kwargs == [("max_solution_steps", 2)]
