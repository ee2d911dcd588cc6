"""The .properties reader: syntax, escapes, line numbers, errors, encoding."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from loguru import logger

from actorbus import ConfigError
from actorbus.config import Property, format_property, parse_properties, read_properties


@pytest.fixture
def warnings_log() -> Iterator[list[str]]:
    """Messages the library logs at WARNING or above while the test runs."""
    records: list[str] = []
    logger.enable("actorbus")
    sink = logger.add(lambda m: records.append(m.record["message"]), level="WARNING")
    try:
        yield records
    finally:
        logger.remove(sink)
        logger.disable("actorbus")


def write(tmp_path: Path, text: str, name: str = "app.properties") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def pairs(tmp_path: Path, text: str) -> dict[str, str]:
    return {p.key: p.value for p in read_properties(write(tmp_path, text))}


def parse_error(tmp_path: Path, text: str) -> tuple[ConfigError, Path]:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        read_properties(path)
    return info.value, path


# ---------------------------------------------------------------------- separators


@pytest.mark.parametrize(
    "line",
    [
        "key=value",
        "key:value",
        "key value",
        "key = value",
        "key : value",
        "key\tvalue",
        "key\f\fvalue",
        "   key   =   value   ",
        "\t key:\tvalue\t",
    ],
)
def test_every_separator_splits_key_and_value(tmp_path: Path, line: str) -> None:
    assert pairs(tmp_path, line + "\n") == {"key": "value"}


def test_only_the_first_separator_splits(tmp_path: Path) -> None:
    text = "a==b\nc = :d\ne f=g:h\nurl=http://host:80/x?y=z\n"
    assert pairs(tmp_path, text) == {
        "a": "=b",
        "c": ":d",
        "e": "f=g:h",
        "url": "http://host:80/x?y=z",
    }


def test_a_key_alone_has_an_empty_value(tmp_path: Path) -> None:
    assert pairs(tmp_path, "lonely\nempty=\nspaced =   \n") == {
        "lonely": "",
        "empty": "",
        "spaced": "",
    }


def test_entries_remember_their_line(tmp_path: Path) -> None:
    path = write(tmp_path, "# head\n\na=1\n  ! note\nb=2\\\n  more\nc=3")
    assert read_properties(path) == [
        Property("a", "1", 3),
        Property("b", "2more", 5),
        Property("c", "3", 7),
    ]


# ------------------------------------------------------------------------ comments


def test_hash_and_bang_lines_are_comments(tmp_path: Path) -> None:
    text = "# a comment\n! another\n   # indented\n\t!tabbed\nkey=value\n"
    assert pairs(tmp_path, text) == {"key": "value"}


def test_hash_inside_a_value_is_not_a_comment(tmp_path: Path) -> None:
    props = read_properties(write(tmp_path, "color=#ff0000\ntag=a#b\nbang=x!y\n"))
    assert [(p.value, p.trailing_comment_at) for p in props] == [
        ("#ff0000", None),
        ("a#b", None),
        ("x!y", None),
    ]


def test_a_comment_line_ending_in_backslash_does_not_continue(tmp_path: Path) -> None:
    assert pairs(tmp_path, "# comment \\\nkey=value\n") == {"key": "value"}


# -------------------------------------------------------------------- continuation


def test_backslash_continues_a_line_and_drops_leading_whitespace(tmp_path: Path) -> None:
    text = "fruits = apple, \\\n         banana, \\\n\t\tpear\nnext=1\n"
    assert pairs(tmp_path, text) == {"fruits": "apple, banana, pear", "next": "1"}


def test_a_continued_line_starting_with_hash_is_value(tmp_path: Path) -> None:
    assert pairs(tmp_path, "key=a\\\n  # not a comment\n") == {"key": "a# not a comment"}


def test_an_even_number_of_backslashes_does_not_continue(tmp_path: Path) -> None:
    assert pairs(tmp_path, "path=C:\\\\\nnext=1\n") == {"path": "C:\\", "next": "1"}


def test_continuation_in_the_key(tmp_path: Path) -> None:
    assert pairs(tmp_path, "long\\\n  key=v\n") == {"longkey": "v"}


def test_continuation_at_end_of_file_continues_into_nothing(tmp_path: Path) -> None:
    assert pairs(tmp_path, "key=value\\") == {"key": "value"}


def test_continuation_onto_a_blank_line_ends_the_entry(tmp_path: Path) -> None:
    assert pairs(tmp_path, "key=value\\\n   \nnext=1\n") == {"key": "value", "next": "1"}


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_every_line_break(tmp_path: Path, newline: str) -> None:
    text = newline.join(["a=1", "b=2\\", "  3", "c=4"]) + newline
    path = write(tmp_path, text)
    assert read_properties(path) == [
        Property("a", "1", 1),
        Property("b", "23", 2),
        Property("c", "4", 4),
    ]


def test_only_cr_and_lf_break_lines(tmp_path: Path) -> None:
    # str.splitlines() would split at \v, \x1c and U+2028; Java does not.
    assert pairs(tmp_path, "a=x\vy\x1cz\u2028w\n") == {"a": "x\vy\x1cz\u2028w"}


# ------------------------------------------------------------------------- escapes


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("\\t", "\t"),
        ("\\n", "\n"),
        ("\\r", "\r"),
        ("\\f", "\f"),
        ("\\\\", "\\"),
        ("\\=", "="),
        ("\\:", ":"),
        ("\\#", "#"),
        ("\\!", "!"),
        ("\\;", ";"),
        ("\\ ", " "),
        ("\\u0041", "A"),
        ("\\u00e9", "é"),
        ("\\u00E9", "é"),
        ("\\uD83D\\uDE00", "\U0001f600"),
    ],
)
def test_every_escape_in_values_and_keys(tmp_path: Path, written: str, meant: str) -> None:
    assert pairs(tmp_path, f"k{written}k=<{written}>\n") == {f"k{meant}k": f"<{meant}>"}


def test_escaped_separators_stay_in_the_key(tmp_path: Path) -> None:
    assert pairs(tmp_path, "a\\=b=1\nc\\:d:2\ne\\ f 3\n") == {"a=b": "1", "c:d": "2", "e f": "3"}


def test_escaped_trailing_whitespace_is_kept(tmp_path: Path) -> None:
    assert pairs(tmp_path, "pad=  x \\  \ntab=x\\t\n") == {"pad": "x  ", "tab": "x\t"}


def test_escaped_leading_whitespace_is_kept(tmp_path: Path) -> None:
    assert pairs(tmp_path, "pad=\\  x\n") == {"pad": "  x"}


def test_escape_split_by_a_continuation(tmp_path: Path) -> None:
    assert pairs(tmp_path, "k=\\u00\\\n   e9\n") == {"k": "é"}


@pytest.mark.parametrize(
    "bad",
    ["\\u12", "\\u12G4", "\\u", "\\uXYZW", "\\u-123"],
)
def test_malformed_unicode_escape_names_file_and_line(tmp_path: Path, bad: str) -> None:
    err, path = parse_error(tmp_path, f"ok=1\nkey={bad}\n")
    assert (err.path, err.line, err.key) == (str(path), 2, "key")
    assert str(err).startswith(f"{path}:2: malformed \\u escape")
    assert "expected \\u followed by exactly 4 hex digits" in str(err)


def test_malformed_unicode_escape_on_a_continued_line_names_that_line(tmp_path: Path) -> None:
    err, path = parse_error(tmp_path, "key=one,\\\n    two,\\\n    \\uZZZZ\n")
    assert err.line == 3
    assert str(err).startswith(f"{path}:3: malformed \\u escape '\\uZZZZ'")


def test_malformed_unicode_escape_in_a_key(tmp_path: Path) -> None:
    err, path = parse_error(tmp_path, "k\\u00=v\n")
    assert (err.line, err.key) == (1, None)
    assert "malformed \\u escape" in str(err)


@pytest.mark.parametrize("bad", ["\\uD83D", "\\uD83Dx", "\\uD83D\\u0041", "\\uDE00"])
def test_lone_surrogates_are_rejected(tmp_path: Path, bad: str) -> None:
    err, path = parse_error(tmp_path, f"key={bad}\n")
    assert str(err).startswith(f"{path}:1: lone UTF-16 surrogate")


@pytest.mark.parametrize("bad", ["\\d", "\\q", '\\"', "\\x41"])
def test_unknown_escapes_are_rejected(tmp_path: Path, bad: str) -> None:
    err, path = parse_error(tmp_path, f"dir=C:{bad}ir\n")
    assert str(err).startswith(f"{path}:1: unknown escape '{bad[:2]}'; allowed escapes are")
    assert "write \\\\ for a literal backslash" in str(err)


# ---------------------------------------------------------------------- whitespace


def test_surrounding_whitespace_is_trimmed_but_inner_kept(tmp_path: Path) -> None:
    assert pairs(tmp_path, " \t key \t=\t a  b \t\f\n") == {"key": "a  b"}


def test_non_java_whitespace_is_kept(tmp_path: Path) -> None:
    # Only space, tab and form feed are whitespace in a properties file.
    assert pairs(tmp_path, "key=\u00a0x\u00a0\n") == {"key": "\u00a0x\u00a0"}


# -------------------------------------------------------------- comment detection


@pytest.mark.parametrize(
    ("value", "at"),
    [
        ("4 ; four threads", 2),
        ("4\t# four", 2),
        ("a;b", None),
        ("a#b", None),
        ("a \\; b", None),
        ("a \\# b", None),
        ("x ; y ; z", 2),
    ],
)
def test_trailing_comment_lookalikes_are_marked(tmp_path: Path, value: str, at: int | None) -> None:
    [prop] = read_properties(write(tmp_path, f"key={value}\n"))
    assert prop.trailing_comment_at == at


# -------------------------------------------------------------------------- errors


@pytest.mark.parametrize("line", ["=value", ":value", " = value"])
def test_a_line_without_a_key_is_rejected(tmp_path: Path, line: str) -> None:
    err, path = parse_error(tmp_path, f"ok=1\n{line}\n")
    assert err.line == 2
    assert str(err).startswith(f"{path}:2: the line has no key")
    assert "has no key before its separator; expected key=value" in str(err)


def test_duplicate_key_last_wins_and_is_logged(tmp_path: Path, warnings_log: list[str]) -> None:
    path = write(tmp_path, "a=1\nb=2\na=3\n")
    assert read_properties(path) == [Property("b", "2", 2), Property("a", "3", 3)]
    assert warnings_log == [
        f"{path}:1: key 'a' is set again on line 3; the value from line 3 is used"
    ]


def test_parse_properties_labels_errors_with_the_given_path() -> None:
    with pytest.raises(ConfigError) as info:
        parse_properties("a=\\q", "inline.properties")
    assert str(info.value).startswith("inline.properties:1: unknown escape")


def test_parse_properties_default_label() -> None:
    with pytest.raises(ConfigError) as info:
        parse_properties("=x")
    assert str(info.value).startswith("<string>:1: ")


# ------------------------------------------------------------------------ encoding


def test_files_are_read_as_utf8(tmp_path: Path) -> None:
    assert pairs(tmp_path, "name=Zoë 😀\nnäme=1\n") == {"name": "Zoë 😀", "näme": "1"}


def test_a_utf8_byte_order_mark_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "bom.properties"
    path.write_bytes(b"\xef\xbb\xbfkey=value\n")
    assert read_properties(path) == [Property("key", "value", 1)]


def test_latin1_bytes_are_an_error_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.properties"
    path.write_bytes("a=1\r\nb=2\nname=Zo\u00eb\n".encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        read_properties(path)
    assert info.value.line == 3
    assert str(info.value).startswith(f"{path}:3: byte 0xeb is not valid UTF-8")
    assert "ISO-8859-1 default is not followed" in str(info.value)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "nope.properties"
    with pytest.raises(ConfigError) as info:
        read_properties(path)
    assert info.value.path == str(path)
    assert str(info.value) == f"{path}: cannot read configuration file: No such file or directory"
    assert isinstance(info.value.__cause__, FileNotFoundError)


def test_read_properties_accepts_str_paths(tmp_path: Path) -> None:
    path = write(tmp_path, "a=1\n")
    assert read_properties(str(path)) == [Property("a", "1", 1)]


# ------------------------------------------------------------------ format_property


def test_format_property_escapes_what_it_must() -> None:
    assert format_property(" k=:#!", " a\tb ; c\n ") == "\\ k\\=\\:\\#\\!=\\ a\\tb \\; c\\n\\ "
    assert format_property("k", "é 😀") == "k=é 😀"
    assert format_property("k", "\x00\u2028") == "k=\\u0000\\u2028"


def test_format_property_needs_a_key() -> None:
    with pytest.raises(ConfigError) as info:
        format_property("", "v")
    assert str(info.value) == "format_property() needs a non-empty key; found ''"


# ----------------------------------------------------------------------- properties

_SPECIAL = st.sampled_from(list("\\u=:#!; \t\f\r\nabD8E0F9") + ["\\u", "\\uD83D", "\\uDE00"])


@given(st.one_of(st.text(), st.lists(_SPECIAL).map("".join)))
@example("key=\\")
@example("\\")
@example("\\u")
@example("a=\\uD800\\")
def test_any_text_parses_or_raises_config_error(text: str) -> None:
    outcome = _parse_or_error(text)
    if isinstance(outcome, ConfigError):
        assert outcome.path == "fuzz.properties"
        assert outcome.line is not None
        assert 1 <= outcome.line <= text.count("\n") + text.count("\r") + 1
    else:
        assert len({p.key for p in outcome}) == len(outcome)
        assert all(p.key for p in outcome)


def _parse_or_error(text: str) -> list[Property] | ConfigError:
    """Anything but a ConfigError escapes and fails the test."""
    try:
        return parse_properties(text, "fuzz.properties")
    except ConfigError as err:
        return err


_TEXT = st.text(st.characters(exclude_categories=["Cs"]))


@given(_TEXT.filter(bool), _TEXT)
@example("k", " ; x ")
@example("#k", "\\u0041")
def test_format_property_round_trips(key: str, value: str) -> None:
    line = format_property(key, value)
    assert parse_properties(line) == [Property(key, value, 1)]
