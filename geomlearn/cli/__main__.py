"""`python -m geomlearn.cli`: the `geomlearn` command."""

import sys

from . import main

sys.exit(main())
