"""Prompt files: found in the checkout, rendered with $fields, every view's prompt ends the same way."""

import pytest

from derivaudit import templates
from derivaudit.views import ANSWER_SUFFIX, VIEWS


def test_render_substitutes_and_refuses_missing_fields():
    text = templates.render("view_atomic", claim="Ann has a cat.")
    assert "Ann has a cat." in text and "$claim" not in text
    with pytest.raises(KeyError):
        templates.render("view_atomic")


def test_unknown_prompt_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="no prompt file nope.txt"):
        templates.load("nope")


def test_every_view_has_a_prompt_file_ending_with_the_answer_instruction():
    for name in VIEWS:
        assert templates.load(f"view_{name}").rstrip().endswith(ANSWER_SUFFIX), name
