"""The ``qos-guard`` command (and ``kubectl qos-guard``): ``parser`` reads the arguments, ``commands`` does one
call into a layer per command. The only module that sees every layer."""

from webhook.cli.commands import serve_options
from webhook.cli.parser import add_serve_arguments, build_parser, main

__all__ = ["add_serve_arguments", "build_parser", "main", "serve_options"]
