"""The typed trigger and the hidden markers: one format on the wire, parsed, never searched."""

from __future__ import annotations

import pytest

from dsh_github_reviewer.core.triggers import (
    BotIdentity,
    Trigger,
    answers_command,
    answers_trigger,
    fixed_in_marker,
    fixed_marker,
    fixed_threads,
    gave_up_on,
    is_bot_review,
    is_summary,
    marks_fixed_in,
    meta_trigger,
    notice_marker,
    posted_answer,
    posted_trigger,
    reply_marker,
    review_marker,
    summary_marker,
    turn_meta,
)
from dsh_github_reviewer.github.models import Review, User

ME = BotIdentity("Shop-Review-Bot")


def post(body: str | None, login: str | None = "shop-review-bot", type: str = "User"
         ) -> Review:
    return Review(id=1, state="COMMENTED", body=body,
                  user=User(login=login, type=type) if login else None)


@pytest.mark.parametrize(("trigger", "text", "automatic"), [
    (Trigger.auto("acct", "abc"), "acct:auto:abc", True),
    (Trigger.retarget("acct", "abc", "def"), "acct:retarget:abc:def", True),
    (Trigger.cmd("acct", 5), "acct:cmd:5", False),
    (Trigger.chat("acct", 6), "acct:chat:6", False),
    (Trigger.bot("acct", 7), "acct:bot:7", False),
    (Trigger.ci("actions", 123, 2), "actions:ci:123.2", False),
])
def test_format_parse_and_automatic(trigger, text, automatic):
    assert str(trigger) == trigger.format() == text
    assert Trigger.parse(text) == trigger
    assert trigger.automatic is automatic


def test_a_retarget_is_automatic_and_counts_toward_the_cap():
    # Before the typed trigger, "automatic" was `":auto:" in trigger`: a retarget was not.
    assert Trigger.parse("demo:retarget:h:b").automatic
    assert not Trigger.parse("auto:cmd:5").automatic  # an account named "auto" is no kind


def test_comment_ids():
    assert Trigger.parse("a:cmd:5").comment_id == 5
    assert Trigger.parse("a:chat:991").comment_id == 991
    assert Trigger.parse("a:auto:123").comment_id is None


@pytest.mark.parametrize(("text", "error"), [
    ("nothing", "not a trigger"),
    ("acct:auto", "not a trigger"),
    ("acct:later:5", "kind 'later'"),
    (":auto:5", "account"),
    ("acct:auto:", "ident"),
])
def test_bad_triggers_say_what_is_wrong(text, error):
    with pytest.raises(ValueError, match=error):
        Trigger.parse(text)


def test_markers_are_unchanged_on_the_wire():
    # Posts already on GitHub carry these exact lines; a crash recovery must still find them.
    t = Trigger.cmd("demo", 42)
    assert review_marker(t) == "<!-- dsh-github-reviewer:trigger:demo:cmd:42 -->"
    assert reply_marker(42) == "<!-- dsh-github-reviewer:reply-to:42 -->"
    assert notice_marker(Trigger.bot("demo", 42)) == \
        "<!-- dsh-github-reviewer:gave-up:demo:bot:42 -->"
    assert fixed_marker([3, 4]) == "<!-- dsh-github-reviewer:fixed:3,4 -->"
    assert fixed_in_marker(7) == "<!-- dsh-github-reviewer:fixed-in:7 -->"
    assert summary_marker() == "<!-- dsh-github-reviewer:summary -->"


def test_the_trigger_of_a_posted_review_is_parsed_from_its_marker():
    t = Trigger.ci("actions", 5, 1)
    assert posted_trigger(post("Verdict: ok\n\n" + review_marker(t)), ME) == t
    assert posted_trigger(post("quoted: <!-- dsh-github-reviewer:trigger:nonsense -->"),
                          ME) is None
    assert posted_trigger(post("no marker"), ME) is None
    assert posted_trigger(post(None), ME) is None


def test_identity_compares_logins_case_insensitively():
    assert ME.owns("shop-review-bot") and ME.owns("SHOP-REVIEW-BOT")
    assert not ME.owns("shop-review-bot2") and not ME.owns("") and not ME.owns(None)
    assert ME.wrote(post("x")) and not ME.wrote(post("x", login=None))
    with pytest.raises(ValueError, match="login"):
        BotIdentity(" ")


ALL = "\n".join([review_marker(Trigger.auto("demo", "abc")), reply_marker(5),
                 notice_marker(Trigger.bot("demo", 5)), fixed_marker([9]), fixed_in_marker(9),
                 summary_marker()])


def test_every_reader_believes_the_bots_own_post():
    mine = post("text\n" + ALL)
    assert posted_trigger(mine, ME) == Trigger.auto("demo", "abc")
    assert is_bot_review(mine, ME) and answers_trigger(mine, ME, Trigger.auto("demo", "abc"))
    assert answers_command(mine, ME, 5) and gave_up_on(mine, ME, Trigger.bot("demo", 5))
    assert fixed_threads(mine, ME) == [9] and marks_fixed_in(mine, ME, 9)
    assert is_summary(mine, ME)


@pytest.mark.parametrize("login", ["alice", "maintainer", "shop-review-bot[bot]",
                                   "other-bot", None])
def test_no_reader_believes_anyone_elses_post(login):
    forged = post("text\n" + ALL, login=login, type="Bot" if login == "other-bot" else "User")
    assert posted_trigger(forged, ME) is None
    assert not is_bot_review(forged, ME)
    assert not answers_trigger(forged, ME, Trigger.auto("demo", "abc"))
    assert not answers_command(forged, ME, 5)
    assert not gave_up_on(forged, ME, Trigger.bot("demo", 5))
    assert fixed_threads(forged, ME) == [] and not marks_fixed_in(forged, ME, 9)
    assert not is_summary(forged, ME)


def test_no_module_but_the_readers_looks_for_markers():
    """One reader per marker kind, each taking the author; nothing else in the
    reviewer touches the marker text (the testing/ helpers count posts their own way)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[3] / "dsh_github_reviewer"
    found = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel == "core/triggers.py" or rel.startswith("testing/"):
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                found += [f"{rel}: imports {a.name}" for a in node.names
                          if "MARKER" in a.name]
            elif isinstance(node, ast.Name | ast.Attribute):
                name = node.id if isinstance(node, ast.Name) else node.attr
                if "MARKER" in name:
                    found.append(f"{rel}: uses {name}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and "<!-- dsh-github-reviewer:" in node.value and id(node) not in docstrings:
                found.append(f"{rel}: spells a marker")
    assert found == []


def test_a_turn_meta_trigger_is_read_back_typed_and_old_metas_still_load():
    """The reviewers store the trigger in a turn's meta as its wire form; reading it back
    gives the typed value. Metas of old sessions (none, or a string that is no trigger)
    answer nothing, as before, and never raise."""
    assert meta_trigger({"flow": "chat", "trigger": "demo:chat:5"}) == Trigger.chat("demo", 5)
    assert meta_trigger({"trigger": Trigger.cmd("demo", 7).format()}) == Trigger.cmd("demo", 7)
    for old in [{}, None, {"trigger": ""}, {"trigger": "auto:1"}, {"trigger": 42},
                {"trigger": "demo:nope:1"}]:
        assert meta_trigger(old) is None


def test_markers_are_written_from_a_typed_trigger_only():
    t = Trigger.auto("demo", "abc")
    assert review_marker(t) == "<!-- dsh-github-reviewer:trigger:demo:auto:abc -->"
    for bad in [t.format(), str(t), None]:
        with pytest.raises(TypeError):
            review_marker(bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            notice_marker(bad)  # type: ignore[arg-type]


def test_turn_meta_stores_the_wire_form_as_before_and_reads_back_typed():
    t = Trigger.chat("demo", 5)
    meta = turn_meta("chat", t, persona=None, head="abc", asked={"by": "ann"})
    # The session log keeps exactly what it kept when the reviewers wrote the dict by hand.
    assert meta == {"flow": "chat", "trigger": "demo:chat:5", "persona": None, "head": "abc",
                    "asked": {"by": "ann"}}
    assert list(meta) == ["flow", "trigger", "persona", "head", "asked"]
    assert meta_trigger(meta) == t
    with pytest.raises(TypeError):
        turn_meta("chat", "demo:chat:5")  # type: ignore[arg-type]


def test_posted_answer_is_the_first_submitted_review_answering_the_trigger():
    import random

    rng = random.Random(7)
    for _ in range(200):
        reviews = []
        for i in range(rng.randrange(6)):
            trigger = Trigger.auto("demo", rng.choice(["abc", "def"]))
            body = rng.choice(["", "text\n" + review_marker(trigger), None])
            r = post(body or "", login=rng.choice(["Shop-Review-Bot", "alice", None]))
            reviews.append(r.model_copy(update={
                "id": i, "body": body,
                "state": rng.choice(["COMMENTED", "PENDING"])}))
        wanted = Trigger.auto("demo", "abc")
        assert posted_answer(reviews, ME, wanted) is next(
            (r for r in reviews if r.state != "PENDING" and answers_trigger(r, ME, wanted)),
            None)
