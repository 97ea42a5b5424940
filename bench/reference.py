"""The floor ``/noop`` is held to: a bare Flask app on gunicorn with TLS answering a no-op
AdmissionReview, with no qos-guard code. gunicorn as a Flask app is commonly deployed: 2 gthread workers x 4
threads, keep-alive. ``python -m bench.reference --bind HOST:PORT --cert-file F --key-file F``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from flask import Flask, Response, request
from gunicorn.app.base import BaseApplication


def create_app() -> Flask:
    app = Flask("reference")

    @app.post("/noop")
    def noop() -> Response:
        review = json.loads(request.get_data())
        answer = {"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
                  "response": {"uid": review["request"]["uid"], "allowed": True}}
        return Response(json.dumps(answer), mimetype="application/json")

    return app


class _Gunicorn(BaseApplication):  # type: ignore[misc]
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        return create_app()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.reference")
    parser.add_argument("--bind", required=True)
    parser.add_argument("--cert-file", required=True)
    parser.add_argument("--key-file", required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args(argv)
    _Gunicorn({"bind": [args.bind], "workers": args.workers, "worker_class": "gthread", "threads": args.threads,
               "keepalive": 75, "certfile": args.cert_file, "keyfile": args.key_file, "accesslog": None,
               "loglevel": "warning"}).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
