"""Which time, place, quantity or person an obligation asserts, read from its words; and the
different values calibration is built from."""

import pytest

from derivaudit.audit.slots import Slot, find, perturb, values


@pytest.mark.parametrize("text, subtype, slot", [
    ("The printing was done on 17 January 2022.", "modality", Slot("time", "17 January 2022")),  # mistyped
    ("February 2023 is the month Andrew started his job.", None, Slot("time", "February 2023")),  # a FACT
    ("Joanna watched the drama ten years ago.", "timing", Slot("time", "ten years ago")),
    ("Melanie painted a lake sunrise last year.", "timing", Slot("time", "last year")),
    ("Audrey has had her dogs for five years.", "quantity", Slot("quantity", "five years")),
    ("Nate has 3 turtles.", None, Slot("quantity", "3 turtles")),
    ("Alex works at a software company in Boston.", None, Slot("place", "Boston")),
    ("Her mother Linda told her.", "attribution", Slot("person", "Linda")),
])
def test_find(text, subtype, slot):
    assert find(text, subtype, names=("Audrey", "Andrew")) == slot


@pytest.mark.parametrize("text, subtype", [
    ("Alex accepted a job.", None),
    ("She may move soon.", None),  # the modal, not the month
    ("Caroline went back to the one she liked.", None),  # 'one' as a pronoun
    ("One of her friends came.", None),
    ("They met one day.", None),
    ("Audrey talked with Andrew.", "attribution"),  # a speaker of the conversation is the subject, not a slot
    ("She lives in Audrey's old flat.", None),
])
def test_no_slot(text, subtype):
    assert find(text, subtype, names=("Audrey", "Andrew", "Audrey's")) is None


@pytest.mark.parametrize("name, value, changed", [
    ("time", "17 January 2022", "17 January 2021"), ("quantity", "five years", "seven years"),
    ("quantity", "3 turtles", "5 turtles"), ("time", "March", "June"), ("time", "last year", "next year"),
    ("time", "on Friday", "on Sunday"), ("time", "yesterday", "last month"),
])
def test_perturb_gives_a_different_value_of_the_same_slot(name, value, changed):
    assert perturb(Slot(name, value)) == changed
    assert find(f"It happened {changed}.").name == name


def test_perturb_leaves_places_and_people_alone():
    assert perturb(Slot("place", "Boston")) is None and perturb(Slot("person", "Linda")) is None


def test_values():
    assert values("I've had them for three years, since 2020.", "quantity")[0] == "three years"
    assert "since 2020" in values("I've had them for three years, since 2020.", "time")
    assert values("Boston", "place") == []
