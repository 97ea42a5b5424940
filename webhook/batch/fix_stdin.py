"""``qos-guard fix -``: a filter, standard input to standard output, as editors and pre-commit pipelines use
one. The text is fixed as a file would be (``rewrite.fix_text``: comments and layout kept); what was changed
and what is left go to stderr, so stdout is only the manifest: on an error, the input unchanged."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import BinaryIO

from webhook.batch.report import STDIN_SHOWN
from webhook.batch.runner import FixTally, _diff
from webhook.batch.textsafe import escape
from webhook.core.config import Config
from webhook.manifests.documents import MAX_FILE_BYTES, MIB

NAME = "-"
SHOWN = STDIN_SHOWN  # as check names standard input in its messages


def fix_stdin(config: Config, stdin: BinaryIO, write: Callable[[bytes], None], print_line: Callable[[str], None],
              dry_run: bool = False) -> FixTally:
    """Fix what ``stdin`` holds and ``write`` the result (with ``dry_run``, the diff); lines for stderr go to
    ``print_line``. Exit codes as ``fix``: the input is written back unchanged when it cannot be fixed."""
    from webhook.batch.files import NotFixed
    from webhook.batch.rewrite import decode, encoded, fix_text

    tally = FixTally(dry_run=dry_run)
    data = stdin.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        print_line(f"{SHOWN}: error: standard input is over the {MAX_FILE_BYTES // MIB} MiB limit; not read")
        tally.errors += 1
        return tally
    try:
        decoded = decode(data)
        text = decoded.text
        result = fix_text(NAME, text, config)
        new_data = encoded(decoded, result)
    except NotFixed as exc:
        print_line(escape(exc.render(SHOWN)))
        tally.errors += 1
        if not dry_run:
            write(data)  # a filter never eats its input: an editor would replace the buffer with nothing
        return tally
    verb = "would fix" if dry_run else "fixed"
    tally.objects += result.objects
    tally.skipped.update(result.skipped)
    for error in result.errors:
        print_line(escape(f"{SHOWN}:{error.line}: error: {error.message}; this document not changed"))
        tally.errors += 1
    tally.changed += bool(result.changes)
    for target, change in result.changes:
        print_line(escape(f"{SHOWN}{result.at(target, change.path)}: {target.kind}/{target.name}: {verb}: "
                          f"{change.message}"))
    for target, change, why in result.refused:
        print_line(escape(f"{SHOWN}{result.at(target, change.path)}: {target.kind}/{target.name}: not fixed: "
                          f"{change.message}: {why}"))
        tally.remaining += 1
    for target, violation, remedy in result.remaining:
        why = f"cannot be fixed with this configuration: {remedy}" if remedy else "cannot be fixed automatically"
        print_line(escape(f"{SHOWN}{result.at(target, violation.path)}: {target.kind}/{target.name}: "
                          f"{violation.rule}: {violation.message} ({why})"))
        tally.remaining += 1
    if dry_run:
        if result.new_text is not None:
            write(_diff("stdin", text, result.edits).encode("utf-8"))
    else:
        write(new_data if new_data is not None else data)
    return tally


def main_stdin(config: Config, dry_run: bool) -> FixTally:
    """``fix_stdin`` on the process's own standard streams."""
    def write(data: bytes) -> None:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()

    return fix_stdin(config, sys.stdin.buffer, write, lambda line: print(line, file=sys.stderr), dry_run=dry_run)
