"""Subject wildcards (levels and prefix dialects), private topics, and the index."""

from __future__ import annotations

import copy
import pickle
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actorbus.bus.subjects import (
    Wildcard,
    WildcardIndex,
    is_private,
    new_private_subject,
)
from actorbus.errors import SubjectPatternError, UsageError

PROPERTY = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# ----------------------------------------------------------------- reference (re)


def reference_regex(wildcard: Wildcard) -> re.Pattern[str]:
    """An independent translation of a pattern into a regex over the whole subject."""
    text = wildcard.text
    if wildcard.dialect == "prefix":
        if text.endswith("**"):
            return re.compile(re.escape(text[:-2]) + ".*", re.DOTALL)
        return re.compile(re.escape(text[:-1]) + "[^/]*", re.DOTALL)
    out = []
    for level in text[1:].split("/"):
        if level == "*":
            out.append("/[^/]+")
        elif level == "...":
            out.append("(?:/[^/]+)+")
        else:
            out.append("/" + re.escape(level))
    return re.compile("".join(out), re.DOTALL)


def reference_matches(wildcard: Wildcard, subject: str) -> bool:
    if subject.startswith("."):
        return False
    return reference_regex(wildcard).fullmatch(subject) is not None


# ------------------------------------------------------------------ seed tables

LEVELS_TABLE = [
    ("/foo/*/bar", "/foo/x/bar", True),
    ("/foo/*/bar", "/foo/x/y/bar", False),
    ("/foo/*/bar", "/foo/bar", False),
    ("/foo/*/bar", "/foo/x/baz", False),
    ("/foo/...", "/foo/x", True),
    ("/foo/...", "/foo/x/y", True),
    ("/foo/...", "/foo", False),
    ("/foo/...", "/foobar/x", False),
    ("/foo/*", "/foo/x", True),
    ("/foo/*", "/foo/x/y", False),
    ("/*", "/a", True),
    ("/*", "/a/b", False),
    ("/...", "/a", True),
    ("/...", "/a/b/c", True),
    ("/*/...", "/a", False),
    ("/*/...", "/a/b", True),
]

PREFIX_TABLE = [
    ("foo/bar*", "foo/bar", True),
    ("foo/bar*", "foo/bark", True),
    ("foo/bar*", "foo/baa", False),
    ("foo/bar*", "foo/bar/foobar", False),
    ("foo/bar**", "foo/bar/foobar", True),
    ("foo/bar**", "foo/bar", True),
    ("foo/bar**", "foo/bark", True),
    ("foo/bar**", "foo/baa", False),
    ("foo/bar**", "foo/ba", False),
]

# ---------------------------------------------------------------- own edge cases

DEEP = 10_000
deep_x = "/" + "/".join(["x"] * DEEP)  # 10,000 levels, all "x"
deep_end = "/" + "/".join(["x"] * (DEEP - 1) + ["end"])

LEVELS_EDGES = [
    # empty levels, root, trailing slash: matched by no levels pattern
    ("/a/...", "/a//b", False),
    ("/a/*/b", "/a//b", False),
    ("/a/...", "/a/b/", False),
    ("/*", "/a/", False),
    ("/...", "/", False),
    ("/*", "/", False),
    ("/...", "", False),
    ("/...", "//", False),
    ("/...", "a/b", False),  # no leading "/"
    ("/*", "a", False),
    # unicode, spaces, other characters are plain
    ("/prix/*/bid", "/prix/€/bid", True),
    ("/prix/€/*", "/prix/€/bid", True),
    ("/prix/€/*", "/prix/e/bid", False),
    ("/a b/*", "/a b/c d", True),
    ("/a.b/*", "/axb/c", False),  # "." is not a regex dot
    ("/./*", "/./x", True),
    ("/../*", "/../x", True),
    # `*` inside a subject level is a plain character
    ("/a/*", "/a/*", True),
    ("/a/*/c", "/a/b*/c", True),
    ("/a/*/c", "/a/*/b", False),
    ("/*/x", "/*/x", True),
    # very deep subjects
    ("/x/...", deep_x, True),
    ("/...", deep_x, True),
    ("/y/...", deep_x, False),
    ("/x/*", deep_x, False),
    ("/" + "/".join(["x"] * (DEEP - 2) + ["*", "end"]), deep_end, True),
    ("/" + "/".join(["x"] * (DEEP - 2) + ["*", "end"]), deep_x, False),
    ("/" + "/".join(["x"] * (DEEP - 1) + ["*"]), deep_end, True),
    ("/" + "/".join(["x"] * (DEEP - 1) + ["*"]), deep_x + "/x", False),
    ("/" + "/".join(["x"] * (DEEP - 1) + ["..."]), deep_x + "/x/y", True),
]

PREFIX_EDGES = [
    ("foo*", "foo", True),  # subject equal to the prefix
    ("foo**", "foo", True),
    ("foo/*", "foo/", True),
    ("foo/*", "foo", False),
    ("*", "", True),  # empty prefix
    ("*", "anything", True),
    ("*", "a/b", False),
    ("*", "/a", False),
    ("**", "", True),
    ("**", "a/b/c", True),
    ("**", "/a", True),
    ("a*", "abc", True),  # no "/" at all
    ("a*", "bac", False),
    ("a/*", "a/*", True),  # `*` in a subject is plain
    ("a.*", "axb", False),
    ("€*", "€uro", True),
    ("/foo/*", "/foo/x", True),  # a prefix may look like a levels subject
    ("/foo/*", "/foo/x/y", False),
    ("**", deep_x, True),
    ("/x/x*", deep_x, False),
    ("/x/x**", deep_x, True),
]


def _check_both_ways(wildcard: Wildcard, subject: str, expected: bool) -> None:
    assert wildcard.matches(subject) is expected
    index: WildcardIndex[str] = WildcardIndex()
    index.add(wildcard, "v")
    assert index.match(subject) == (["v"] if expected else [])


@pytest.mark.parametrize(("pattern", "subject", "expected"), LEVELS_TABLE + LEVELS_EDGES)
def test_levels_matching(pattern: str, subject: str, expected: bool) -> None:
    wildcard = Wildcard.levels(pattern)
    _check_both_ways(wildcard, subject, expected)
    if len(subject) < 1000:
        assert reference_matches(wildcard, subject) is expected


@pytest.mark.parametrize(("pattern", "subject", "expected"), PREFIX_TABLE + PREFIX_EDGES)
def test_prefix_matching(pattern: str, subject: str, expected: bool) -> None:
    wildcard = Wildcard.prefix(pattern)
    _check_both_ways(wildcard, subject, expected)
    assert reference_matches(wildcard, subject) is expected


# --------------------------------------------------------------------- refusals

LEVELS_REFUSED = [
    ("foo/*", "does not start with '/'"),
    ("", "does not start with '/'"),
    ("*", "does not start with '/'"),
    ("/", "empty level"),
    ("//", "empty level"),
    ("/foo//*", "empty level"),
    ("//foo/*", "empty level"),
    ("/foo/*/", "empty level"),
    ("/foo/.../", "empty level"),
    ("/foo/ba*", "`*` mixed into a level"),
    ("/foo/*bar/*", "`*` mixed into a level"),
    ("/**", "`*` mixed into a level"),
    ("/foo/.../bar", "`...` is not the last level"),
    ("/.../...", "`...` is not the last level"),
    ("/foo/a...", "`...` mixed into a level"),
    ("/foo/..../*", "`...` mixed into a level"),
    ("/foo/bar", "no wildcard: subscribe to the subject itself"),
    ("/foo", "no wildcard"),
    ("/€/..", "no wildcard"),
]

PREFIX_REFUSED = [
    ("foo", "does not end with '*' or '**'"),
    ("", "does not end with '*' or '**'"),
    ("foo*/bar", "does not end with '*' or '**'"),
    ("***", "`*` before the final"),
    ("fo*o*", "`*` before the final"),
    ("*a*", "`*` before the final"),
    ("foo***", "`*` before the final"),
    (".*", "a wildcard never matches a private topic"),
    (".**", "a wildcard never matches a private topic"),
    (".foo/*", "a wildcard never matches a private topic"),
]


@pytest.mark.parametrize(("pattern", "rule"), LEVELS_REFUSED)
def test_levels_refusals(pattern: str, rule: str) -> None:
    with pytest.raises(SubjectPatternError) as caught:
        Wildcard.levels(pattern)
    assert isinstance(caught.value, UsageError)
    assert repr(pattern) in str(caught.value)
    assert rule in str(caught.value)


@pytest.mark.parametrize(("pattern", "rule"), PREFIX_REFUSED)
def test_prefix_refusals(pattern: str, rule: str) -> None:
    with pytest.raises(SubjectPatternError) as caught:
        Wildcard.prefix(pattern)
    assert isinstance(caught.value, UsageError)
    assert repr(pattern) in str(caught.value)
    assert rule in str(caught.value)


@pytest.mark.parametrize("build", [Wildcard.levels, Wildcard.prefix])
@pytest.mark.parametrize("text", [None, 5, b"/a/*", ["/a/*"]])
def test_a_pattern_that_is_not_a_str_is_refused(build: object, text: object) -> None:
    with pytest.raises(SubjectPatternError, match="a pattern is a str") as caught:
        build(text)  # type: ignore[operator]
    assert repr(text) in str(caught.value)


def test_the_refusal_message_says_what_to_do() -> None:
    with pytest.raises(SubjectPatternError, match=r"'/foo/\*'"):
        Wildcard.levels("/foo/ba*")
    with pytest.raises(SubjectPatternError, match=r"'/foo/\.\.\.'"):
        Wildcard.levels("/foo/.../bar")
    with pytest.raises(SubjectPatternError, match=r"'/\.\.\.'"):
        Wildcard.levels("/")
    with pytest.raises(SubjectPatternError, match=r"'/foo/\*'"):
        Wildcard.levels("foo/*")


def test_error_is_exported_from_errors() -> None:
    import actorbus.errors

    assert "SubjectPatternError" in actorbus.errors.__all__
    assert issubclass(SubjectPatternError, UsageError)


# ---------------------------------------------------------------- the Wildcard value


def test_wildcard_value_semantics() -> None:
    a = Wildcard.levels("/foo/*")
    assert a == Wildcard.levels("/foo/*")
    assert hash(a) == hash(Wildcard.levels("/foo/*"))
    assert a != Wildcard.prefix("/foo/*")  # same text, other dialect
    assert a != "/foo/*"
    assert len({a, Wildcard.levels("/foo/*"), Wildcard.prefix("/foo/*")}) == 2
    assert a.text == "/foo/*" and a.dialect == "levels"
    assert Wildcard.prefix("x**").dialect == "prefix"
    assert str(a) == "/foo/*"
    assert repr(a) == "Wildcard.levels('/foo/*')"
    assert repr(Wildcard.prefix("a/b**")) == "Wildcard.prefix('a/b**')"
    assert eval(repr(a)) == a
    for other in (pickle.loads(pickle.dumps(a)), copy.copy(a), copy.deepcopy(a)):
        assert other == a and other.matches("/foo/x")


def test_wildcard_is_immutable() -> None:
    a = Wildcard.prefix("a*")
    with pytest.raises(AttributeError):
        a.text = "b*"
    with pytest.raises(AttributeError):
        del a.dialect
    with pytest.raises(AttributeError):
        a.other = 1
    assert a.text == "a*"


def test_wildcard_is_built_by_its_class_methods_only() -> None:
    with pytest.raises(UsageError, match=r"Wildcard.levels\(text\)"):
        Wildcard()


# ---------------------------------------------------------------- private topics


def test_new_private_subjects_are_distinct_and_private() -> None:
    made = [new_private_subject() for _ in range(2000)]
    assert len(set(made)) == len(made)
    for subject in made:
        assert subject.startswith(".")
        assert is_private(subject)
        assert "/" not in subject and "*" not in subject
        assert len(subject) == 25


def test_is_private() -> None:
    assert is_private(".x")
    assert is_private(".")
    assert not is_private("")
    assert not is_private("/.x")
    assert not is_private("x.")


EVERYTHING = [
    Wildcard.prefix("**"),
    Wildcard.prefix("*"),
    Wildcard.levels("/..."),
    Wildcard.levels("/*"),
]


@pytest.mark.parametrize("subject", [new_private_subject(), ".", ".a/b", "./x", ".**", "./..."])
def test_no_wildcard_matches_a_private_topic(subject: str) -> None:
    index: WildcardIndex[Wildcard] = WildcardIndex()
    for wildcard in EVERYTHING:
        assert not wildcard.matches(subject)
        index.add(wildcard, wildcard)
    assert index.match(subject) == []
    assert index.match("/not/private") == [Wildcard.prefix("**"), Wildcard.levels("/...")]


# --------------------------------------------------------------------- the index


def test_index_basics() -> None:
    index: WildcardIndex[str] = WildcardIndex()
    assert not index and len(index) == 0
    assert index.match("/a") == [] and index.wildcards() == []
    w1, w2, w3 = Wildcard.levels("/a/*"), Wildcard.prefix("/a*"), Wildcard.levels("/...")
    index.add(w1, "one")
    index.add(w2, "two")
    index.add(w1, "three")
    index.add(w3, "four")
    assert index and len(index) == 4
    assert index.wildcards() == [w1, w2, w3]
    assert index.match("/a/b") == ["one", "three", "four"]  # registration order
    assert index.match("/ab") == ["two", "four"]
    assert index.match("/a") == ["two", "four"]
    assert index.match("nothing") == []
    index.remove(w1, "one")
    assert index.match("/a/b") == ["three", "four"]
    index.remove(w1, "three")
    assert index.wildcards() == [w2, w3]
    index.remove(w2, "two")
    index.remove(w3, "four")
    assert not index and len(index) == 0 and index.wildcards() == []
    assert index.match("/a/b") == []


def test_match_returns_a_new_list() -> None:
    index: WildcardIndex[int] = WildcardIndex()
    index.add(Wildcard.prefix("**"), 1)
    first = index.match("x")
    first.append(2)
    assert index.match("x") == [1]


def test_same_value_twice_counts_twice() -> None:
    index: WildcardIndex[str] = WildcardIndex()
    w = Wildcard.prefix("a*")
    index.add(w, "v")
    index.add(w, "v")
    assert len(index) == 2 and index.match("ab") == ["v", "v"]
    index.remove(w, "v")
    assert len(index) == 1 and index.match("ab") == ["v"]


def test_remove_compares_values_by_identity() -> None:
    index: WildcardIndex[list[int]] = WildcardIndex()
    w = Wildcard.levels("/a/*")
    held, lookalike = [1], [1]
    index.add(w, held)
    with pytest.raises(UsageError, match=r"Wildcard.levels\('/a/\*'\)"):
        index.remove(w, lookalike)
    index.remove(w, held)
    assert not index


def test_remove_an_absent_registration_is_a_usage_error() -> None:
    index: WildcardIndex[str] = WildcardIndex()
    with pytest.raises(UsageError, match="not registered"):
        index.remove(Wildcard.prefix("a*"), "v")
    index.add(Wildcard.prefix("a*"), "v")
    with pytest.raises(UsageError, match="not registered"):
        index.remove(Wildcard.prefix("a**"), "v")  # other pattern, same prefix
    with pytest.raises(UsageError, match="not registered"):
        index.remove(Wildcard.prefix("a*"), "w")
    assert len(index) == 1


def test_add_refuses_a_non_wildcard() -> None:
    index: WildcardIndex[str] = WildcardIndex()
    with pytest.raises(UsageError, match=r"Wildcard.levels\(\.\.\.\)"):
        index.add("/a/*", "v")  # type: ignore[arg-type]


def test_index_never_tries_patterns_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    index: WildcardIndex[int] = WildcardIndex()
    for i in range(200):
        index.add(Wildcard.levels(f"/n{i}/*/x"), i)
        index.add(Wildcard.prefix(f"p{i}/*"), i)
    index.add(Wildcard.levels("/n7/..."), -1)

    def refuse(self: Wildcard, subject: str) -> bool:
        raise AssertionError("the index looped over the patterns")

    monkeypatch.setattr(Wildcard, "matches", refuse)
    assert index.match("/n7/q/x") == [7, -1]
    assert index.match("p42/z") == [42]
    assert index.match("/zzz/q/x") == []


def test_deep_patterns_and_subjects_in_the_index() -> None:
    index: WildcardIndex[str] = WildcardIndex()
    star_near_end = Wildcard.levels("/" + "/".join(["x"] * (DEEP - 2) + ["*", "end"]))
    rest = Wildcard.levels("/x/x/...")
    index.add(star_near_end, "star")
    index.add(rest, "rest")
    assert index.match(deep_end) == ["star", "rest"]
    assert index.match(deep_x) == ["rest"]
    assert index.match(deep_x + "/x//") == []
    index.remove(star_near_end, "star")
    assert index.match(deep_end) == ["rest"]
    index.remove(rest, "rest")
    assert index.match(deep_end) == []


def test_trie_is_pruned_after_removal() -> None:
    index: WildcardIndex[int] = WildcardIndex()
    w = Wildcard.levels("/a/b/c/*")
    index.add(w, 1)
    index.add(Wildcard.levels("/a/*"), 2)
    index.remove(w, 1)
    root = index._root
    assert list(root.children) == ["a"]
    assert list(root.children["a"].children) == [""]  # only the `*` branch is left


# -------------------------------------------------------------------- properties

LEVEL_WORDS = ["a", "b", "ab", "€", "*"]
SUBJECT_WORDS = ["a", "b", "ab", "€", "*", "", "..."]

levels_patterns = st.builds(
    lambda levels, rest: "/" + "/".join(levels + (["..."] if rest else [])),
    st.lists(st.sampled_from(LEVEL_WORDS), min_size=0, max_size=4),
    st.booleans(),
).filter(lambda text: "*" in text.split("/") or text.endswith("/..."))

prefix_patterns = st.builds(
    lambda head, deep: head + ("**" if deep else "*"),
    st.text(alphabet="ab/€.", max_size=5).filter(lambda head: not head.startswith(".")),
    st.booleans(),
)

any_pattern = st.one_of(
    levels_patterns.map(Wildcard.levels),
    prefix_patterns.map(Wildcard.prefix),
)

subjects = st.one_of(
    st.lists(st.sampled_from(SUBJECT_WORDS), min_size=0, max_size=6).map(
        lambda levels: "/" + "/".join(levels)
    ),
    st.lists(st.sampled_from(SUBJECT_WORDS), min_size=1, max_size=6).map("/".join),
    st.text(alphabet="ab/*.€", max_size=8),
    st.builds(lambda tail: "." + tail, st.text(alphabet="ab/", max_size=4)),
)


@PROPERTY
@given(wildcard=any_pattern, subject=subjects)
def test_matches_agrees_with_the_regex_reference(wildcard: Wildcard, subject: str) -> None:
    assert wildcard.matches(subject) == reference_matches(wildcard, subject)


@PROPERTY
@given(
    registrations=st.lists(st.tuples(any_pattern, st.integers(0, 3)), max_size=25),
    probes=st.lists(subjects, min_size=1, max_size=10),
)
def test_index_agrees_with_matches(
    registrations: list[tuple[Wildcard, int]], probes: list[str]
) -> None:
    values = [object() for _ in range(4)]
    index: WildcardIndex[object] = WildcardIndex()
    model = [(wildcard, values[i]) for wildcard, i in registrations]
    for wildcard, value in model:
        index.add(wildcard, value)
    assert len(index) == len(model)
    for subject in probes:
        expected = [value for wildcard, value in model if wildcard.matches(subject)]
        got = index.match(subject)
        assert sorted(map(id, got)) == sorted(map(id, expected))  # as a multiset
        assert got == expected  # and in registration order


@PROPERTY
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("add"), any_pattern, st.integers(0, 2)),
            st.tuples(st.just("remove"), st.integers(0, 1000), st.none()),
            st.tuples(st.just("absent"), any_pattern, st.integers(0, 2)),
        ),
        max_size=40,
    ),
    probes=st.lists(subjects, min_size=1, max_size=6),
)
def test_add_remove_sequences_keep_the_index_right(
    ops: list[tuple[str, object, int | None]], probes: list[str]
) -> None:
    values = [object() for _ in range(3)]
    index: WildcardIndex[object] = WildcardIndex()
    model: list[tuple[Wildcard, object]] = []
    for op, arg, i in ops:
        if op == "add":
            assert isinstance(arg, Wildcard) and i is not None
            index.add(arg, values[i])
            model.append((arg, values[i]))
        elif op == "remove" and model:
            assert isinstance(arg, int)
            wildcard, value = model[arg % len(model)]
            index.remove(wildcard, value)
            first = next(k for k, (w, v) in enumerate(model) if w == wildcard and v is value)
            del model[first]
        elif op == "absent":
            assert isinstance(arg, Wildcard) and i is not None
            if not any(w == arg and v is values[i] for w, v in model):
                with pytest.raises(UsageError):
                    index.remove(arg, values[i])
        assert len(index) == len(model) and bool(index) == bool(model)
        held = index.wildcards()
        assert len(held) == len(set(held)) and set(held) == {w for w, _ in model}
        for subject in probes:
            expected = [value for wildcard, value in model if wildcard.matches(subject)]
            assert index.match(subject) == expected
    for wildcard, value in list(model):
        index.remove(wildcard, value)
    assert not index and index._root.children == {} and index._prefixes == {}
    assert index._lengths == [] and index._deepest == 0
