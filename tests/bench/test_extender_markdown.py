"""bench/extender.py rewrites its tables in docs/performance/extender.md and keeps the analysis written by hand
after them: a run of ``make bench`` must not erase what a profile taught."""

from __future__ import annotations

from bench.extender import KEPT, MARKDOWN, with_kept


def test_a_run_keeps_the_hand_written_text_after_the_mark_and_replaces_the_tables() -> None:
    old = f"# old tables\n| a |\n\n{KEPT}\n\n## Profiled by hand\nwhy it is slow\n"
    new = with_kept("# new tables\n| b |\n", old)
    assert new == f"# new tables\n| b |\n\n{KEPT}\n\n## Profiled by hand\nwhy it is slow\n"
    assert with_kept("# new tables\n| b |\n", new) == new  # a second run changes nothing


def test_a_file_without_the_mark_gets_the_tables_alone() -> None:
    assert with_kept("# t\n", "# old, all generated\n") == "# t\n"


def test_the_committed_report_has_the_mark() -> None:
    assert KEPT in MARKDOWN.read_text()
