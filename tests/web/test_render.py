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
