"""python -m hvd_linreg: the same as the hvd-linreg command."""

import sys

from hvd_linreg.cli import main

sys.exit(main())
