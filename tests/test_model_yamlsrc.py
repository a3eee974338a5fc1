"""YAML loading: plain values, line numbers for every key and item, every failure an InputError."""

import os

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from wearlab.errors import InputError
from wearlab.model.yamlsrc import dotted, load_yaml, parse_yaml, problems_from_validation


def test_plain_values_and_lines():
    src = parse_yaml("a: 1\nb:\n  - {x: 1.5, y: [p, q]}\n  - z: true\nc: 10ms\n", "f.yaml")
    assert src.data == {"a": 1, "b": [{"x": 1.5, "y": ["p", "q"]}, {"z": True}], "c": "10ms"}
    assert type(src.data["b"][0]["x"]) is float and type(src.data["b"][1]["z"]) is bool
    assert type(src.data["b"]) is list and type(src.data) is dict
    assert src.lines[("a",)] == 1
    assert src.lines[("b",)] == 2
    assert src.lines[("b", 0)] == 3
    assert src.lines[("b", 0, "y", 1)] == 3
    assert src.lines[("b", 1)] == 4
    assert src.lines[("b", 1, "z")] == 4
    assert src.lines[("c",)] == 5


def test_line_of_missing_key_falls_back_to_parent():
    src = parse_yaml("top:\n  inner:\n    k: v\n", "f.yaml")
    assert src.line(("top", "inner", "absent")) == 2


def test_dotted():
    assert dotted(("links", 2, "delay")) == "links[2].delay"
    assert dotted(("nodes", "phone", "sysctls", "net.ipv4.tcp_rmem")) == "nodes.phone.sysctls[net.ipv4.tcp_rmem]"


def test_syntax_error_has_line(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("nodes:\n  a: {role: ap\n")
    with pytest.raises(InputError) as e:
        load_yaml(f)
    [p] = e.value.problems
    assert p.file == str(f) and p.line == 3 and "YAML" in p.message


def test_indentation_error_has_line(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("a: 1\nb: c: d\n")
    with pytest.raises(InputError) as e:
        load_yaml(f)
    assert e.value.problems[0].line == 2


def test_duplicate_key(tmp_path):
    f = tmp_path / "dup.yaml"
    f.write_text("a: 1\nb: 2\na: 3\n")
    with pytest.raises(InputError) as e:
        load_yaml(f)
    [p] = e.value.problems
    assert p.line == 3 and "duplicate key" in p.message


def test_missing_file(tmp_path):
    with pytest.raises(InputError) as e:
        load_yaml(tmp_path / "nope.yaml")
    [p] = e.value.problems
    assert p.file == str(tmp_path / "nope.yaml") and "not found" in p.message


def test_directory(tmp_path):
    with pytest.raises(InputError, match="directory"):
        load_yaml(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read anything")
def test_unreadable_file(tmp_path):
    f = tmp_path / "secret.yaml"
    f.write_text("a: 1\n")
    f.chmod(0)
    with pytest.raises(InputError, match="permission"):
        load_yaml(f)


def test_not_utf8(tmp_path):
    f = tmp_path / "bin.yaml"
    f.write_bytes(b"a: 1\nb: \xff\xfe\n")
    with pytest.raises(InputError) as e:
        load_yaml(f)
    assert e.value.problems[0].line == 2 and "UTF-8" in e.value.problems[0].message


def test_alias_bomb_refused():
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 8):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 10) + "]")
    with pytest.raises(InputError, match="refusing"):
        parse_yaml("\n".join(lines) + "\n", "bomb.yaml")


def test_empty_file_is_none(tmp_path):
    f = tmp_path / "empty.yaml"
    f.write_text("# nothing\n")
    assert load_yaml(f).data is None


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    delay: str
    rate: str = "x"


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    links: list[Inner]


def test_validation_problems_unknown_key_suggestion_and_line():
    src = parse_yaml("links:\n  - delay: a\n  - delay: b\n    dealy: c\n", "t.yaml")
    with pytest.raises(ValidationError) as e:
        Outer.model_validate(src.data)
    [p] = problems_from_validation(e.value, src.lines, src.file, Outer)
    assert (p.file, p.line, p.field) == ("t.yaml", 4, "links[1].dealy")
    assert "did you mean 'delay'?" in p.message


def test_validation_problems_missing_key_points_at_parent():
    src = parse_yaml("links:\n  - rate: a\n", "t.yaml")
    with pytest.raises(ValidationError) as e:
        Outer.model_validate(src.data)
    [p] = problems_from_validation(e.value, src.lines, src.file, Outer)
    assert (p.line, p.field) == (2, "links[0].delay") and "missing" in p.message


def test_validation_problems_with_prefix():
    src = parse_yaml("x: 1\ninline:\n  links:\n    - {delay: a, zzz: 1}\n", "t.yaml")
    with pytest.raises(ValidationError) as e:
        Outer.model_validate(src.data["inline"])
    [p] = problems_from_validation(e.value, src.lines, src.file, Outer, at=("inline",))
    assert (p.line, p.field) == (4, "inline.links[0].zzz")
    assert "allowed here: delay, rate" in p.message
