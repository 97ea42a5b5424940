"""Which certificate ``serve`` uses: the files it is given, checked before anything listens, or else the local
development CA (made once in its own folder, ``certs/localhost/``, and reused; never over files it did not
make, such as what ``qos-guard certs`` writes to ``certs/``)."""

from __future__ import annotations

import ssl
import sys
from pathlib import Path

from webhook.serving.certs import LOCAL_CA_DIR, ForeignFiles, ensure_local
from webhook.serving.options import ServeError, ServeOptions
from webhook.serving.tls import server_context


def resolve_certificates(opts: ServeOptions, workdir: Path) -> tuple[str, str, str | None]:
    """(cert, key, CA path to show): the given files, checked, or the local development CA."""
    if bool(opts.cert_file) != bool(opts.key_file):
        raise ServeError("--cert-file and --key-file go together")
    if opts.cert_file and opts.key_file:
        try:
            server_context(opts.cert_file, opts.key_file)
        except FileNotFoundError as exc:  # ssl names no file (exc.filename is None): say which one is missing
            given = (("--cert-file", opts.cert_file), ("--key-file", opts.key_file))
            missing = [f"{flag} {path}" for flag, path in given if not Path(path).is_file()] or [
                f"--cert-file {opts.cert_file} or --key-file {opts.key_file}: {exc.strerror or exc}"]
            raise ServeError(f"certificate file not found: {', '.join(missing)}") from None
        except (OSError, ssl.SSLError) as exc:
            raise ServeError(f"cannot use --cert-file {opts.cert_file} / --key-file {opts.key_file}: {exc}") from None
        return opts.cert_file, opts.key_file, None
    try:
        paths, created = ensure_local(workdir / LOCAL_CA_DIR)
    except ForeignFiles as exc:
        raise ServeError(str(exc)) from None
    verb = "created" if created else "reusing"
    print(f"qos-guard: {verb} a local development CA: {paths.ca} (certificate {paths.cert}, "
          f"SANs localhost and 127.0.0.1)", file=sys.stderr)
    return str(paths.cert), str(paths.key), str(paths.ca)
