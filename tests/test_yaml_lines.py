"""The one YAML reader (inventories, Ansible files, the policy, training configs): the same
data as PyYAML, every value's line, and the limits, whether a document is built in one pass
over the events or composed (explicit tags on collections and other rarities)."""

from __future__ import annotations

import datetime
import textwrap

import pytest
import yaml

from computefence.errors import ConfigError, InputLimitError
from computefence.yaml_lines import MAX_YAML_DEPTH, SAFE_LOADER, line_at, load_yaml_document

# Forces the composed way: the one-pass builder leaves explicit tags on collections to it.
COMPOSED = "forced: !!set {the general way}\n"
WAYS = pytest.mark.parametrize("prefix", ["", COMPOSED], ids=["one pass", "composed"])

DOCUMENTS = {
    "scalars of every implicit type": """\
        ints: [0, 7, -3, +4, 0o17, 017, 0x1f, 1_000, 0b101, '12', "13"]
        floats: [1.5, -2e3, .inf, -.Inf, .NaN, 6.02e+23]
        bools: [true, True, false, yes, No, on, off, y, n]
        nulls: [~, null, Null, '']
        empty:
        dates: [2024-01-02, 2024-01-02T03:04:05Z, 2024-01-02 03:04:05.5 +01:00]
        strings: [pod-1, 10.0.0.1, 22:22, 1.2.3, "quoted", 'single', pl ain, "<<", "="]
        """,
    "block and flow nesting": """\
        defaults: {user: root, port: 22, checks: {output_dir: /out}}
        hosts:
          - {name: a, host: 10.0.0.1, tags: [x, y]}
          - name: b
            host: 10.0.0.2
            tags:
              - z
          - []
          - {}
        ? complex key text
        : value
        1: int key
        true: bool key
        """,
    "explicit scalar tags": """\
        a: !!str 123
        b: !!int "42"
        c: !!float 1
        d: !!binary aGVsbG8=
        """,
    "aliases and merge keys": """\
        base: &b {user: root, port: 22}
        more: &m {port: 2222, python: python3}
        list: &l [1, 2]
        hosts:
          - {<<: *b, name: a}
          - {<<: [*m, *b], name: b, port: 1}
          - <<: *b
            <<: {port: 3}
            name: c
          - *b
          - *l
        anchored scalar: &s text
        again: *s
        """,
    "a scalar document": "just text\n",
    "an empty document": "---\n",
    "block scalars": "a: |\n  one\n  two\nb: >\n  folded\n  text\n",
}


def _both_ways() -> list:
    """Each document the one-pass way, and the composed way where it is a mapping the forcing
    key can be added to."""
    cases = []
    for name, text in DOCUMENTS.items():
        text = textwrap.dedent(text)
        cases.append(pytest.param(text, id=f"{name}, one pass"))
        if isinstance(yaml.load(text, Loader=SAFE_LOADER), dict):
            cases.append(pytest.param(COMPOSED + text, id=f"{name}, composed"))
    return cases


@pytest.mark.parametrize("text", _both_ways())
def test_data_is_what_pyyaml_builds(tmp_path, text):
    path = tmp_path / "doc.yaml"
    path.write_text(text)
    data, _ = load_yaml_document(path, "test document")
    expected = yaml.load(text, Loader=SAFE_LOADER)
    # NaN is not equal to itself: compare the text of both.
    assert repr(data) == repr(expected)


def test_a_file_without_a_document_is_none_and_none(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("# only a comment\n")
    assert load_yaml_document(path, "test document") == (None, None)


LINES = """\
defaults:
  user: root
hosts:
  - name: a
    host: 10.0.0.1
  -
    name: b
    tags:
      - x
      - y
  - {name: c,
     port: 22}
"""


@WAYS
def test_every_value_and_key_has_its_line(tmp_path, prefix):
    path = tmp_path / "pods.yaml"
    path.write_text(prefix + LINES)
    _, marks = load_yaml_document(path, "test document")
    shift = prefix.count("\n")

    def line(*loc, key=False):
        return line_at(marks, loc, key=key) - shift

    assert line("defaults") == 2 and line("defaults", key=True) == 1
    assert line("defaults", "user") == 2
    assert line("hosts", 0) == 4 and line("hosts", 0, "host") == 5
    assert line("hosts", 1) == 7  # a block mapping starts at its first key
    assert line("hosts", 1, "tags", 1) == 10
    assert line("hosts", 2, "port") == 12 and line("hosts", 2, "port", key=True) == 12
    # A path that goes nowhere stops at the deepest value found.
    assert line("hosts", 1, "missing", "deeper") == 7
    assert line("hosts", 9) == 4  # the list itself, which starts at its first `-`
    assert line_at(marks, ()) == 1


@WAYS
def test_a_merged_key_has_the_line_it_was_written_on(tmp_path, prefix):
    path = tmp_path / "pods.yaml"
    path.write_text(prefix + "base: &b {user: root, port: 22}\nhost:\n  <<: *b\n  port: 2222\n")
    data, marks = load_yaml_document(path, "test document")
    shift = prefix.count("\n")
    assert data["host"] == {"user": "root", "port": 2222}
    assert line_at(marks, ("host", "user")) == 1 + shift
    assert line_at(marks, ("host", "port")) == 4 + shift  # its own value, which is the one kept


@WAYS
def test_aliases_expanding_past_the_budget_are_refused(tmp_path, prefix):
    path = tmp_path / "bomb.yaml"
    levels = ["a: &a [" + ", ".join(["x"] * 20) + "]"]
    levels += [f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 20) + "]" for i in range(5)]
    path.write_text(prefix + "\n".join(levels) + "\n")  # 20**6 values
    with pytest.raises(InputLimitError, match=r"bomb.yaml:\d+: expands to more than 4,000,000 values"):
        load_yaml_document(path, "test document")


@WAYS
def test_an_alias_inside_its_own_anchor_is_refused(tmp_path, prefix):
    path = tmp_path / "loop.yaml"
    path.write_text(prefix + "hosts: &h [{host: x, tags: *h}]\n")
    with pytest.raises(InputLimitError, match="an alias refers to a value that contains it"):
        load_yaml_document(path, "test document")


@WAYS
def test_a_duplicate_key_names_both_lines(tmp_path, prefix):
    path = tmp_path / "pods.yaml"
    path.write_text(prefix + "hosts:\n  - {host: a,\n     host: b}\n")
    shift = prefix.count("\n")
    with pytest.raises(
        ConfigError, match=rf"pods.yaml:{3 + shift}: duplicate key 'host' \(first at line {2 + shift}\)"
    ):
        load_yaml_document(path, "test document")


@WAYS
def test_nesting_past_the_limit_is_refused_where_it_starts(tmp_path, prefix):
    path = tmp_path / "deep.yaml"
    at_limit = "x: " + "[" * (MAX_YAML_DEPTH - 1) + "]" * (MAX_YAML_DEPTH - 1) + "\n"
    path.write_text(prefix + at_limit)
    load_yaml_document(path, "test document")
    path.write_text(prefix + "x:\n  " + "[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH + "\n")
    shift = prefix.count("\n")
    with pytest.raises(InputLimitError, match=rf"deep.yaml:{2 + shift}: nested more than {MAX_YAML_DEPTH} levels deep"):
        load_yaml_document(path, "test document")


def test_deep_nesting_never_reaches_libyamls_composer(tmp_path):
    # libyaml's composer overflows the C stack on this and kills the process (SIGSEGV).
    path = tmp_path / "deep.yaml"
    path.write_text(COMPOSED + "deep: " + "[" * 50000 + "]" * 50000 + "\n")
    with pytest.raises(InputLimitError, match="deep.yaml:2: nested more than"):
        load_yaml_document(path, "test document")


def test_a_second_document_is_an_error_naming_its_line(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text("hosts: []\n---\nhosts: []\n")
    with pytest.raises(
        ConfigError,
        match="two.yaml:2: YAML syntax error: expected a single document in the stream, but found another document",
    ):
        load_yaml_document(path, "test document")


def test_a_value_its_tag_cannot_read_is_one_line_with_its_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("hosts:\n  - {host: a, port: !!int twenty}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:2: cannot read 'twenty' as tag:yaml.org,2002:int"):
        load_yaml_document(path, "test document")


def test_an_unknown_tag_is_a_syntax_error_not_a_traceback(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("a: 1\nb: !!python/object:os.system x\n")
    with pytest.raises(ConfigError, match="bad.yaml:2: YAML syntax error: could not determine a constructor"):
        load_yaml_document(path, "test document")


def test_a_date_key_is_built_like_pyyaml(tmp_path):
    path = tmp_path / "dated.yaml"
    path.write_text("2024-01-02: release\n")
    data, marks = load_yaml_document(path, "test document")
    assert data == {datetime.date(2024, 1, 2): "release"}
    assert line_at(marks, ("2024-01-02",), key=True) == 1


def test_a_number_of_thousands_of_digits_is_one_short_line(tmp_path):
    # int() refuses it; the line says what it is rather than repeating its 5,000 digits.
    path = tmp_path / "pods.yaml"
    path.write_text("hosts:\n  - {host: a, port: " + "9" * 5000 + "}\n")
    with pytest.raises(ConfigError) as raised:
        load_yaml_document(path, "test document")
    assert str(raised.value) == f"{path}:2: a number of 5000 digits is out of range"


# A stricter file (the policy) refuses aliases and keys that are not names, whichever way
# the document is built.
STRICT = {"aliases": False, "name_keys": True}


@WAYS
@pytest.mark.parametrize(
    "text, line, words",
    [
        ("base: &b [1]\nother: *b\n", 1, "YAML aliases (*name) are not allowed in a policy"),
        ("name: &n pod\nother: *n\n", 1, "YAML aliases (*name) are not allowed in a policy"),
        ("a: 1\ntrue: 2\n", 2, "a key must be a name, not True"),
        ("a: 1\n~: 2\n", 2, "a key must be a name, not None"),
        ("a: 1\n? [x]\n: 2\n", 2, "a key must be a name, not"),
    ],
)
def test_a_strict_document_refuses_aliases_and_keys_that_are_not_names(tmp_path, prefix, text, line, words):
    path = tmp_path / "computefence.yaml"
    path.write_text(prefix + text)
    with pytest.raises(ConfigError) as raised:
        load_yaml_document(path, "policy", **STRICT)
    assert str(raised.value).startswith(f"{path}:{line + prefix.count(chr(10))}: {words}")


@WAYS
def test_a_strict_document_takes_names_and_numbers_as_keys(tmp_path, prefix):
    path = tmp_path / "computefence.yaml"
    path.write_text(prefix + "severity: {gpu.ecc: block}\n1: one\n2.5: two and a half\n'yes': quoted\n")
    data, _ = load_yaml_document(path, "policy", **STRICT)
    assert data["severity"] == {"gpu.ecc": "block"} and data[1] == "one" and data[2.5] and data["yes"] == "quoted"
