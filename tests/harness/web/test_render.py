"""Server-rendered pieces: times and SVG charts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from dsh_harness.web.render import MAX_POINTS, cost_chart, day_chart, turn_chart, when


def test_times_are_written_in_utc_for_the_browser_to_localize():
    t = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=8)))
    html = str(when(t))
    assert html == ('<time datetime="2026-01-01T19:04:05+00:00">2026-01-01 19:04:05 UTC'
                    '</time>')
    assert str(when("2026-01-01T19:04:05+00:00")) == html
    assert str(when(None)) == ""


def test_charts_escape_labels_scale_bars_and_keep_the_last_points():
    pts = [("<b>x</b>", [100, 300, 10, 0.5]), ("y", [100, 0, 10, 1.0])]
    svg = str(cost_chart(pts, "cap <i>"))
    assert "<b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg and "cap &lt;i&gt;" in svg
    assert svg.count('<rect class="bar"') == 2
    assert "cache hit 75.0%" in svg and "cache hit 0.0%" in svg
    many = [[i, datetime.now(UTC).isoformat(), [1, 1, 1, 0.1], "review"] for i in range(300)]
    svg = str(turn_chart(many))
    assert svg.count('<rect class="bar"') == MAX_POINTS and f"last {MAX_POINTS} of 300" in svg
    assert str(day_chart({})) == ""
    assert str(day_chart({"2026-01-02": [1, 1, 1, 1.0], "2026-01-01": [1, 1, 1, 1.0]})
               ).index("2026-01-01") < str(day_chart({"2026-01-02": [1, 1, 1, 1.0],
                                                       "2026-01-01": [1, 1, 1, 1.0]})
                                           ).index("2026-01-02")


def test_days_without_activity_are_on_the_axis():
    days = {"2026-01-30": [100, 100, 10, 0.2], "2026-02-02": [0, 300, 10, 0.1]}
    html = str(day_chart(days))
    assert html.count('<rect class="bar"') == 4, "30, 31 Jan, 1 and 2 Feb"
    assert "2026-01-31: $0.000000, no prompt tokens" in html
    assert "2026-02-01: $0.000000, no prompt tokens" in html
    assert str(day_chart({})) == ""


def test_a_turn_without_tokens_is_no_zero_percent_hit():
    pts = [("a", [0, 100, 1, 0.1]), ("b", [0, 0, 0, 0.0]), ("c", [50, 50, 1, 0.1]),
           ("d", [0, 100, 1, 0.1])]
    html = str(cost_chart(pts, "turns"))
    assert html.count('<circle class="dot"') == 3, "no dot for the turn without tokens"
    # The line breaks at b: one segment a (alone, no line), one segment c-d.
    assert html.count('<polyline class="hit"') == 1
    assert "cache hit 0.0%" not in html
