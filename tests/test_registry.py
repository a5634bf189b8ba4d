"""The lab registry: course.toml is read in order and a malformed one is refused with a sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamlab import registry


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "course.toml"
    path.write_text(text)
    return path


def _lab(lab_id: str, *exercise_ids: str) -> str:
    parts = [f'[[labs]]\nid = "{lab_id}"\nslug = "s{lab_id}"\ntitle = "Lab {lab_id}"\n']
    parts += [f'[[labs.exercises]]\nid = "{e}"\ntitle = "E {e}"\nhint = "h"\n' for e in exercise_ids]
    return "\n".join(parts)


def test_the_course_lists_its_labs_in_ascending_order():
    ids = [lab.id for lab in registry.labs()]
    assert ids == sorted(ids) and ids[0] == "00"


def test_labs_and_exercises_come_back_in_file_order(tmp_path):
    labs = registry.labs(_write(tmp_path, _lab("00", "0.1", "0.2") + _lab("01", "1.1")))
    assert [(lab.id, [e.id for e in lab.exercises]) for lab in labs] == [
        ("00", ["0.1", "0.2"]), ("01", ["1.1"])]


@pytest.mark.parametrize("text, words", [
    (_lab("01", "1.1") + _lab("00", "0.1"), "lab 00 is listed after lab 01"),
    (_lab("00", "0.2", "0.1"), "exercise 0.1 of lab 00 is listed after 0.2"),
    (_lab("00", "0.1") + _lab("00", "0.2"), "lab 00 is listed twice"),
    (_lab("00", "1.1"), "should be numbered 0.N"),
    ('[[labs]]\nid = "00"\n', "has no 'slug' field"),
])
def test_a_malformed_registry_is_refused_with_a_sentence(tmp_path, text, words):
    with pytest.raises(registry.RegistryError, match=words):
        registry.labs(_write(tmp_path, text))
