"""``python -m bench.serve``: ``qos-guard serve`` with what only benchmarks and hostile-client tests want, kept
out of the production command and server:

- ``--enable-noop``: ``POST /noop`` parses the AdmissionReview and allows it (the floor ``/validate`` is held to);
- ``--worker-model gthread --threads N``: gunicorn's thread-per-connection worker, the model the gevent
  ``GuardedWorker`` replaced (docs/reliability.md), to compare with.

Every ``serve`` flag works as in ``qos-guard serve``.
"""

from __future__ import annotations

import argparse
import json
import sys

from flask import Flask, Response

from webhook.admission.review import allowed, parse_review, response
from webhook.cli import add_serve_arguments, serve_options
from webhook.serving.options import ServeError
from webhook.serving.server import serve


def add_noop(app: Flask) -> None:
    """``POST /noop``: read the body as every route does, parse it, allow (errors answered as on every route)."""
    read_body = app.extensions["qos_guard.read_body"]

    def noop() -> Response:
        review = parse_review(read_body())
        return Response(json.dumps(response(review, allowed())), mimetype="application/json")

    app.add_url_rule("/noop", "noop", noop, methods=["POST"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.serve", description=__doc__.split("\n", 1)[0])
    add_serve_arguments(parser)
    parser.add_argument("--enable-noop", action="store_true", help="POST /noop: parse and allow")
    parser.add_argument("--worker-model", choices=("gevent", "gthread"), default="gevent")
    parser.add_argument("--threads", type=int, default=4, help="gthread only")
    args = parser.parse_args(argv)
    overrides = {"worker_class": "gthread", "threads": args.threads} if args.worker_model == "gthread" else {}
    try:
        return serve(serve_options(args), add_noop if args.enable_noop else None, overrides)
    except ServeError as exc:
        print(f"bench.serve: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
