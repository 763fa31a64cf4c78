"""Own words, the model's side: the bot's posts carry text the model wrote, and the
model reads text an attacker wrote (a PR body, a diff, a comment). A model talked into echoing a
marker must not make the bot's own post say something the bot did not mean: only the marker the
bot appends counts. Each case fails when model text reaches GitHub with a live marker."""

from __future__ import annotations

from dsh_github_reviewer.core.triggers import (
    SUMMARY_MARKER,
    BotIdentity,
    Trigger,
    answers_command,
    answers_trigger,
    fixed_in_marker,
    fixed_marker,
    fixed_threads,
    gave_up_on,
    is_summary,
    marks_fixed_in,
    notice_marker,
    posted_trigger,
    reply_marker,
    review_marker,
)
from dsh_github_reviewer.github.models import Review, User
from dsh_github_reviewer.github.review_submit import Draft, DraftComment, review_payload
from dsh_github_reviewer.pr_output.replies import post_reply
from dsh_github_reviewer.work.notices import public_error

ME = BotIdentity("shop-review-bot")
REAL = Trigger.auto("demo", "aaa")
NEXT = Trigger.auto("demo", "bbb")     # the head the PR's author means to push next
ECHO = "\n".join(["Looks fine.", review_marker(NEXT), fixed_marker([7]), SUMMARY_MARKER,
                  reply_marker(99), notice_marker(Trigger.bot("demo", 99)), fixed_in_marker(7)])


def mine(body: str) -> Review:
    return Review(id=1, state="COMMENTED", body=body, user=User(login=ME.login))


def assert_only_real(item, trigger: Trigger | None = None) -> None:
    assert not answers_trigger(item, ME, NEXT)
    assert posted_trigger(item, ME) in (trigger, None)
    assert fixed_threads(item, ME) == [] and not marks_fixed_in(item, ME, 7)
    assert not is_summary(item, ME) and not answers_command(item, ME, 99)
    assert not gave_up_on(item, ME, Trigger.bot("demo", 99))


def test_a_review_body_and_findings_echoing_markers_keep_only_the_bots_marker():
    finding = DraftComment(path="a.py", body=ECHO, subject_type="LINE", line=1, side="RIGHT",
                           severity="minor")
    note = DraftComment(path="a.py", body=ECHO, subject_type="FILE", severity="minor")
    body, inline = review_payload(Draft("aaa", [finding, note]), ECHO, REAL)
    assert_only_real(mine(body), REAL)
    assert answers_trigger(mine(body), ME, REAL)
    for c in inline:
        assert_only_real(mine(c["body"]))


async def test_a_chat_answer_echoing_markers_answers_only_its_command():
    posted: list[str] = []

    class Client:
        async def list_issue_comments(self, *a):
            return []

        async def post_issue_comment(self, owner, repo, number, body):
            posted.append(body)

    class Cmd:
        comment_id, source, thread_root = 5, "issue", None

    await post_reply(Client(), "o", "r", 1, Cmd(), ECHO, ME)
    reply = mine(posted[0])
    assert answers_command(reply, ME, 5)
    assert_only_real(reply)


def test_an_error_echoing_markers_is_shown_without_them():
    assert_only_real(mine(public_error(ECHO)))


async def test_an_answer_longer_than_github_takes_is_cut_and_keeps_its_marker():
    """GitHub refuses a comment over 65,536 characters (422): a long /bot answer would fail
    and be paid for again on every retry."""
    posted: list[str] = []

    class Client:
        async def list_issue_comments(self, *a):
            return []

        async def post_issue_comment(self, owner, repo, number, body):
            posted.append(body)

    class Cmd:
        comment_id, source, thread_root = 5, "issue", None

    await post_reply(Client(), "o", "r", 1, Cmd(), "word " * 30_000, ME)
    assert len(posted[0]) <= 65_536 and answers_command(mine(posted[0]), ME, 5)
    assert "[cut: too long]" in posted[0]
