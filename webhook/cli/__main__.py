"""``python -m webhook.cli``: the same as the ``qos-guard`` command."""

import sys

from webhook.cli.parser import main

sys.exit(main())
