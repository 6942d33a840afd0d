"""`python -m threadlog.cli ...` runs the `threadlog` command."""

import sys

from threadlog.cli import main

sys.exit(main())
