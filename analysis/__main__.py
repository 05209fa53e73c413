"""`python -m analysis query|phase|report ...`: the analysis subcommands without sweeper."""

import sys

from .cli import main

sys.exit(main())
