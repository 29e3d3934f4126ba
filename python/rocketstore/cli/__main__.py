"""``python -m rocketstore.cli``: the ``rocketstore`` command."""

import sys

from rocketstore.cli import main

sys.exit(main())
