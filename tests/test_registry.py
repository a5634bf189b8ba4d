"""The lab registry: course.toml is read in order and a malformed one is refused with a sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamlab.course import registry

HINTS = 'hints = ["a nudge", "an approach"]'


def _write(tmp_path: Path, text: str, version: str = "format_version = 1\n") -> Path:
    path = tmp_path / "course.toml"
    path.write_text(version + text)
    return path


def _lab(lab_id: str, *exercise_ids: str) -> str:
    parts = [f'[[labs]]\nid = "{lab_id}"\nslug = "s{lab_id}"\ntitle = "Lab {lab_id}"\n']
    parts += [f'[[labs.exercises]]\nid = "{e}"\ntitle = "E {e}"\n{HINTS}\n' for e in exercise_ids]
    return "\n".join(parts)


def _hinted(hints_line: str) -> str:
    """Lab 00 with one exercise whose hints line is ``hints_line``."""
    return _lab("00", "0.1").replace(HINTS, hints_line)


def test_the_course_lists_its_labs_in_ascending_order():
    ids = [lab.id for lab in registry.labs()]
    assert ids == sorted(ids) and ids[0] == "00"


def test_labs_and_exercises_come_back_in_file_order(tmp_path):
    labs = registry.labs(_write(tmp_path, _lab("00", "0.1", "0.2") + _lab("01", "1.1")))
    assert [(lab.id, [e.id for e in lab.exercises]) for lab in labs] == [
        ("00", ["0.1", "0.2"]),
        ("01", ["1.1"]),
    ]


@pytest.mark.parametrize(
    "text, words",
    [
        (_lab("01", "1.1") + _lab("00", "0.1"), "lab 00 is listed after lab 01"),
        (_lab("00", "0.2", "0.1"), "exercise 0.1 of lab 00 is listed after 0.2"),
        (_lab("00", "0.1") + _lab("00", "0.2"), "lab 00 is listed twice"),
        (_lab("00", "1.1"), "should be numbered 0.N"),
        ('[[labs]]\nid = "00"\n', "has no 'slug' field"),
        (_hinted('hint = "h"'), "exercise 0.1 has a single hint; give it hints"),
        (_hinted('hints = ["only one"]'), "0.1 should have 2 to 3 hints"),
        (_hinted('hints = ["a", "b", "c", "d"]'), "0.1 should have 2 to 3 hints"),
        (_hinted('hints = ["a", " "]'), "each a non-empty string"),
        (_hinted('hints = "a nudge"'), "0.1 should have 2 to 3 hints"),
        (_hinted('hints = ["same", "same"]'), "0.1 repeats a hint"),
        (_hinted(""), "has no 'hints' field"),
        (_hinted(HINTS + '\nkind = "quiz"'), "has kind 'quiz'; the kinds are build, predict"),
    ],
)
def test_a_malformed_registry_is_refused_with_a_sentence(tmp_path, text, words):
    with pytest.raises(registry.RegistryError, match=words):
        registry.labs(_write(tmp_path, text))


@pytest.mark.parametrize(
    "version, words",
    [
        ("", "has no format_version; add `format_version = 1` at its top"),
        ("format_version = 2\n", "has format_version 2; these tools read format_version 1"),
        ('format_version = "1"\n', "has format_version '1'; these tools read format_version 1"),
    ],
)
def test_the_registry_says_which_format_it_is_in(tmp_path, version, words):
    with pytest.raises(registry.RegistryError, match=words):
        registry.labs(_write(tmp_path, _lab("00", "0.1"), version=version))
    assert registry.FORMAT_VERSION == 1


def test_hints_come_in_tiers_and_the_first_is_the_hint(tmp_path):
    text = _hinted('hints = ["a nudge", "an approach", "the steps"]')
    (exercise,) = registry.labs(_write(tmp_path, text))[0].exercises
    assert exercise.hints == ("a nudge", "an approach", "the steps")
    assert exercise.hint == "a nudge"


def test_every_exercise_of_the_course_has_two_or_three_hints():
    for lab in registry.labs():
        for exercise in lab.exercises:
            assert 2 <= len(exercise.hints) <= 3, exercise.id


def test_an_exercise_is_a_build_unless_it_says_which_kind(tmp_path):
    text = _lab("00", "0.1", "0.2").replace(
        'title = "E 0.2"\n', 'title = "E 0.2"\nkind = "predict"\n'
    )
    (lab,) = registry.labs(_write(tmp_path, text))
    assert [e.kind for e in lab.exercises] == ["build", "predict"]


def test_a_check_path_names_its_lab_by_its_folder():
    assert registry.lab_of_check("checks/lab_04/test_4_2.py::test_x[p1]") == "04"
    assert registry.lab_of_check("/repo/checks/lab_10/story_10.py") == "10"
    assert registry.lab_of_check("checks/test_05_restart_recovery.py::test_y") is None
    assert registry.lab_of_check("checks/conftest.py") is None


def test_a_lab_is_graded_from_its_folder_one_file_an_exercise():
    lab = registry.lab("00")
    assert lab.check_dir == registry.CHECKS_DIR / "lab_00"
    assert [p.name for p in lab.check_files] == ["test_0_1.py", "test_0_2.py", "test_0_3.py"]
