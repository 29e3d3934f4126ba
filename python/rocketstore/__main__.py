"""``python -m rocketstore``: the ``rocketstore`` command."""

import sys

from rocketstore.cli import main

sys.exit(main())
